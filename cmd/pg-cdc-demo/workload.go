package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// schemaSQL is the sample shop. orders.note is stored EXTERNAL (out of
// line, uncompressed) and is about 3 kB, so every note is TOASTed: an UPDATE
// that leaves it alone does not send it, and pg-cdc records the column in
// __unchanged. order_items has a composite key. events has no primary key:
// pg-cdc captures it insert-only.
const schemaSQL = `
CREATE TABLE customers (
  id         bigint PRIMARY KEY,
  name       text NOT NULL,
  email      text,
  balance    numeric(12,2) NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders (
  id          bigint PRIMARY KEY,
  customer_id bigint NOT NULL,
  status      text NOT NULL,
  total       numeric(12,2),
  created_at  timestamptz NOT NULL DEFAULT now(),
  note        text
);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE order_items (
  order_id bigint,
  line     int,
  sku      uuid NOT NULL,
  qty      int NOT NULL,
  price    numeric(10,2) NOT NULL,
  PRIMARY KEY (order_id, line)
);
CREATE TABLE events (
  at      timestamptz NOT NULL DEFAULT now(),
  kind    text NOT NULL,
  payload jsonb
);
`

// Seed sizes: a few thousand rows, so the snapshot has something to copy.
const (
	seedCustomers = 1000
	seedOrders    = 3000 // three items each
	seedEvents    = 2000
)

// noteSQL makes a ~3 kB note that is TOASTed under STORAGE EXTERNAL.
const noteSQL = `repeat('gift wrap, leave at the door. ', 100) || %s`

func (d *demo) createSchema(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return fmt.Errorf("connect to shop: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	stmts := []string{
		schemaSQL,
		fmt.Sprintf(`INSERT INTO customers (id, name, email, balance)
			SELECT g, 'customer ' || g, 'c' || g || '@example.com', (g %% 500) * 1.5 FROM generate_series(1, %d) g`, seedCustomers),
		fmt.Sprintf(`INSERT INTO orders (id, customer_id, status, total, note)
			SELECT g, 1 + g %% %d, 'new', g * 0.75, `+fmt.Sprintf(noteSQL, "g")+` FROM generate_series(1, %d) g`, seedCustomers, seedOrders),
		fmt.Sprintf(`INSERT INTO order_items
			SELECT o, l, gen_random_uuid(), l, 9.99 * l FROM generate_series(1, %d) o, generate_series(1, 3) l`, seedOrders),
		fmt.Sprintf(`INSERT INTO events (kind, payload)
			SELECT 'page_view', jsonb_build_object('n', g) FROM generate_series(1, %d) g`, seedEvents),
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("create the sample schema: %w", err)
		}
	}
	d.printf("database shop: customers %d, orders %d (each with a ~3 kB TOASTed note), order_items %d (composite key), events %d (no primary key)\n",
		seedCustomers, seedOrders, 3*seedOrders, seedEvents)
	return nil
}

// opCounts counts change rows by operation, as pg-cdc should write them.
type opCounts struct{ I, U, D, T int64 }

func (c *opCounts) add(o opCounts) { c.I += o.I; c.U += o.U; c.D += o.D; c.T += o.T }

// workStats is what the workload committed. Only committed transactions
// count: a transaction's counts are merged after its COMMIT succeeds.
type workStats struct {
	mu        sync.Mutex
	elapsed   time.Duration
	txns      int64
	perTable  map[string]*opCounts // "public.orders" → rows pg-cdc should write
	toastKept int64                // updates that left orders.note untouched
	notes     []string             // the special steps, in order
	// mark is the source at one moment of the run, which the demo reads
	// back through pg-cdc query --as-of at the end.
	mark sourceMark
}

// sourceMark is the source at one moment: its clock, and what the sink
// must answer for that time.
type sourceMark struct {
	at             time.Time
	orders         int64
	customerTotals string // sum(balance) of customers, exact
}

func (s *workStats) commit(txn map[string]*opCounts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txns++
	for t, c := range txn {
		if s.perTable[t] == nil {
			s.perTable[t] = &opCounts{}
		}
		s.perTable[t].add(*c)
	}
}

func (s *workStats) totals() (txns int64, all opCounts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.perTable {
		all.add(*c)
	}
	return s.txns, all
}

func (s *workStats) expected(table string) opCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.perTable[table]; c != nil {
		return *c
	}
	return opCounts{}
}

func (s *workStats) print(w io.Writer) {
	txns, all := s.totals()
	fmt.Fprintf(w, "workload: %d transactions committed in %s: %d inserted, %d updated (%d of them left the TOASTed note untouched), %d deleted rows\n",
		txns, s.elapsed.Round(100*time.Millisecond), all.I, all.U, s.toastKept, all.D)
}

