package parquetfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// forcePipeline makes pipelined writers hand every row to encoders, however
// small (wideRowBytes), for the rest of the test.
func forcePipeline(t testing.TB) {
	old := wideRowBytes
	wideRowBytes = 0
	t.Cleanup(func() { wideRowBytes = old })
}

// writeBoth writes the same rows through a plain and a pipelined writer
// (row-group budget budget) and returns the two files' paths. rows calls
// write for each row; its Datums may be reused between calls, as the
// stream's are.
func writeBoth(t *testing.T, table *cdc.Table, budget int64, rows func(write func(cdc.RowMeta, []cdc.Datum))) (plain, piped string) {
	plain, piped, _ = writeBothTo(t, table, budget, func(w io.Writer) io.Writer { return w }, rows)
	return plain, piped
}

// writeBothTo is writeBoth whose pipelined writer writes through out, and
// which also returns how many encoders that writer ended with.
func writeBothTo(t *testing.T, table *cdc.Table, budget int64, out func(io.Writer) io.Writer, rows func(write func(cdc.RowMeta, []cdc.Datum))) (plain, piped string, stripes int) {
	t.Helper()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, newWriter := range []func(w *bytes.Buffer) *Writer{
		func(b *bytes.Buffer) *Writer { return NewWriter(b, s) },
		func(b *bytes.Buffer) *Writer { return NewPipelinedWriter(out(b), s) },
	} {
		var buf bytes.Buffer
		w := newWriter(&buf)
		w.budget = budget
		var n int64
		rows(func(meta cdc.RowMeta, values []cdc.Datum) {
			if err := w.Write(meta, values); err != nil {
				t.Fatalf("writer %d: Write %v: %v", i, meta, err)
			}
			n++
		})
		if err := w.Close(); err != nil {
			t.Fatalf("writer %d: Close: %v", i, err)
		}
		if w.Rows() != n {
			t.Fatalf("writer %d: Rows() = %d, want %d", i, w.Rows(), n)
		}
		path := filepath.Join(dir, []string{"plain.parquet", "piped.parquet"}[i])
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			plain = path
		} else if piped = path; w.pipe != nil {
			stripes = w.pipe.stripes
		}
	}
	return plain, piped, stripes
}

// sameRows checks with DuckDB that two files hold the same rows (every
// column cast to text, so values compare exactly, NULLs included).
func sameRows(t *testing.T, table *cdc.Table, a, b string) {
	t.Helper()
	sel := []string{"__op", "__lsn", "__seq", "__xid", "CAST(__op_ts AS VARCHAR)", "CAST(__unchanged AS VARCHAR)"}
	for _, c := range table.Columns {
		sel = append(sel, `CAST("`+c.Name+`" AS VARCHAR)`)
	}
	q := func(path string) string {
		return "SELECT " + strings.Join(sel, ", ") + " FROM read_parquet(" + quoteLiteral(path) + ")"
	}
	db := openDuckDB(t)
	got := queryStrings(t, db, "SELECT (SELECT count(*) FROM ("+q(a)+")), (SELECT count(*) FROM ("+q(b)+")), "+
		"(SELECT count(*) FROM ("+q(a)+" EXCEPT ALL "+q(b)+")), (SELECT count(*) FROM ("+q(b)+" EXCEPT ALL "+q(a)+"))")
	if got[0][0] != got[0][1] || got[0][2] != "0" || got[0][3] != "0" {
		t.Errorf("rows: %s plain, %s pipelined; %s only in the plain file, %s only in the pipelined one",
			got[0][0], got[0][1], got[0][2], got[0][3])
	}
}

// Every type, NULLs, unchanged TOAST, a truncate marker and a large text:
// the pipelined writer's file reads back as the plain writer's, whose values
// TestDuckDBReadsValues checks one by one.
func TestPipelinedWriterAllTypes(t *testing.T) {
	forcePipeline(t)
	table := allTypes()
	plain, piped := writeBoth(t, table, DefaultRowGroupBytes, func(write func(cdc.RowMeta, []cdc.Datum)) {
		for _, r := range allTypesRows() {
			values := datums(table, r)
			write(r.meta, values)
			// The caller may reuse its buffers once Write returns.
			for _, d := range values {
				for i := range d.Text {
					d.Text[i] = 'X'
				}
			}
		}
	})
	sameRows(t, table, plain, piped)
}

