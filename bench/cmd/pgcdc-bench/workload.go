package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The table of issue 3. Every workload uses it, in a database of its own.
const createTable = `CREATE TABLE bench (id bigint PRIMARY KEY, a int, b text, c timestamptz, d numeric(12,2), e jsonb)`

// rowsSQL selects rows lo..hi of the table's standard content: b is a 32-byte
// md5, e a small JSON object (about 150 bytes per row in all).
func rowsSQL(lo, hi int) string {
	return fmt.Sprintf(`SELECT g, (g %% 100000)::int, md5(g::text), now(), (g %% 10000000) / 100.0,
	jsonb_build_object('k', g, 'tag', 't' || (g %% 97), 'v', md5((g * 7)::text))
	FROM generate_series(%d, %d) g`, lo, hi)
}

// loadRows fills the table with rows 1..n in 1M-row statements, then
// vacuums (hint bits and the visibility map are set now, not by the first
// reader) and checkpoints.
func loadRows(ctx context.Context, c *pgx.Conn, n int) error {
	for lo := 1; lo <= n; lo += 1_000_000 {
		if _, err := c.Exec(ctx, "INSERT INTO bench "+rowsSQL(lo, min(n, lo+999_999))); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	if _, err := c.Exec(ctx, "VACUUM (FREEZE, ANALYZE) bench"); err != nil {
		return err
	}
	_, err := c.Exec(ctx, "CHECKPOINT")
	return err
}

// insertBatches inserts rows lo..hi in transactions of per rows, server-side
// (a DO block that commits), so the client's speed is out of the picture.
func insertBatches(ctx context.Context, c *pgx.Conn, lo, hi, per int) error {
	sql := fmt.Sprintf(`DO $$
DECLARE lo bigint;
BEGIN
  FOR lo IN SELECT generate_series(%d, %d, %d) LOOP
    INSERT INTO bench SELECT g, (g %% 100000)::int, md5(g::text), now(), (g %% 10000000) / 100.0,
      jsonb_build_object('k', g, 'tag', 't' || (g %% 97), 'v', md5((g * 7)::text))
      FROM generate_series(lo, least(lo + %d - 1, %d)) g;
    COMMIT;
  END LOOP;
END $$`, lo, hi, per, per, hi)
	_, err := c.Exec(ctx, sql)
	return err
}

// updateBatches updates rows lo..hi (a, c and d) in transactions of per rows.
func updateBatches(ctx context.Context, c *pgx.Conn, lo, hi, per int) error {
	sql := fmt.Sprintf(`DO $$
DECLARE lo bigint;
BEGIN
  FOR lo IN SELECT generate_series(%d, %d, %d) LOOP
    UPDATE bench SET a = a + 1, c = now(), d = d + 1 WHERE id BETWEEN lo AND least(lo + %d - 1, %d);
    COMMIT;
  END LOOP;
END $$`, lo, hi, per, per, hi)
	_, err := c.Exec(ctx, sql)
	return err
}

// wideBatches inserts rows lo..hi whose b is a text of size bytes, in
// transactions of per rows. The texts are random sequences of common English
// words (zstd makes about a third of them, TOAST's pglz a little more than
// half, so the WAL carries each compressed and pgoutput sends it whole, as
// for real documents); with random=true they are random hex instead, which
// nothing compresses. They come from a pool of 1,000 in another schema (not
// captured), used in turn, so no two rows within a Parquet page repeat a
// value.
func wideBatches(ctx context.Context, c *pgx.Conn, lo, hi, per, size int, random bool) error {
	text := fmt.Sprintf(`(SELECT string_agg(w[1 + floor(random() * array_length(w, 1))::int], ' ')
		FROM generate_series(1, %d / 4 + i * 0), (SELECT string_to_array('%s', ' ') AS w) words)`, size, wordList)
	if random {
		text = fmt.Sprintf(`(SELECT string_agg(md5(random()::text || i || j), '') FROM generate_series(1, %d / 32 + 1) j)`, size)
	}
	pool := fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS aux;
DROP TABLE IF EXISTS aux.pool;
CREATE TABLE aux.pool AS SELECT i, left(%s, %d) AS s FROM generate_series(0, 999) i`, text, size)
	if _, err := c.Exec(ctx, pool); err != nil {
		return fmt.Errorf("wide pool: %w", err)
	}
	sql := fmt.Sprintf(`DO $$
DECLARE lo bigint;
BEGIN
  FOR lo IN SELECT generate_series(%d, %d, %d) LOOP
    INSERT INTO bench SELECT g, (g %% 100000)::int, p.s, now(), (g %% 10000000) / 100.0,
      jsonb_build_object('k', g)
      FROM generate_series(lo, least(lo + %d - 1, %d)) g JOIN aux.pool p ON p.i = g %% 1000;
    COMMIT;
  END LOOP;
END $$`, lo, hi, per, per, hi)
	_, err := c.Exec(ctx, sql)
	return err
}

// wordList is the vocabulary of W4's texts: common English words.
const wordList = "the of and to in is you that it he was for on are as with his they at be this have from or one had by word " +
	"but not what all were we when your can said there use an each which she do how their if will up other about out many " +
	"then them these so some her would make like him into time has look two more write go see number no way could people " +
	"my than first water been call who oil its now find long down day did get come made may part over new sound take only " +
	"little work know place year live me back give most very after thing our just name good sentence man think say great " +
	"where help through much before line right too mean old any same tell boy follow came want show also around form three"

func wideKind(o options) string {
	if o.wideRandom {
		return "random hex"
	}
	return "English words"
}

// workload is one backlog to drain.
type workload struct {
	key, title string
	rows       int // change rows pg-cdc must make durable
	// tables are the captured tables whose delta rows count (nil: the
	// bench table).
	tables []string
	// reps overrides --reps (0: --reps).
	reps int
	// prepare runs before any slot exists (e.g. the rows W2 updates).
	prepare func(ctx context.Context, c *pgx.Conn) error
	// backlog writes the changes with every consumer off.
	backlog func(ctx context.Context, c *pgx.Conn) error
}

func workloads(o options) []workload {
	n, per := o.rows, o.txnRows
	return []workload{
		{
			key: "w1", title: fmt.Sprintf("W1 insert %s rows, %s-row txns", count(n), count(per)), rows: n,
			backlog: func(ctx context.Context, c *pgx.Conn) error { return insertBatches(ctx, c, 1, n, per) },
		},
		{
			key: "w2", title: fmt.Sprintf("W2 update %s rows, %s-row txns", count(n), count(per)), rows: n,
			prepare: func(ctx context.Context, c *pgx.Conn) error {
				if _, err := c.Exec(ctx, "INSERT INTO bench "+rowsSQL(1, n)); err != nil {
					return err
				}
				_, err := c.Exec(ctx, "VACUUM ANALYZE bench")
				return err
			},
			backlog: func(ctx context.Context, c *pgx.Conn) error { return updateBatches(ctx, c, 1, n, per) },
		},
		{
			key: "w3", title: fmt.Sprintf("W3 one %s-row transaction", count(n)), rows: n,
			backlog: func(ctx context.Context, c *pgx.Conn) error {
				_, err := c.Exec(ctx, "INSERT INTO bench "+rowsSQL(1, n))
				return err
			},
		},
		{
			key: "w4", title: fmt.Sprintf("W4 insert %s rows of %s text (%s), %s-row txns", count(o.wideRows), bytesIEC(int64(o.wideBytes)), wideKind(o), count(per)), rows: o.wideRows,
			backlog: func(ctx context.Context, c *pgx.Conn) error {
				return wideBatches(ctx, c, 1, o.wideRows, per, o.wideBytes, o.wideRandom)
			},
		},
		pgbenchWorkload(o),
	}
}

// lagLoad inserts rate rows per second, in per-row transactions, for d,
// from id lo on, and records each transaction's commit. The commit LSN lies
// between before and after (read just before and after the transaction,
// on the same connection).
type committed struct {
	before, after int64
	at            time.Time // when COMMIT returned: the rows are visible in the source
	rows          int
}
