package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaSQL is the three-table sample used by the workload tests. orders.note
// is large enough to be TOASTed, so an UPDATE that leaves it alone sends it
// as unchanged.
const schemaSQL = `
CREATE TABLE customers (
  id bigint PRIMARY KEY,
  name text NOT NULL,
  balance numeric(12,2),
  updated_at timestamptz,
  active boolean
);
CREATE TABLE orders (
  id bigint PRIMARY KEY,
  customer_id bigint,
  amount numeric(12,2),
  status text,
  doc jsonb,
  created_at timestamptz DEFAULT now(),
  note text
);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE items (
  order_id bigint,
  line int,
  sku uuid,
  qty int,
  price float8,
  PRIMARY KEY (order_id, line)
);
`

// seed fills the tables before init, so the snapshot has something to copy.
func seed(t *testing.T, e *env, customers, orders int) {
	t.Helper()
	e.exec(schemaSQL)
	e.exec(`INSERT INTO customers SELECT g, 'customer ' || g, g * 1.25, now(), g % 2 = 0 FROM generate_series(1, $1) g`, customers)
	e.exec(`INSERT INTO orders SELECT g, 1 + g % $2, g * 0.5, 'new', jsonb_build_object('g', g), now(), repeat('x', 3000) || g FROM generate_series(1, $1) g`, orders, customers)
	e.exec(`INSERT INTO items SELECT o, l, gen_random_uuid(), l, o * 0.1 + l FROM generate_series(1, $1) o, generate_series(1, 3) l`, orders)
}

// workload runs random transactions of inserts, updates (including a key
// change and updates that leave the TOASTed note untouched), deletes and
// truncates until ctx ends or n transactions committed. It returns how many
// committed.
func workload(ctx context.Context, url string, seedN int64, n int) (int, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	rng := rand.New(rand.NewPCG(uint64(seedN), 7))
	nextID := int64(1_000_000 + seedN*1_000_000)
	committed := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for j := 0; j < 1+rng.IntN(5); j++ {
				if err := step(ctx, tx, rng, &nextID); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return committed, fmt.Errorf("workload transaction %d: %w", i, err)
		}
		committed++
	}
	return committed, nil
}

func step(ctx context.Context, tx pgx.Tx, rng *rand.Rand, nextID *int64) error {
	var sql string
	var args []any
	switch p := rng.IntN(100); {
	case p < 25:
		*nextID++
		sql = `INSERT INTO orders VALUES ($1::bigint, 1 + $1::bigint % 50, $2::numeric, 'new', jsonb_build_object('n', $1::bigint, 's', 'é"\'), now(), repeat('y', 2500) || $1::bigint)`
		args = []any{*nextID, fmt.Sprintf("%d.%02d", rng.IntN(10000), rng.IntN(100))}
	case p < 35:
		*nextID++
		sql = `INSERT INTO customers VALUES ($1::bigint, $2::text, NULL, now(), NULL)`
		args = []any{*nextID, "new customer\t" + strings.Repeat("z", rng.IntN(5))}
	case p < 50:
		// Leaves orders.note untouched: it arrives as an unchanged TOAST value.
		sql = `UPDATE orders SET status = $2, amount = amount + 1 WHERE id = (SELECT id FROM orders ORDER BY id OFFSET $1 LIMIT 1)`
		args = []any{rng.IntN(200), []string{"paid", "shipped", "void"}[rng.IntN(3)]}
	case p < 60:
		sql = `UPDATE customers SET balance = coalesce(balance, 0) - 3.5, updated_at = now(), active = NOT coalesce(active, false) WHERE id = (SELECT id FROM customers ORDER BY id OFFSET $1 LIMIT 1)`
		args = []any{rng.IntN(200)}
	case p < 70:
		// A primary-key change: D for the old key, U for the new one.
		sql = `UPDATE items SET line = line + 100 WHERE (order_id, line) = (SELECT order_id, line FROM items ORDER BY order_id, line OFFSET $1 LIMIT 1)`
		args = []any{rng.IntN(200)}
	case p < 80:
		*nextID++
		sql = `INSERT INTO items VALUES ($1::bigint, 1, gen_random_uuid(), 2, 'NaN'), ($1::bigint, 2, gen_random_uuid(), 3, '-Infinity')`
		args = []any{*nextID}
	case p < 90:
		sql = `DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY id OFFSET $1 LIMIT 1)`
		args = []any{rng.IntN(200)}
	case p < 97:
		sql = `DELETE FROM items WHERE order_id = (SELECT order_id FROM items ORDER BY order_id DESC OFFSET $1 LIMIT 1)`
		args = []any{rng.IntN(50)}
	case p < 98:
		// A full update including the TOASTed column.
		sql = `UPDATE orders SET note = repeat('w', 4000) WHERE id = (SELECT id FROM orders ORDER BY id DESC LIMIT 1)`
	default:
		sql = `TRUNCATE items`
	}
	_, err := tx.Exec(ctx, sql, args...)
	return err
}

// background is a workload running in its own goroutine.
type background struct {
	done      chan struct{}
	committed int
	err       error
}

// runWorkloadFor runs the workload in the background for d.
func runWorkloadFor(url string, seedN int64, d time.Duration) *background {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	b := &background{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer cancel()
		b.committed, b.err = workload(ctx, url, seedN, 1<<30)
	}()
	return b
}

// wait waits for the workload and fails the test if it failed.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	<-b.done
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.committed == 0 {
		t.Fatal("the workload committed no transaction")
	}
	return b.committed
}

// touchAll writes one more row to each workload table, so that a comparison
// after a workload (which may end with a TRUNCATE) never compares empty
// tables.
func touchAll(e *env) {
	e.t.Helper()
	e.exec(`INSERT INTO customers VALUES (-1, 'last', 0, now(), true);
	        INSERT INTO orders VALUES (-1, -1, 0, 'last', '{}', now(), 'last');
	        INSERT INTO items VALUES (-1, -1, gen_random_uuid(), 0, 0)`)
}