// workload drives the shop: a steady stream of small random transactions,
// and at fixed points of the run the special cases pg-cdc must get right.
type workload struct {
	pool  *pgxpool.Pool
	rng   *rand.Rand
	stats *workStats
	say   func(format string, args ...any)

	nextCustomer, nextOrder int64
	// bulkFrom..bulkTo are the imported orders, whose short note is not
	// TOASTed (so an update sends it again).
	bulkFrom, bulkTo int64
}

// special steps, at a fraction of the run.
type special struct {
	at   float64
	name string
	run  func(w *workload, ctx context.Context) error
}

var specials = []special{
	{0.15, "primary-key change", (*workload).keyChange},
	{0.30, "TOAST-preserving update", (*workload).toastUpdate},
	{0.45, "TRUNCATE", (*workload).truncate},
	{0.60, "large transaction", (*workload).bulkImport},
	{0.75, "rolled-back transaction", (*workload).rollback},
	{0.85, "a moment to travel back to", (*workload).markMoment},
}

// markMoment records the source between two transactions: the server's
// clock and what two tables hold then. Every transaction before it has
// committed, and the next starts after it, so the sink as of that time
// (by commit time) must hold exactly this.
func (w *workload) markMoment(ctx context.Context) error {
	var m sourceMark
	err := w.pool.QueryRow(ctx, `SELECT clock_timestamp(), (SELECT count(*) FROM orders), (SELECT coalesce(sum(balance), 0)::text FROM customers)`).
		Scan(&m.at, &m.orders, &m.customerTotals)
	if err != nil {
		return err
	}
	w.stats.mu.Lock()
	w.stats.mark = m
	w.stats.mu.Unlock()
	w.say("  * noted the moment %s: %d orders, customers' balances sum to %s\n", m.at.UTC().Format(time.RFC3339Nano), m.orders, m.customerTotals)
	return nil
}

// runWorkload runs the workload for the configured duration, with a
// progress line every few seconds, and fails if the daemon exits meanwhile.
func (d *demo) runWorkload(ctx context.Context, dm *daemon) (*workStats, error) {
	pool, err := pgxpool.New(ctx, d.url)
	if err != nil {
		return nil, fmt.Errorf("connect to shop: %w", err)
	}
	defer pool.Close()
	stats := &workStats{perTable: map[string]*opCounts{}}
	w := &workload{
		pool: pool, rng: rand.New(rand.NewPCG(1, 2)), stats: stats, say: d.printf,
		nextCustomer: seedCustomers + 1, nextOrder: seedOrders + 1,
	}

	var lastProgress atomic.Int64 // unix nanoseconds of the last progress line
	g, gctx := errgroup.WithContext(ctx)
	workDone := make(chan struct{})
	began := time.Now()
	g.Go(func() error {
		defer close(workDone)
		if err := w.run(gctx, d.opts.duration); err != nil {
			return fmt.Errorf("workload: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		tick := time.NewTicker(4 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-workDone:
				return nil
			case <-tick.C:
				if err := d.progress(gctx, pool, stats, time.Since(began)); err != nil {
					return err
				}
				lastProgress.Store(time.Now().UnixNano())
			}
		}
	})
	g.Go(func() error {
		select {
		case <-dm.done:
			return fmt.Errorf("pg-cdc start %s during the workload", dm.exitStatus())
		case <-workDone:
			return nil
		case <-gctx.Done():
			return nil
		}
	})
	err = g.Wait()
	stats.elapsed = time.Since(began)
	if err != nil {
		if dm.exited() {
			d.printLogTail(30)
		}
		return nil, err
	}
	// A last line, unless the ticker just printed one.
	if time.Since(time.Unix(0, lastProgress.Load())) > time.Second {
		if err := d.progress(ctx, pool, stats, stats.elapsed); err != nil {
			return nil, err
		}
	}
	return stats, nil
}

