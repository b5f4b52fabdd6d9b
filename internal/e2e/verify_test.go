package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/verify"
)

// TestVerify runs pg-cdc verify while the workload writes (inserts, updates
// that leave TOAST values unchanged, key changes, deletes, truncates): it
// finds the sides equal, with the counts of SELECT count(*) once the
// workload stops. Then one value is altered in a sink file and one row
// removed from another: verify exits 19 and names both keys.
func TestVerify(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 11, 10*time.Second)
	e.waitProgress(e.manifest().EndLSN, 30*time.Second)

	// While the workload runs, and while a transaction that was in progress
	// at verify's snapshot commits as verify waits for its watermark: its
	// row reaches the sink but is not in the snapshot.
	ctx := context.Background()
	held, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	tx, err := held.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var heldXID string
	if err := tx.QueryRow(ctx, `INSERT INTO customers VALUES (-2, 'in progress', 0, now(), true) RETURNING pg_current_xact_id()::text`).Scan(&heldXID); err != nil {
		t.Fatal(err)
	}
	v := e.startCommand(nil, "verify")
	e.waitFor("verify to take its snapshot", 30*time.Second, func() bool {
		var n int
		err := e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_current_snapshot()::text'`).Scan(&n)
		return err == nil && n > 0
	})
	time.Sleep(50 * time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	code, out := v.wait(60*time.Second), v.out.String()
	select {
	case <-w.done:
		t.Fatalf("the workload ended before verify did: nothing ran concurrently\n%s", out)
	default:
	}
	t.Logf("verify while the workload runs:\n%s", withoutDebug(out))
	if code != 0 || !strings.Contains(out, "3 tables: 3 equal, 0 different") {
		t.Fatalf("verify during the workload: exit %d, want 0 and every table equal:\n%s", code, out)
	}
	for _, table := range []string{"public.customers", "public.orders", "public.items"} {
		if !strings.Contains(out, table+": equal: ") {
			t.Errorf("verify does not report %s as equal:\n%s", table, out)
		}
	}
	// The snapshot saw the held transaction in progress, and the sink had
	// versions newer than the snapshot, which verify left out.
	snap := regexp.MustCompile(`as of source snapshot (\d+):(\d+):([\d,]*);`).FindStringSubmatch(out)
	if snap == nil || !slices.Contains(strings.Split(snap[3], ","), heldXID) {
		t.Errorf("the snapshot does not list transaction %s in progress: %q", heldXID, snap)
	}
	if !strings.Contains(out, "sink versions newer than the snapshot ignored") {
		t.Errorf("the sink held no version newer than the snapshot: the comparison as of the snapshot was not exercised:\n%s", out)
	}
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)

	// Quiet: the counts are the source's.
	rep := e.verifyJSON(0)
	counts := map[string]int64{}
	for _, table := range []string{"customers", "orders", "items"} {
		var n int64
		if err := e.conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts["public."+table] = n
	}
	for _, r := range rep.Tables {
		if n := counts[r.Table]; !r.Equal || r.SourceRows != n || r.SinkRows != n || r.Matching != n || n == 0 {
			t.Errorf("%s: %+v; SELECT count(*) is %d", r.Table, r.Counts, n)
		}
	}

	// Tamper with the sink: touchAll's rows are the newest versions of
	// their keys, in the newest delta of each table.
	m := e.manifest()
	e.rewriteNewestDelta(m, "public.customers", func(row parquet.Row) parquet.Row {
		if row[parquetfile.FirstDataLeaf].Int64() != -1 {
			return row
		}
		row = row.Clone()
		for i, v := range row {
			if v.Column() == parquetfile.FirstDataLeaf+1 { // name
				row[i] = parquet.ByteArrayValue([]byte("tampered")).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
			}
		}
		return row
	})
	e.rewriteNewestDelta(m, "public.orders", func(row parquet.Row) parquet.Row {
		if row[parquetfile.FirstDataLeaf].Int64() == -1 {
			return nil // gone
		}
		return row
	})

	code, out = e.run("verify")
	t.Logf("verify after tampering:\n%s", withoutDebug(out))
	if code != 19 {
		t.Fatalf("verify after tampering: exit %d, want 19:\n%s", code, out)
	}
	for _, want := range []string{
		"public.customers: DIFFERENT: ",
		"(id)=(-1): 1 key (1 with different values)",
		"(id)=(-1) name: source last, sink tampered",
		"public.orders: DIFFERENT: ",
		"1 missing in the sink, 0 extra in the sink, 0 with different values",
		"(id)=(-1): 1 key (1 missing in the sink)",
		"public.items: equal: ",
		"3 tables: 1 equal, 2 different",
		"2 of 3 tables differ: public.customers, public.orders",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	rep = e.verifyJSON(19, "--table", "public.orders")
	if len(rep.Tables) != 1 || rep.Tables[0].Missing != 1 || rep.Tables[0].SinkRows != counts["public.orders"]-1 ||
		rep.Tables[0].SourceRows != counts["public.orders"] || rep.Tables[0].Ranges[0].First != "(id)=(-1)" {
		t.Errorf("verify --table public.orders: %+v", rep.Tables)
	}
	d.stop()
	s.check()
}

// verifyJSON runs verify --format json and decodes its report.
func (e *env) verifyJSON(wantCode int, args ...string) verify.Report {
	e.t.Helper()
	code, out := e.run(append([]string{"verify", "--format", "json"}, args...)...)
	if code != wantCode {
		e.t.Fatalf("verify --format json: exit %d, want %d:\n%s", code, wantCode, out)
	}
	// The report is the output's JSON document; the log and the error
	// line are not JSON.
	start, end := strings.Index(out, "{\n"), strings.LastIndex(out, "\n}")
	if start < 0 || end < start {
		e.t.Fatalf("no JSON report in:\n%s", out)
	}
	var rep verify.Report
	if err := json.Unmarshal([]byte(out[start:end+2]), &rep); err != nil {
		e.t.Fatalf("decode report: %v\n%s", err, out)
	}
	return rep
}

// rewriteNewestDelta rewrites the table's newest delta file in place, each
// row through edit (nil drops it), keeping the manifest pointing at it.
func (e *env) rewriteNewestDelta(m *manifest.Manifest, table string, edit func(parquet.Row) parquet.Row) {
	e.t.Helper()
	mt := m.Tables[table]
	if len(mt.Deltas) == 0 {
		e.t.Fatalf("%s has no delta", table)
	}
	path := filepath.Join(e.sink, filepath.FromSlash(mt.Deltas[len(mt.Deltas)-1].Files[0].Path))
	data, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		e.t.Fatal(err)
	}
	src, err := mt.SourceTable()
	if err != nil {
		e.t.Fatal(err)
	}
	schema, err := parquetfile.NewSchema(src)
	if err != nil {
		e.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, schema)
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 64)
	changed := 0
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			out := edit(row)
			if out == nil || !slicesEqualRow(out, row) {
				changed++
			}
			if out == nil {
				continue
			}
			if err := w.WriteRow(out); err != nil {
				e.t.Fatal(err)
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		e.t.Fatal(err)
	}
	if changed != 1 {
		e.t.Fatalf("%s: %d rows of %s edited, want 1", table, changed, path)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func slicesEqualRow(a, b parquet.Row) bool { return a.Equal(b) }
