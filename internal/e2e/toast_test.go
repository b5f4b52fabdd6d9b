package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestToastAndReplicaIdentities: large TOASTed text, jsonb and int[] values
// left untouched by UPDATEs — ordinary ones and key-changing ones — under
// REPLICA IDENTITY DEFAULT, FULL and USING INDEX, beside an insert-only
// table. The merged state must equal the source: an unchanged value is
// never NULL in the sink.
func TestToastAndReplicaIdentities(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tbl := range []string{"t_default", "t_full"} {
		e.exec(fmt.Sprintf(`CREATE TABLE %[1]s (id int PRIMARY KEY, n int, big text, doc jsonb, arr int[]);
			ALTER TABLE %[1]s ALTER big SET STORAGE EXTERNAL, ALTER doc SET STORAGE EXTERNAL, ALTER arr SET STORAGE EXTERNAL`, tbl))
	}
	e.exec(`ALTER TABLE t_full REPLICA IDENTITY FULL`)
	e.exec(`CREATE TABLE t_index (code text NOT NULL, n int, big text);
		CREATE UNIQUE INDEX t_index_code ON t_index (code);
		ALTER TABLE t_index REPLICA IDENTITY USING INDEX t_index_code;
		ALTER TABLE t_index ALTER big SET STORAGE EXTERNAL`)
	e.exec(`CREATE TABLE t_nopk (v text, at timestamptz DEFAULT now())`)

	insert := func(from, to int) {
		for _, tbl := range []string{"t_default", "t_full"} {
			e.exec(fmt.Sprintf(`INSERT INTO %s SELECT g, 0, repeat(md5(g::text), 300),
				jsonb_build_object('g', g, 'pad', repeat('j', 9000)), array_fill(g, ARRAY[3000])
				FROM generate_series(%d, %d) g`, tbl, from, to))
		}
		e.exec(fmt.Sprintf(`INSERT INTO t_index SELECT 'code-' || g, 0, repeat(md5(g::text), 300) FROM generate_series(%d, %d) g`, from, to))
		e.exec(fmt.Sprintf(`INSERT INTO t_nopk SELECT 'row ' || g FROM generate_series(%d, %d) g`, from, to))
	}
	insert(1, 20) // in the snapshot
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	insert(21, 40) // streamed

	ctx := context.Background()
	steps := []string{
		// Ordinary updates that leave every TOASTed column alone.
		`UPDATE t_default SET n = n + 1 WHERE id % 3 = 0`,
		`UPDATE t_full SET n = n + 1 WHERE id % 3 = 0`,
		`UPDATE t_index SET n = n + 1 WHERE code LIKE '%5'`,
		// Key changes that leave them alone: DEFAULT recovers them from the
		// source, FULL from the old row, USING INDEX from the source.
		`UPDATE t_default SET id = id + 1000 WHERE id IN (2, 22, 25)`,
		`UPDATE t_full SET id = id + 1000 WHERE id IN (2, 22, 25)`,
		`UPDATE t_index SET code = code || '-moved' WHERE code IN ('code-3', 'code-23')`,
		// Then an ordinary update of a moved row, still without TOAST.
		`UPDATE t_default SET n = 99 WHERE id = 1022`,
		`UPDATE t_full SET n = 99 WHERE id = 1022`,
		// Updates that do change TOASTed values.
		`UPDATE t_default SET big = 'small now', doc = '{"x": 1}' WHERE id = 4`,
		`UPDATE t_full SET arr = '{1,NULL,3}' WHERE id = 4`,
		// Deletes by key in every identity.
		`DELETE FROM t_default WHERE id IN (5, 30)`,
		`DELETE FROM t_full WHERE id IN (5, 30)`,
		`DELETE FROM t_index WHERE code = 'code-7'`,
		`INSERT INTO t_nopk (v) VALUES ('late')`,
	}
	for _, q := range steps {
		e.exec(q)
	}
	// A key change followed by a delete in the same transaction: the moved
	// row is gone, so there is nothing to recover and nothing to show.
	if err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE t_default SET id = 5000 WHERE id = 8`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM t_default WHERE id = 5000`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()

	assertSinkEqualsSource(t, e, "public.t_default", "public.t_full", "public.t_index", "public.t_nopk")

	m := e.manifest()
	// PostgreSQL did leave values out (the test exercised TOAST), and under
	// FULL the old row supplied every one of them.
	def := duck(t, "SELECT count(*) FROM read_parquet("+deltaFiles(e.sink, m, "public.t_default")+") WHERE __op = 'U' AND list_contains(__unchanged, 'big')")
	if asInt(t, def[0][0]) == 0 {
		t.Error("no update of t_default left big unchanged: TOAST was not exercised")
	}
	full := duck(t, "SELECT count(*) FROM read_parquet("+deltaFiles(e.sink, m, "public.t_full")+") WHERE len(__unchanged) > 0")
	if asInt(t, full[0][0]) != 0 {
		t.Errorf("%d t_full rows list unchanged columns; the FULL old row should have supplied them", asInt(t, full[0][0]))
	}
	// The row moved to key 5000 and deleted in the same transaction could
	// not be read back: counted per column, and shown by status.
	lost := map[string]int64{}
	for _, dl := range m.Tables["public.t_default"].Deltas {
		for c, n := range dl.UnrecoveredTOAST {
			lost[c] += n
		}
	}
	if lost["big"] != 1 || lost["doc"] != 1 || lost["arr"] != 1 {
		t.Errorf("unrecovered TOAST counts %v, want big, doc and arr once each", lost)
	}
	if out := e.mustRun("status"); !strings.Contains(out, `public.t_default column "big": 1 rows left a TOASTed value unchanged`) {
		t.Errorf("status does not report the unrecovered value:\n%s", out)
	}
	moved := duck(t, "SELECT count(*) FROM read_parquet("+deltaFiles(e.sink, m, "public.t_default")+") WHERE __op = 'U' AND id IN (1002, 1022, 1025) AND len(__unchanged) = 0 AND big IS NOT NULL")
	if asInt(t, moved[0][0]) < 3 {
		t.Errorf("key-changing updates of t_default: %d rows carry recovered TOAST values, want 3", asInt(t, moved[0][0]))
	}
}