// Many rows through reused buffers, across batches and row groups, with
// large values that end a batch by size before it has its rows.
func TestPipelinedWriterManyRows(t *testing.T) {
	forcePipeline(t)
	table := benchTable()
	const n = 30_000
	plain, piped := writeBoth(t, table, 256<<10, func(write func(cdc.RowMeta, []cdc.Datum)) {
		var rows benchRows
		big := bytes.Repeat([]byte("large note "), 20_000)
		ts := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
		for i := int64(0); i < n; i++ {
			values := rows.fill(i)
			if i%1000 == 7 {
				values[7].Text = big[:len(big)-int(i%97)]
			}
			if i%10 == 3 {
				values[4] = cdc.Datum{Kind: cdc.DatumNull}
			}
			if i%100 == 5 {
				values[4] = cdc.Datum{Kind: cdc.DatumUnchanged}
			}
			write(cdc.RowMeta{Op: cdc.OpInsert, LSN: cdc.LSN(1000 + i), Seq: i, XID: 9, CommitTime: ts}, values)
		}
	})
	sameRows(t, table, plain, piped)
	groups := queryStrings(t, openDuckDB(t), "SELECT count(DISTINCT row_group_id) FROM parquet_metadata("+quoteLiteral(piped)+")")
	if groups[0][0] == "1" {
		t.Errorf("the pipelined file has one row group; the size budget did not flush")
	}
}

// The output's failure reaches a later Write or Close, and the encoder ends.
func TestPipelinedWriterOutputError(t *testing.T) {
	forcePipeline(t)
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	w := NewPipelinedWriter(failingWriter{}, s)
	w.budget = 16 << 10 // flush (and fail) early
	var rows benchRows
	var werr error
	for i := int64(0); i < 20_000 && werr == nil; i++ {
		werr = w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: i}, rows.fill(i))
	}
	cerr := w.Close()
	for _, err := range []error{werr, cerr} {
		if err != nil && (!strings.Contains(err.Error(), "disk full") || errors.Is(err, cdc.ErrData)) {
			t.Errorf("error %v, want the output's", err)
		}
	}
	if cerr == nil {
		t.Fatal("Close succeeded on a failing output")
	}
	w.pipe.wg.Wait() // the encoders have ended (a leak would hang here)
	if err := w.Write(cdc.RowMeta{Op: cdc.OpTruncate}, nil); err == nil {
		t.Error("Write after a failure succeeded")
	}
}

// Abort ends the encoder without a footer; the writer refuses rows after it.
func TestPipelinedWriterAbort(t *testing.T) {
	forcePipeline(t)
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewPipelinedWriter(&buf, s)
	var rows benchRows
	for i := int64(0); i < 1000; i++ {
		if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: i}, rows.fill(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	w.pipe.wg.Wait() // the encoders have ended (a leak would hang here)
	w.Abort()        // twice is harmless
	if err := w.Write(cdc.RowMeta{Op: cdc.OpTruncate}, nil); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if err := w.Close(); err == nil {
		t.Error("Close after Abort succeeded")
	}
	if bytes.HasSuffix(buf.Bytes(), []byte("PAR1")) && buf.Len() > 8 {
		t.Error("an aborted file has a footer")
	}
}

// slowWriter makes every write of the output take a while: the encoders
// fall behind the caller, as compression does with rows of large texts.
type slowWriter struct{ w io.Writer }

func (s slowWriter) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	return s.w.Write(p)
}

// Encoders that hold the caller back get a second one, writing row groups
// of its own into the same file: the file still holds exactly the rows.
func TestPipelinedWriterSecondEncoder(t *testing.T) {
	forcePipeline(t)
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a second encoder starts only with two or more Ps")
	}
	table := benchTable()
	const n = 20_000
	plain, piped, stripes := writeBothTo(t, table, 16<<10, func(w io.Writer) io.Writer { return slowWriter{w} },
		func(write func(cdc.RowMeta, []cdc.Datum)) {
			var rows benchRows
			ts := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
			for i := int64(0); i < n; i++ {
				write(cdc.RowMeta{Op: cdc.OpUpdate, LSN: cdc.LSN(5000 + i/100), Seq: i, XID: 11, CommitTime: ts}, rows.fill(i))
			}
		})
	if stripes != maxStripes {
		t.Errorf("the pipelined writer ended with %d encoder(s), want %d", stripes, maxStripes)
	}
	sameRows(t, table, plain, piped)
}

