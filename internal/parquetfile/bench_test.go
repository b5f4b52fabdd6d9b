package parquetfile

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// benchTable is a typical OLTP table: the shape of most rows pg-cdc writes.
func benchTable() *cdc.Table {
	return &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "orders"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: oidInt8, TypeMod: -1, FieldID: 1},
			{Name: "customer", TypeOID: oidText, TypeMod: -1, FieldID: 2},
			{Name: "amount", TypeOID: oidNumeric, TypeMod: numericMod(12, 3), FieldID: 3},
			{Name: "created_at", TypeOID: oidTimestampTZ, TypeMod: -1, FieldID: 4},
			{Name: "doc", TypeOID: oidJSONB, TypeMod: -1, FieldID: 5},
			{Name: "ref", TypeOID: oidUUID, TypeMod: -1, FieldID: 6},
			{Name: "day", TypeOID: oidDate, TypeMod: -1, FieldID: 7},
			{Name: "note", TypeOID: oidText, TypeMod: -1, FieldID: 8},
		},
		PrimaryKey: []string{"id"},
	}
}

// benchRows fills values (reused, as the stream does) with row n.
type benchRows struct {
	values []cdc.Datum
	bufs   [8][]byte
}

func (b *benchRows) fill(n int64) []cdc.Datum {
	if b.values == nil {
		b.values = make([]cdc.Datum, 8)
	}
	b.bufs[0] = strconv.AppendInt(b.bufs[0][:0], n, 10)
	b.bufs[1] = fmt.Appendf(b.bufs[1][:0], "customer-%07d", n%100_000)
	b.bufs[2] = fmt.Appendf(b.bufs[2][:0], "%d.%03d", n%1_000_000, n%1000)
	b.bufs[3] = fmt.Appendf(b.bufs[3][:0], "2026-11-29 %02d:%02d:%02d.%06d+00", n/3600%24, n/60%60, n%60, n%1_000_000)
	b.bufs[4] = fmt.Appendf(b.bufs[4][:0], `{"sku": "A-%d", "qty": %d, "tags": ["x", "y"]}`, n%5000, n%7)
	b.bufs[5] = fmt.Appendf(b.bufs[5][:0], "a0eebc99-9c0b-4ef8-bb6d-%012x", n)
	b.bufs[6] = append(b.bufs[6][:0], "2026-11-29"...)
	b.bufs[7] = fmt.Appendf(b.bufs[7][:0], "free text note number %d that is a little longer than the others, as notes are", n)
	for i := range b.values {
		b.values[i] = cdc.Datum{Kind: cdc.DatumText, Text: b.bufs[i]}
	}
	return b.values
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkWriter measures Write (conversion, encoding, zstd) on a typical
// row, reporting rows/s and file bytes per row. The rows are generated
// beforehand (64k distinct ones, cycled) so only the writer is measured.
func BenchmarkWriter(b *testing.B) {
	s, err := NewSchema(benchTable())
	if err != nil {
		b.Fatal(err)
	}
	const distinct = 1 << 16
	inputs := make([][]cdc.Datum, distinct)
	var gen benchRows
	for i := range inputs {
		row := gen.fill(int64(i))
		inputs[i] = make([]cdc.Datum, len(row))
		for j, d := range row {
			inputs[i][j] = cdc.Datum{Kind: d.Kind, Text: append([]byte(nil), d.Text...)}
		}
	}
	out := &countingWriter{}
	w := NewWriter(out, s)
	ts := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: cdc.LSN(i), Seq: int64(i), XID: 750, CommitTime: ts}
		if err := w.Write(meta, inputs[i%distinct]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(out.n)/float64(b.N), "file-B/row")
}

// TestWriterMemoryBounded writes many rows and checks that the live heap
// stays bounded: row groups are flushed by size, whatever the row count.
func TestWriterMemoryBounded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes a million rows; skipped with -short and -race")
	}
	// 1M rows is about 12 MB of file; PARQUETFILE_MEMTEST_ROWS=10000000
	// checks the bound across several row groups.
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("PARQUETFILE_MEMTEST_ROWS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	const limit = 48 << 20
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	out := &countingWriter{}
	w := NewWriter(out, s)
	var rows benchRows
	var ms runtime.MemStats
	var peak uint64
	ts := time.Now()
	start := time.Now()
	for i := int64(0); i < n; i++ {
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: cdc.LSN(i), Seq: i, XID: 750, CommitTime: ts}
		if err := w.Write(meta, rows.fill(i)); err != nil {
			t.Fatal(err)
		}
		if i%100_000 == 99_999 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	t.Logf("%d rows in %s (%.0f rows/s), file %.1f MB, peak live heap %.1f MB",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), float64(out.n)/1e6, float64(peak)/1e6)
	if peak > limit {
		t.Errorf("live heap reached %d bytes, want at most %d", peak, limit)
	}
}

// The write path itself allocates nothing per row in the steady state
// (parquet-go's buffers grow and are reused by amortised doubling).
func TestWriteAllocations(t *testing.T) {
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(&countingWriter{}, s)
	var rows benchRows
	values := rows.fill(123456)
	meta := cdc.RowMeta{Op: cdc.OpInsert, CommitTime: time.Now()}
	for range 10_000 { // warm up the buffers
		if err := w.Write(meta, values); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(10_000, func() {
		if err := w.Write(meta, values); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.2f allocations per row", allocs)
	if allocs > 0.5 {
		t.Errorf("Write allocates %.2f times per row", allocs)
	}
}

// Large values trigger the size check before the row count does.
func TestWriterMemoryBoundedLargeValues(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes 150 MB; skipped with -short and -race")
	}
	table := &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "blobs"}, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1},
		{Name: "body", TypeOID: oidText, TypeMod: -1},
	}}
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	out := &countingWriter{}
	w := NewWriter(out, s)
	// 1 MiB of poorly compressible text per row, regenerated in place.
	body := make([]byte, 1<<20)
	x := uint64(88172645463325252)
	var ms runtime.MemStats
	var peak uint64
	for i := int64(0); i < 150; i++ {
		for j := range body {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			body[j] = 'a' + byte(x%26)
		}
		values := []cdc.Datum{{Kind: cdc.DatumText, Text: strconv.AppendInt(nil, i, 10)}, {Kind: cdc.DatumText, Text: body}}
		if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: i}, values); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("150 MiB of values, file %.1f MB, peak live heap %.1f MB", float64(out.n)/1e6, float64(peak)/1e6)
	if peak > 64<<20 {
		t.Errorf("live heap reached %d bytes", peak)
	}
}