// progress prints one line: what the workload committed, what pg-cdc has
// made durable (the manifest) and what it has confirmed to PostgreSQL.
func (d *demo) progress(ctx context.Context, pool *pgxpool.Pool, stats *workStats, elapsed time.Duration) error {
	txns, all := stats.totals()
	sink := "no flush yet"
	b, err := os.ReadFile(filepath.Join(d.sink, filepath.FromSlash(manifest.Key)))
	if err != nil {
		return fmt.Errorf("read the manifest: %w", err)
	}
	m, err := manifest.Decode(b)
	if err != nil {
		return fmt.Errorf("read the manifest: %w", err)
	}
	if m.Epoch > 0 {
		sink = fmt.Sprintf("epoch %d, end LSN %s", m.Epoch, m.EndLSN)
	}
	var confirmed, current string
	err = pool.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn::text, '-'), pg_current_wal_lsn()::text
		FROM pg_replication_slots WHERE slot_name = 'pg_cdc_slot'`).Scan(&confirmed, &current)
	if err != nil {
		return fmt.Errorf("read the slot: %w", err)
	}
	d.printf("[%4.0fs] source: %d txns (I %d, U %d, D %d), WAL at %s | sink: %s | slot confirmed %s\n",
		elapsed.Seconds(), txns, all.I, all.U, all.D, current, sink, confirmed)
	return nil
}

func (w *workload) run(ctx context.Context, duration time.Duration) error {
	began := time.Now()
	next := 0
	for {
		elapsed := time.Since(began)
		if elapsed >= duration {
			return nil
		}
		if next < len(specials) && elapsed >= time.Duration(specials[next].at*float64(duration)) {
			if err := specials[next].run(w, ctx); err != nil {
				return fmt.Errorf("%s: %w", specials[next].name, err)
			}
			next++
			continue
		}
		if err := w.randomTxn(ctx); err != nil {
			return err
		}
		// A steady, readable pace rather than a benchmark.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// txn runs fn in a transaction and, once it committed, adds its counts.
func (w *workload) txn(ctx context.Context, fn func(tx pgx.Tx, c counter) error) error {
	counts := map[string]*opCounts{}
	c := func(table string, op byte, n int64) {
		if counts[table] == nil {
			counts[table] = &opCounts{}
		}
		switch op {
		case 'I':
			counts[table].I += n
		case 'U':
			counts[table].U += n
		case 'D':
			counts[table].D += n
		case 'T':
			counts[table].T += n
		}
	}
	if err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error { return fn(tx, c) }); err != nil {
		return err
	}
	w.stats.commit(counts)
	return nil
}

// counter records n change rows of op for a table ("public.orders").
type counter func(table string, op byte, n int64)

// execCount runs one statement and counts the rows it touched as op.
func execCount(ctx context.Context, tx pgx.Tx, c counter, table string, op byte, sql string, args ...any) (int64, error) {
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Fields(sql)[0], err)
	}
	c(table, op, tag.RowsAffected())
	return tag.RowsAffected(), nil
}

// randomTxn is one small business transaction.
func (w *workload) randomTxn(ctx context.Context) error {
	r := w.rng.IntN(100)
	switch {
	case r < 30: // a new order with its items
		id := w.nextOrder
		customer := 1 + w.rng.Int64N(w.nextCustomer-1)
		items := 1 + w.rng.IntN(4)
		err := w.txn(ctx, func(tx pgx.Tx, c counter) error {
			if _, err := execCount(ctx, tx, c, "public.orders", 'I',
				`INSERT INTO orders (id, customer_id, status, total, note) VALUES ($1, $2, 'new', $3, `+fmt.Sprintf(noteSQL, "$4::text")+`)`,
				id, customer, float64(items)*19.5, fmt.Sprint(id)); err != nil {
				return err
			}
			if _, err := execCount(ctx, tx, c, "public.order_items", 'I',
				`INSERT INTO order_items SELECT $1, l, gen_random_uuid(), l, 19.50 FROM generate_series(1, $2::int) l`, id, items); err != nil {
				return err
			}
			_, err := execCount(ctx, tx, c, "public.events", 'I',
				`INSERT INTO events (kind, payload) VALUES ('order_created', jsonb_build_object('order', $1::bigint))`, id)
			return err
		})
		if err == nil {
			w.nextOrder++
		}
		return err
	case r < 55: // an order moves on: only status changes, note stays TOASTed
		id := 1 + w.rng.Int64N(w.nextOrder-1)
		status := []string{"paid", "packed", "shipped", "delivered"}[w.rng.IntN(4)]
		return w.txn(ctx, func(tx pgx.Tx, c counter) error {
			n, err := execCount(ctx, tx, c, "public.orders", 'U', `UPDATE orders SET status = $1 WHERE id = $2`, status, id)
			if id < w.bulkFrom || id > w.bulkTo {
				w.stats.mu.Lock()
				w.stats.toastKept += n
				w.stats.mu.Unlock()
			}
			return err
		})
	case r < 70: // a payment changes a balance
		id := 1 + w.rng.Int64N(w.nextCustomer-1)
		return w.txn(ctx, func(tx pgx.Tx, c counter) error {
			_, err := execCount(ctx, tx, c, "public.customers", 'U', `UPDATE customers SET balance = balance + $1 WHERE id = $2`, w.rng.IntN(100), id)
			return err
		})
	case r < 80: // a new customer
		id := w.nextCustomer
		err := w.txn(ctx, func(tx pgx.Tx, c counter) error {
			_, err := execCount(ctx, tx, c, "public.customers", 'I',
				`INSERT INTO customers (id, name, email) VALUES ($1, 'customer ' || $2::text, 'c' || $2::text || '@example.com')`, id, fmt.Sprint(id))
			return err
		})
		if err == nil {
			w.nextCustomer++
		}
		return err
	case r < 90: // an order is cancelled and removed with its items
		id := 1 + w.rng.Int64N(w.nextOrder-1)
		return w.txn(ctx, func(tx pgx.Tx, c counter) error {
			if _, err := execCount(ctx, tx, c, "public.order_items", 'D', `DELETE FROM order_items WHERE order_id = $1`, id); err != nil {
				return err
			}
			_, err := execCount(ctx, tx, c, "public.orders", 'D', `DELETE FROM orders WHERE id = $1`, id)
			return err
		})
	default: // page views
		return w.txn(ctx, func(tx pgx.Tx, c counter) error {
			_, err := execCount(ctx, tx, c, "public.events", 'I',
				`INSERT INTO events (kind, payload) SELECT 'page_view', jsonb_build_object('n', g) FROM generate_series(1, $1::int) g`, 1+w.rng.IntN(5))
			return err
		})
	}
}

// keyChange changes a customer's primary key: pg-cdc writes a D row for the
// old key and a U row for the new one.
func (w *workload) keyChange(ctx context.Context) error {
	return w.txn(ctx, func(tx pgx.Tx, c counter) error {
		var oldID, newID int64
		err := tx.QueryRow(ctx, `UPDATE customers SET id = id + 1000000
			WHERE id = (SELECT min(id) FROM customers) RETURNING id - 1000000, id`).Scan(&oldID, &newID)
		if err != nil {
			return err
		}
		c("public.customers", 'D', 1)
		c("public.customers", 'U', 1)
		w.say("  * primary-key change: customers.id %d → %d (pg-cdc writes D for the old key, U for the new)\n", oldID, newID)
		return nil
	})
}

// toastUpdate changes the status of 100 orders in one statement; their
// TOASTed note is not sent, so the rows list it in __unchanged.
func (w *workload) toastUpdate(ctx context.Context) error {
	return w.txn(ctx, func(tx pgx.Tx, c counter) error {
		n, err := execCount(ctx, tx, c, "public.orders", 'U', `UPDATE orders SET status = 'gift-wrapped' WHERE id BETWEEN 101 AND 200`)
		if err != nil {
			return err
		}
		w.stats.mu.Lock()
		w.stats.toastKept += n
		w.stats.mu.Unlock()
		w.say("  * %d orders: status updated, the TOASTed note left untouched (not sent; listed in __unchanged)\n", n)
		return nil
	})
}

// truncate empties events: one T marker row.
func (w *workload) truncate(ctx context.Context) error {
	var before int64
	err := w.txn(ctx, func(tx pgx.Tx, c counter) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&before); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `TRUNCATE events`); err != nil {
			return err
		}
		c("public.events", 'T', 1)
		return nil
	})
	if err == nil {
		w.say("  * TRUNCATE events (%d rows): pg-cdc writes one T marker; older rows no longer count\n", before)
	}
	return err
}

// bulkImport is one transaction of 20,000 rows: 5,000 orders with three
// items each. It is far beyond logical_decoding_work_mem, so PostgreSQL
// streams it to pg-cdc in chunks before it commits; it becomes visible in
// the sink only with its commit.
func (w *workload) bulkImport(ctx context.Context) error {
	const orders = 5000
	first := w.nextOrder
	began := time.Now()
	err := w.txn(ctx, func(tx pgx.Tx, c counter) error {
		if _, err := execCount(ctx, tx, c, "public.orders", 'I',
			`INSERT INTO orders (id, customer_id, status, total, note)
			 SELECT g, 1 + g % 1000, 'imported', 42.00, 'bulk import' FROM generate_series($1::bigint, $2::bigint) g`,
			first, first+orders-1); err != nil {
			return err
		}
		_, err := execCount(ctx, tx, c, "public.order_items", 'I',
			`INSERT INTO order_items SELECT o, l, gen_random_uuid(), 1, 14.00
			 FROM generate_series($1::bigint, $2::bigint) o, generate_series(1, 3) l`, first, first+orders-1)
		return err
	})
	if err != nil {
		return err
	}
	w.nextOrder += orders
	w.bulkFrom, w.bulkTo = first, first+orders-1
	w.say("  * one transaction of %d rows (%d orders + %d items) committed in %s; PostgreSQL streams it to pg-cdc while it runs\n",
		4*orders, orders, 3*orders, time.Since(began).Round(time.Millisecond))
	return nil
}

// rollback inserts 2,000 events and rolls back: nothing of it may reach the
// sink, although PostgreSQL already streamed part of it.
func (w *workload) rollback(ctx context.Context) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (kind, payload)
		SELECT 'never_committed', jsonb_build_object('n', g) FROM generate_series(1, 2000) g`); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // the insert's error is the one to report
		return err
	}
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	w.say("  * a transaction of 2000 event inserts rolled back: none of it may reach the sink\n")
	return nil
}