// BenchmarkPipelinedWideRows writes rows of 8 KiB of English words (the
// bench's W4), where zstd is nearly all the work, with one encoder and with
// a second one allowed; it reports rows/s and CPU µs per row.
func BenchmarkPipelinedWideRows(b *testing.B) {
	words := strings.Fields("the of and to in is you that it he was for on are as with his they at be this have from or one had by word " +
		"but not what all were we when your can said there use an each which she do how their if will up other about out many")
	texts := make([][]byte, 1000)
	x := uint64(88172645463325252)
	for i := range texts {
		var t []byte
		for len(t) < 8192 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			t = append(append(t, words[x%uint64(len(words))]...), ' ')
		}
		texts[i] = t[:8192]
	}
	table := &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "wide"}, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1},
		{Name: "b", TypeOID: oidText, TypeMod: -1},
	}, PrimaryKey: []string{"id"}}
	s, err := NewSchema(table)
	if err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{1, maxStripes} {
		b.Run(fmt.Sprintf("encoders=%d", limit), func(b *testing.B) {
			stripeLimit = limit
			defer func() { stripeLimit = maxStripes }()
			forcePipeline(b)
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			w := NewPipelinedWriter(&countingWriter{}, s)
			id := make([]byte, 0, 20)
			for i := 0; i < b.N; i++ {
				id = strconv.AppendInt(id[:0], int64(i), 10)
				values := []cdc.Datum{{Kind: cdc.DatumText, Text: id}, {Kind: cdc.DatumText, Text: texts[i%len(texts)]}}
				if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: int64(i)}, values); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Utime) - syscall.TimevalToNsec(ru0.Stime))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/row")
		})
	}
}

// A value the encoder refuses fails a later Write or Close with the same
// *ValueError the plain writer returns, and the file is then unusable.
func TestPipelinedWriterRefusedValue(t *testing.T) {
	forcePipeline(t)
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	w := NewPipelinedWriter(&bytes.Buffer{}, s)
	var rows benchRows
	var werr error
	for i := int64(0); i < 2*pipeRows && werr == nil; i++ {
		values := rows.fill(i)
		if i == 3 {
			values[0] = cdc.Datum{Kind: cdc.DatumText, Text: []byte("not-a-number")}
		}
		werr = w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: i}, values)
	}
	cerr := w.Close()
	for _, err := range []error{werr, cerr} {
		if err == nil {
			continue
		}
		var ve *ValueError
		if !errors.As(err, &ve) || !errors.Is(err, cdc.ErrData) || !strings.Contains(err.Error(), `"id"`) {
			t.Errorf("error %v, want a *ValueError naming column id", err)
		}
	}
	if cerr == nil {
		t.Fatal("Close succeeded after a refused value")
	}
	if err := w.WriteRow(nil); err == nil {
		t.Error("WriteRow on a pipelined writer succeeded")
	}
}

// A pipelined writer encodes small rows on the caller, as the plain writer
// does, and hands the rest of the file to encoders once its rows average
// wideRowBytes: the file holds every row either way.
func TestPipelinedWriterStartsOnWideRows(t *testing.T) {
	table := benchTable()
	wide := bytes.Repeat([]byte("wide row text "), 200) // 2.8 KiB
	for _, tc := range []struct {
		name    string
		wideAt  int64 // first row with a wide note; -1: none
		stripes int
	}{{"small rows", -1, 0}, {"wide rows after small ones", 700, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			plain, piped, stripes := writeBothTo(t, table, DefaultRowGroupBytes, func(w io.Writer) io.Writer { return w },
				func(write func(cdc.RowMeta, []cdc.Datum)) {
					var rows benchRows
					for i := int64(0); i < 3000; i++ {
						values := rows.fill(i)
						if tc.wideAt >= 0 && i >= tc.wideAt {
							values[7].Text = wide
						}
						write(cdc.RowMeta{Op: cdc.OpInsert, LSN: cdc.LSN(i), Seq: i}, values)
					}
				})
			if stripes != tc.stripes {
				t.Errorf("encoders: %d, want %d", stripes, tc.stripes)
			}
			sameRows(t, table, plain, piped)
		})
	}
}
