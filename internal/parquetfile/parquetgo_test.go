package parquetfile

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// readBack opens path with parquet-go and returns its schema's leaf paths
// and every row.
func readBack(t *testing.T, path string) (*parquet.File, []parquet.Row) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	var out []parquet.Row
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 16)
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				out = append(out, r.Clone())
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read rows: %v", err)
			}
		}
		rows.Close()
	}
	return f, out
}

// leafValues returns the values of leaf column i of row r.
func leafValues(r parquet.Row, i int) []parquet.Value {
	var out []parquet.Value
	r.Range(func(col int, vals []parquet.Value) bool {
		if col == i {
			out = vals
			return false
		}
		return true
	})
	return out
}

// twosComplement decodes a big-endian two's complement integer.
func twosComplement(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

func TestParquetGoReadsBack(t *testing.T) {
	table := allTypes()
	f, rows := readBack(t, writeFile(t, table, allTypesRows()))

	var paths []string
	for _, p := range f.Schema().Columns() {
		paths = append(paths, strings.Join(p, "."))
	}
	wantPaths := []string{"__op", "__lsn", "__seq", "__xid", "__op_ts", "__unchanged.list.element"}
	for _, n := range columnNames(table) {
		if n == "arr" {
			n = "arr.list.element" // an array is a LIST
		}
		wantPaths = append(wantPaths, n)
	}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("leaf columns:\n got %v\nwant %v", paths, wantPaths)
	}
	if len(rows) != 6 {
		t.Fatalf("got %d rows, want 6", len(rows))
	}
	leaf := func(name string) int { return slices.Index(wantPaths, name) }
	one := func(r parquet.Row, name string) parquet.Value {
		t.Helper()
		vs := leafValues(r, leaf(name))
		if len(vs) != 1 {
			t.Fatalf("column %s: %d values, want 1", name, len(vs))
		}
		return vs[0]
	}

	r0 := rows[0]
	if got := one(r0, "__op").String(); got != "I" {
		t.Errorf("__op = %q", got)
	}
	if got := one(r0, "amount").Int64(); got != -123450 {
		t.Errorf("amount = %d, want -123450", got)
	}
	if got := one(r0, "d5").Int32(); got != 99999 {
		t.Errorf("d5 = %d, want 99999", got)
	}
	big0 := one(r0, "big").ByteArray()
	if len(big0) != 16 || twosComplement(big0).String() != strings.Repeat("9", 38) {
		t.Errorf("big = %x (%s), want 38 nines in 16 bytes", big0, twosComplement(big0))
	}
	mid0 := one(r0, "mid").ByteArray()
	if len(mid0) != 9 || twosComplement(mid0).String() != "-"+strings.Repeat("9", 20) {
		t.Errorf("mid = %x (%s), want -(20 nines) in 9 bytes", mid0, twosComplement(mid0))
	}
	if got := hex.EncodeToString(one(r0, "u").ByteArray()); got != "a0eebc999c0b4ef8bb6d6bb9bd380a11" {
		t.Errorf("u = %s", got)
	}
	if got := one(r0, "blob").ByteArray(); !bytes.Equal(got, []byte{0x0a, 0x0b}) {
		t.Errorf("blob = %x", got)
	}
	if got := one(r0, "day").Int32(); got != 20786 {
		t.Errorf("day = %d, want 20786 (2026-11-29)", got)
	}
	if got := one(r0, "tstz").Int64(); got != 1795939200123456 {
		t.Errorf("tstz = %d", got)
	}
	if got := one(r0, "o").Int64(); got != 4294967295 {
		t.Errorf("o = %d", got)
	}
	// An empty list: one value at definition level 1.
	if vs := leafValues(r0, leaf("__unchanged.list.element")); len(vs) != 1 || !vs[0].IsNull() || vs[0].DefinitionLevel() != 1 {
		t.Errorf("__unchanged of row 0 = %v, want an empty list", vs)
	}

	// Empty bytea and empty text are values, not NULLs.
	r1 := rows[1]
	for _, name := range []string{"blob", "name"} {
		if v := one(r1, name); v.IsNull() || len(v.ByteArray()) != 0 {
			t.Errorf("%s of row 1 = %v, want an empty value", name, v)
		}
	}
	if v := one(r1, "vc"); !v.IsNull() {
		t.Errorf("vc of row 1 = %v, want NULL", v)
	}
	if got := one(r1, "day").Int32(); got != -735160 {
		// 0044-03-15 BC is astronomical year -43.
		t.Errorf("day of row 1 = %d, want -735160", got)
	}

	// Unchanged TOAST columns: NULL values, listed in order.
	r3 := rows[3]
	vs := leafValues(r3, leaf("__unchanged.list.element"))
	if len(vs) != 2 || vs[0].String() != "name" || vs[1].String() != "j" ||
		vs[0].RepetitionLevel() != 0 || vs[1].RepetitionLevel() != 1 {
		t.Errorf("__unchanged of row 3 = %v, want [name j]", vs)
	}
	if v := one(r3, "name"); !v.IsNull() {
		t.Errorf("name of row 3 = %v, want NULL", v)
	}
}
