package txn

import (
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// FuzzDecodePayload: a corrupt spill record payload is an error, never a
// panic or an allocation larger than the payload.
func FuzzDecodePayload(f *testing.F) {
	a := NewAssembler(f.TempDir(), 0)
	for i, c := range []*cdc.Change{
		change(orders, cdc.OpInsert, text("1"), null, unchanged, text("")),
		change(items, cdc.OpDelete),
	} {
		p, err := a.encode(&entry{seq: int64(i), sub: 7, c: c})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), p...))
	}
	tables := []*cdc.Table{orders, items}
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, c, err := decodePayload(p, tables)
		if (c == nil) == (err == nil) {
			t.Fatalf("change %v, error %v", c, err)
		}
	})
}
