package control

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func sample() []Message {
	missing := "0"
	return []Message{
		Reconcile{Tables: []Shape{{Schema: "public", Name: "items", OID: 16384, Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1, AttNum: 1},
			{Name: "n", TypeOID: 23, TypeMod: -1, PGType: "integer", FieldID: 2, AttNum: 2, Missing: &missing},
		}}}},
		Reconcile{Tables: []Shape{}},
		Chunk{ID: "0a1b2c3d4e5f/public.items/3"},
		AddTable{ID: "0a1b2c3d4e5f/add/public.new"},
		Resnapshot{Table: "public.items"},
		Heartbeat{At: "2026-12-01T08:00:00Z"},
		Watermark{Snapshot: "1000:1004:1001,1002"},
		Partitions{Table: "public.m", Leaves: []uint32{16400, 16412}, Resnapshot: true},
		Partitions{Table: "public.m", Leaves: []uint32{}},
	}
}

// TestRoundTrip: every message decodes to what was encoded, under its own
// prefix in pg-cdc's namespace.
func TestRoundTrip(t *testing.T) {
	for _, m := range sample() {
		prefix, content, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", m, err)
		}
		if !strings.HasPrefix(prefix, Namespace) || prefix != m.Prefix() {
			t.Errorf("%T: prefix %q", m, prefix)
		}
		got, err := Decode(prefix, []byte(content))
		if err != nil {
			t.Fatalf("Decode(%q, %q): %v", prefix, content, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip of %T:\n got %#v\nwant %#v", m, got, m)
		}
	}
}

// TestWireFormat pins the encodings other pg-cdc versions read.
func TestWireFormat(t *testing.T) {
	prefix, content, err := Encode(Reconcile{Tables: []Shape{{Schema: "s", Name: "t", OID: 7, Columns: []cdc.Column{{Name: "id", TypeOID: 20}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "pgcdc.reconcile" || !strings.HasPrefix(content, `{"format":1,"tables":[{"schema":"s","name":"t","oid":7,"columns":[{"Name":"id","TypeOID":20,`) {
		t.Errorf("reconcile on the wire: %s %s", prefix, content)
	}
	for _, c := range []struct {
		m              Message
		prefix, wanted string
	}{
		{Chunk{ID: "r/public.t/0"}, "pgcdc.backfill", "r/public.t/0"},
		{AddTable{ID: "r/add/public.t"}, "pgcdc.addtable", "r/add/public.t"},
		{Resnapshot{Table: "public.t"}, "pgcdc.resnapshot", "public.t"},
	} {
		prefix, content, err := Encode(c.m)
		if err != nil || prefix != c.prefix || content != c.wanted {
			t.Errorf("%T on the wire: %q %q %v, want %q %q", c.m, prefix, content, err, c.prefix, c.wanted)
		}
	}
}

func TestDecodeForeignAndUnknown(t *testing.T) {
	for _, prefix := range []string{"", "app.audit", "pg-cdc heartbeat", "pgcdc.some-future-message"} {
		m, err := Decode(prefix, []byte("anything"))
		if m != nil || err != nil {
			t.Errorf("Decode(%q) = %#v, %v; want nil, nil", prefix, m, err)
		}
	}
}

func TestDecodeUnreadable(t *testing.T) {
	for _, c := range []struct{ prefix, content string }{
		{PrefixReconcile, "not json"},
		{PrefixReconcile, `{"format":2,"tables":[]}`},
		{PrefixReconcile, `{"tables":[]}`},
		{PrefixChunk, ""},
		{PrefixAddTable, "a\x00b"},
		{PrefixResnapshot, "\xff"},
	} {
		m, err := Decode(c.prefix, []byte(c.content))
		if m != nil || !errors.Is(err, ErrUnreadable) {
			t.Errorf("Decode(%q, %q) = %#v, %v; want ErrUnreadable", c.prefix, c.content, m, err)
		}
	}
}

func TestEncodeRefusesWhatCannotTravel(t *testing.T) {
	for _, m := range []Message{nil, Chunk{}, AddTable{ID: "x\x00"}, Resnapshot{Table: "\xfe"}, Heartbeat{}} {
		if _, _, err := Encode(m); err == nil {
			t.Errorf("Encode(%#v): no error", m)
		}
	}
}

// FuzzDecode: no input makes Decode panic; what it accepts encodes back
// under the same prefix and decodes to the same message.
func FuzzDecode(f *testing.F) {
	for _, m := range sample() {
		prefix, content, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(prefix, []byte(content))
	}
	f.Add(PrefixReconcile, []byte(`{"format":1,"tables":null}`))
	f.Add(PrefixReconcile, []byte(`{"format":1,"tables":[{"columns":[{"Missing":null}]}]}`))
	f.Add("other", []byte{0xff, 0})
	f.Fuzz(func(t *testing.T, prefix string, content []byte) {
		m, err := Decode(prefix, content)
		if err != nil || m == nil {
			return
		}
		p, c, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		if p != prefix {
			t.Fatalf("prefix %q encoded back as %q", prefix, p)
		}
		again, err := Decode(p, []byte(c))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-decoded %#v, %v; want %#v", again, err, m)
		}
	})
}
