package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRowMetadata checks the order token and provenance written with every
// row (design.md §4) against what PostgreSQL itself reports.
func TestRowMetadata(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE meta (id int PRIMARY KEY, xid bigint, big text)`)
	e.mustRun("init")
	d := e.start()
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < 5; i++ {
		err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
			// Transaction 3 is large enough to be streamed in chunks.
			n, pad := 3, 0
			if i == 3 {
				n, pad = 2000, 200
			}
			_, err := tx.Exec(ctx, `INSERT INTO meta SELECT $1 * 10000 + g, pg_current_xact_id()::text::bigint, repeat('p', $3) FROM generate_series(1, $2) g`, i, n, pad)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.waitCaughtUp(60 * time.Second)
	d.stop()

	files := deltaFiles(e.sink, e.manifest(), "public.meta")
	rows := duck(t, `SELECT count(*) FILTER (WHERE __xid <> xid),
	                        count(DISTINCT __xid),
	                        count(*) FILTER (WHERE __op <> 'I'),
	                        min(__op_ts), max(__op_ts)
	                 FROM read_parquet(`+files+`)`)
	r := rows[0]
	if asInt(t, r[0]) != 0 {
		t.Errorf("%d rows carry an __xid different from pg_current_xact_id()", asInt(t, r[0]))
	}
	if asInt(t, r[1]) != 5 || asInt(t, r[2]) != 0 {
		t.Errorf("distinct xids %v, non-insert rows %v", r[1], r[2])
	}
	lo, hi := r[3].(time.Time), r[4].(time.Time)
	if lo.Before(start.Add(-2*time.Second)) || hi.After(time.Now().Add(2*time.Second)) {
		t.Errorf("__op_ts outside the run: %v .. %v (run started %v)", lo, hi, start)
	}
	// Within a transaction, __seq counts from 0 in arrival order and all rows
	// share the commit LSN; commit LSNs grow with commit order.
	per := duck(t, `SELECT __xid, count(DISTINCT __lsn), min(__seq), max(__seq), count(*), min(__lsn)
	                FROM read_parquet(`+files+`) GROUP BY 1 ORDER BY 1`)
	var prevLSN int64
	for _, p := range per {
		if asInt(t, p[1]) != 1 || asInt(t, p[2]) != 0 || asInt(t, p[3]) != asInt(t, p[4])-1 {
			t.Errorf("transaction %v: lsns %v, seq %v..%v for %v rows", p[0], p[1], p[2], p[3], p[4])
		}
		if lsn := asInt(t, p[5]); lsn <= prevLSN {
			t.Errorf("transaction %v commit LSN %d is not after the previous %d", p[0], lsn, prevLSN)
		} else {
			prevLSN = lsn
		}
	}
}
