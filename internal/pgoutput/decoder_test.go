package pgoutput

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

const ordersOID = 16384

var commitTime = time.Date(2026, 11, 29, 8, 0, 0, 123456000, time.UTC)

func ordersRelation(xid uint32, streamed bool) []byte {
	return relationMsg(xid, streamed, ordersOID, "public", "orders", 'd',
		relCol{Key: true, Name: "id", TypeOID: 20, TypeMod: -1},
		relCol{Name: "note", TypeOID: 25, TypeMod: -1},
		relCol{Name: "amount", TypeOID: 1700, TypeMod: 12<<16 | 3 + 4},
	)
}

func ordersRelationValue(xid uint32) *Relation {
	return &Relation{RelID: ordersOID, XID: xid, Namespace: "public", Name: "orders", ReplicaIdentity: 'd',
		Columns: []RelationColumn{
			{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
			{Name: "note", TypeOID: 25, TypeMod: -1},
			{Name: "amount", TypeOID: 1700, TypeMod: 12<<16 | 3 + 4},
		}}
}

func text(s string) cdc.Datum { return cdc.Datum{Kind: cdc.DatumText, Text: []byte(s)} }

var (
	dNull      = cdc.Datum{Kind: cdc.DatumNull}
	dUnchanged = cdc.Datum{Kind: cdc.DatumUnchanged}
)

type step struct {
	name    string
	payload []byte
	want    Message
}

func runSteps(t *testing.T, d *Decoder, steps []step) {
	t.Helper()
	for _, s := range steps {
		got, err := d.Decode(s.payload)
		if err != nil {
			t.Fatalf("%s: Decode: %v", s.name, err)
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", s.name, got, s.want)
		}
	}
}

func TestDecodeTransaction(t *testing.T) {
	d := NewDecoder()
	runSteps(t, d, []step{
		{"begin", beginMsg(0x1A2B3C4, commitTime, 731), &Begin{XID: 731, FinalLSN: 0x1A2B3C4, CommitTime: commitTime}},
		{"origin", originMsg(0x99, "upstream"), &Origin{CommitLSN: 0x99, Name: "upstream"}},
		{"type", typeMsg(0, false, 90001, "public", "mood"), &TypeMsg{TypeOID: 90001, Namespace: "public", Name: "mood"}},
		{"relation", ordersRelation(0, false), ordersRelationValue(0)},
		{"insert", insertMsg(0, false, ordersOID, txt("1"), null, txt("12.500")),
			&Insert{RelID: ordersOID, New: []cdc.Datum{text("1"), dNull, text("12.500")}}},
		{"insert empty text", insertMsg(0, false, ordersOID, txt("2"), txt(""), null),
			&Insert{RelID: ordersOID, New: []cdc.Datum{text("2"), text(""), dNull}}},
		{"update no old", updateMsg(0, false, ordersOID, 0, nil, []col{txt("1"), unchanged, txt("13")}),
			&Update{RelID: ordersOID, New: []cdc.Datum{text("1"), dUnchanged, text("13")}}},
		{"update key", updateMsg(0, false, ordersOID, 'K', []col{txt("1"), null, null}, []col{txt("5"), unchanged, txt("13")}),
			&Update{RelID: ordersOID, OldKind: 'K', Old: []cdc.Datum{text("1"), dNull, dNull}, New: []cdc.Datum{text("5"), dUnchanged, text("13")}}},
		{"update full old", updateMsg(0, false, ordersOID, 'O', []col{txt("5"), txt("a"), txt("13")}, []col{txt("5"), txt("b"), txt("13")}),
			&Update{RelID: ordersOID, OldKind: 'O', Old: []cdc.Datum{text("5"), text("a"), text("13")}, New: []cdc.Datum{text("5"), text("b"), text("13")}}},
		{"delete key", deleteMsg(0, false, ordersOID, 'K', txt("5"), null, null),
			&Delete{RelID: ordersOID, OldKind: 'K', Old: []cdc.Datum{text("5"), dNull, dNull}}},
		{"delete full", deleteMsg(0, false, ordersOID, 'O', txt("6"), txt("x"), null),
			&Delete{RelID: ordersOID, OldKind: 'O', Old: []cdc.Datum{text("6"), text("x"), dNull}}},
		{"truncate", truncateMsg(0, false, 3, ordersOID),
			&Truncate{RelIDs: []uint32{ordersOID}, Cascade: true, RestartIdentity: true}},
		{"message", logicalMsg(0, false, true, 0x1A2B000, "pgcdc", []byte("hello")),
			&LogicalMessage{Transactional: true, LSN: 0x1A2B000, Prefix: "pgcdc", Content: []byte("hello")}},
		{"commit", commitMsg(0x1A2B3C4, 0x1A2B3F0, commitTime), &Commit{CommitLSN: 0x1A2B3C4, EndLSN: 0x1A2B3F0, CommitTime: commitTime}},
		{"non-transactional message", logicalMsg(0, false, false, 0x1A2C000, "heartbeat", nil),
			&LogicalMessage{LSN: 0x1A2C000, Prefix: "heartbeat"}},
	})
	if r, ok := d.Relation(ordersOID); !ok || !reflect.DeepEqual(r, ordersRelationValue(0)) {
		t.Fatalf("Relation(%d) = %#v, %v", ordersOID, r, ok)
	}
	if _, ok := d.Relation(1); ok {
		t.Fatal("Relation(1) found a relation that was never described")
	}
}

func TestDecodeStream(t *testing.T) {
	const top, sub = 900, 901
	d := NewDecoder()
	runSteps(t, d, []step{
		{"stream start", streamStartMsg(top, true), &StreamStart{XID: top, First: true}},
		{"origin", originMsg(7, "o"), &Origin{CommitLSN: 7, Name: "o"}},
		{"type", typeMsg(top, true, 90001, "public", "mood"), &TypeMsg{XID: top, TypeOID: 90001, Namespace: "public", Name: "mood"}},
		{"relation", ordersRelation(top, true), ordersRelationValue(top)},
		{"insert top", insertMsg(top, true, ordersOID, txt("1"), null, unchanged),
			&Insert{RelID: ordersOID, XID: top, New: []cdc.Datum{text("1"), dNull, dUnchanged}}},
		{"insert sub", insertMsg(sub, true, ordersOID, txt("2"), txt("n"), txt("3")),
			&Insert{RelID: ordersOID, XID: sub, New: []cdc.Datum{text("2"), text("n"), text("3")}}},
		{"update", updateMsg(sub, true, ordersOID, 'K', []col{txt("2"), null, null}, []col{txt("3"), unchanged, txt("3")}),
			&Update{RelID: ordersOID, XID: sub, OldKind: 'K', Old: []cdc.Datum{text("2"), dNull, dNull}, New: []cdc.Datum{text("3"), dUnchanged, text("3")}}},
		{"update no old", updateMsg(top, true, ordersOID, 0, nil, []col{txt("3"), txt("m"), null}),
			&Update{RelID: ordersOID, XID: top, New: []cdc.Datum{text("3"), text("m"), dNull}}},
		{"delete", deleteMsg(sub, true, ordersOID, 'O', txt("3"), txt("m"), null),
			&Delete{RelID: ordersOID, XID: sub, OldKind: 'O', Old: []cdc.Datum{text("3"), text("m"), dNull}}},
		{"truncate", truncateMsg(top, true, 1, ordersOID), &Truncate{XID: top, RelIDs: []uint32{ordersOID}, Cascade: true}},
		{"message", logicalMsg(top, true, true, 0x500, "p", []byte{0, 1, 2}),
			&LogicalMessage{XID: top, Transactional: true, LSN: 0x500, Prefix: "p", Content: []byte{0, 1, 2}}},
		{"stream stop", streamStopMsg(), &StreamStop{}},
		// Another transaction, committed in between, uses the same relation
		// without an xid.
		{"begin", beginMsg(0x600, commitTime, 950), &Begin{XID: 950, FinalLSN: 0x600, CommitTime: commitTime}},
		{"insert other", insertMsg(0, false, ordersOID, txt("9"), null, null),
			&Insert{RelID: ordersOID, New: []cdc.Datum{text("9"), dNull, dNull}}},
		{"commit", commitMsg(0x600, 0x610, commitTime), &Commit{CommitLSN: 0x600, EndLSN: 0x610, CommitTime: commitTime}},
		{"stream start again", streamStartMsg(top, false), &StreamStart{XID: top}},
		{"insert again", insertMsg(top, true, ordersOID, txt("4"), null, null),
			&Insert{RelID: ordersOID, XID: top, New: []cdc.Datum{text("4"), dNull, dNull}}},
		{"stream stop again", streamStopMsg(), &StreamStop{}},
		{"subtransaction abort", streamAbortMsg(top, sub), &StreamAbort{XID: top, SubXID: sub}},
		{"stream commit", streamCommitMsg(top, 0x700, 0x720, commitTime),
			&StreamCommit{XID: top, CommitLSN: 0x700, EndLSN: 0x720, CommitTime: commitTime}},
		{"abort whole", streamAbortMsg(1000, 1000), &StreamAbort{XID: 1000, SubXID: 1000}},
	})
	if xid, in := d.InStream(); in || xid != 0 {
		t.Fatalf("InStream() = %d, %v after the last StreamStop", xid, in)
	}
}

// TestDecodeOwnsBytes checks that values survive the reuse of the payload
// buffer, as they must when the replication loop reuses its receive buffer.
func TestDecodeOwnsBytes(t *testing.T) {
	d := NewDecoder()
	mustDecode(t, d, beginMsg(1, commitTime, 1), ordersRelation(0, false))
	buf := insertMsg(0, false, ordersOID, txt("alpha"), txt("beta"), null)
	m := mustDecode(t, d, buf).(*Insert)
	msgBuf := logicalMsg(0, false, true, 1, "p", []byte("content"))
	lm := mustDecode(t, d, msgBuf).(*LogicalMessage)
	for i := range buf {
		buf[i] = 'X'
	}
	for i := range msgBuf {
		msgBuf[i] = 'X'
	}
	mustDecode(t, d, insertMsg(0, false, ordersOID, txt("gamma"), txt("delta"), null))
	if string(m.New[0].Text) != "alpha" || string(m.New[1].Text) != "beta" {
		t.Fatalf("insert values changed with the payload buffer: %q %q", m.New[0].Text, m.New[1].Text)
	}
	if string(lm.Content) != "content" {
		t.Fatalf("message content changed with the payload buffer: %q", lm.Content)
	}
}

func TestDecodeRelationReplaced(t *testing.T) {
	d := NewDecoder()
	mustDecode(t, d, beginMsg(1, commitTime, 1), ordersRelation(0, false))
	// ALTER TABLE orders ADD COLUMN tag text: PostgreSQL sends the relation
	// again before the next change.
	wider := relationMsg(0, false, ordersOID, "public", "orders", 'f',
		relCol{Key: true, Name: "id", TypeOID: 20, TypeMod: -1},
		relCol{Name: "note", TypeOID: 25, TypeMod: -1},
		relCol{Name: "amount", TypeOID: 1700, TypeMod: -1},
		relCol{Name: "tag", TypeOID: 25, TypeMod: -1},
	)
	mustDecode(t, d, wider)
	r, _ := d.Relation(ordersOID)
	if len(r.Columns) != 4 || r.ReplicaIdentity != 'f' || r.Columns[3].Name != "tag" {
		t.Fatalf("relation not replaced: %#v", r)
	}
	mustDecode(t, d, insertMsg(0, false, ordersOID, txt("1"), null, null, txt("t")))
	_, err := d.Decode(insertMsg(0, false, ordersOID, txt("1"), null, null))
	wantErr(t, err, "relation public.orders (OID 16384): new tuple has 3 columns but the Relation message describes 4")
}

func TestDecodeErrors(t *testing.T) {
	inTxn := [][]byte{beginMsg(1, commitTime, 1), ordersRelation(0, false)}
	inStream := [][]byte{streamStartMsg(5, true), ordersRelation(6, true)}
	cases := []struct {
		name    string
		prime   [][]byte
		payload []byte
		want    string
	}{
		{"empty", nil, nil, "empty message"},
		{"unknown type", nil, []byte{'Z', 1, 2}, "unknown message type 'Z' (0x5a)"},
		{"unknown type nul", nil, []byte{0}, `unknown message type '\x00' (0x00)`},
		{"two-phase begin prepare", nil, []byte{'b'}, "unknown message type 'b'"},
		{"insert undescribed", [][]byte{beginMsg(1, commitTime, 1)}, insertMsg(0, false, ordersOID, txt("1")),
			"DML for relation OID 16384 that was never described by a Relation message"},
		{"update undescribed", [][]byte{beginMsg(1, commitTime, 1)}, updateMsg(0, false, 17000, 0, nil, []col{txt("1")}),
			"DML for relation OID 17000 that was never described by a Relation message"},
		{"delete undescribed", inStream, deleteMsg(6, true, 17001, 'K', txt("1")),
			"DML for relation OID 17001 that was never described by a Relation message"},
		{"truncate undescribed", inTxn, truncateMsg(0, false, 0, ordersOID, 17002),
			"DML for relation OID 17002 that was never described by a Relation message"},
		{"insert too few columns", inTxn, insertMsg(0, false, ordersOID, txt("1"), null),
			"relation public.orders (OID 16384): new tuple has 2 columns but the Relation message describes 3"},
		{"delete too many columns", inStream, deleteMsg(6, true, ordersOID, 'K', txt("1"), null, null, null),
			"relation public.orders (OID 16384): old tuple has 4 columns but the Relation message describes 3"},
		{"update old tuple count", inTxn, updateMsg(0, false, ordersOID, 'O', []col{txt("1")}, []col{txt("1"), null, null}),
			"old tuple has 1 columns but the Relation message describes 3"},
		{"binary column", inTxn, insertMsg(0, false, ordersOID, txt("1"), col{Kind: 'b', Data: "\x00\x01"}, null),
			"binary value, but binary mode was not requested"},
		{"unknown column kind", inTxn, insertMsg(0, false, ordersOID, txt("1"), col{Kind: 'x'}, null), "unknown kind 'x'"},
		{"bad insert marker", inTxn, enc{'I'}.u32(ordersOID).u8('K').tuple(txt("1"), null, null), "new tuple marker 'K': want 'N'"},
		{"bad update marker", inTxn, enc{'U'}.u32(ordersOID).u8('X'), "tuple marker 'X': want 'K', 'O' or 'N'"},
		{"update old then no new marker", inTxn, enc{'U'}.u32(ordersOID).u8('K').tuple(txt("1"), null, null).u8('K').tuple(txt("1"), null, null),
			"new tuple marker 'K': want 'N'"},
		{"bad delete marker", inTxn, enc{'D'}.u32(ordersOID).u8('N').tuple(txt("1"), null, null), "old tuple marker 'N': want 'K' or 'O'"},
		{"text longer than payload", inTxn, enc{'I'}.u32(ordersOID).u8('N').u16(3).u8('t').u32(1 << 31), "new tuple column value: need 2147483648 bytes at offset 13, have 0"},
		{"truncate count lies", inTxn, enc{'T'}.u32(1 << 30).u8(0).u32(ordersOID), "relation count 1073741824 does not match the 4 bytes of OIDs"},
		{"message length lies", nil, enc{'M'}.u8(0).u64(1).str("p").u32(100).u8(1), "content: need 100 bytes"},
		{"message prefix unterminated", nil, enc{'M'}.u8(0).u64(1).u8('p'), "prefix: no terminating NUL"},
		{"relation name unterminated", [][]byte{beginMsg(1, commitTime, 1)}, enc{'R'}.u32(1).str("public").u8('x'), "relation name: no terminating NUL"},
		{"relation columns missing", [][]byte{beginMsg(1, commitTime, 1)}, enc{'R'}.u32(1).str("public").str("t").u8('d').u16(2).u8(0).str("a").u32(23).u32(0),
			"column flags: need 1 bytes"},
		{"trailing bytes", nil, append(beginMsg(1, commitTime, 1), 0), "Begin message: 1 trailing bytes"},
		{"short begin", nil, beginMsg(1, commitTime, 1)[:10], "Begin message: final LSN, commit time and xid"},
		{"stream stop with body", inStream, []byte{'E', 0}, "1 trailing bytes"},
		// Order and nesting.
		{"begin in begin", [][]byte{beginMsg(1, commitTime, 1)}, beginMsg(2, commitTime, 2), "Begin inside a transaction"},
		{"begin in stream", inStream, beginMsg(2, commitTime, 2), "Begin inside the stream block of xid 5"},
		{"commit without begin", nil, commitMsg(1, 2, commitTime), "Commit without Begin"},
		{"commit in stream", inStream, commitMsg(1, 2, commitTime), "Commit without Begin"},
		{"stream start in stream", inStream, streamStartMsg(7, true), "StreamStart inside the stream block of xid 5"},
		{"stream start in txn", inTxn, streamStartMsg(7, true), "StreamStart inside a transaction"},
		{"stream stop outside", nil, streamStopMsg(), "StreamStop outside a stream block"},
		{"stream commit in stream", inStream, streamCommitMsg(5, 1, 2, commitTime), "StreamCommit inside the stream block of xid 5"},
		{"stream abort in txn", inTxn, streamAbortMsg(5, 5), "StreamAbort inside a transaction"},
		{"insert outside", nil, insertMsg(0, false, ordersOID, txt("1"), null, null), "Insert message: outside a transaction and a stream block"},
		{"relation outside", nil, ordersRelation(0, false), "Relation message: outside a transaction"},
		{"transactional message outside", nil, logicalMsg(0, false, true, 1, "p", nil), "transactional message outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder()
			mustDecode(t, d, c.prime...)
			xid, in := d.InStream()
			inTxn := d.inTxn
			m, err := d.Decode(c.payload)
			if m != nil {
				t.Fatalf("Decode returned a message with the error: %#v", m)
			}
			wantErr(t, err, c.want)
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			if x2, in2 := d.InStream(); x2 != xid || in2 != in || d.inTxn != inTxn {
				t.Fatal("a rejected message changed the decoder's state")
			}
		})
	}
}

// TestDecodeEveryPrefix cuts every valid payload at every length: each cut
// must be an error (a shorter message is never valid), never a panic.
func TestDecodeEveryPrefix(t *testing.T) {
	for _, s := range seeds() {
		for n := 0; n < len(s.payload); n++ {
			d := s.decoder(t)
			if _, err := d.Decode(s.payload[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decoded without error", s.name, n, len(s.payload))
			}
		}
	}
}

// seed is a valid payload and the decoder state it is valid in.
type seed struct {
	name    string
	ctx     int // 0: fresh, 1: in a transaction with orders described, 2: in a stream with orders described
	payload []byte
}

func (s seed) decoder(t testing.TB) *Decoder {
	return primed(t, s.ctx)
}

func primed(t testing.TB, ctx int) *Decoder {
	d := NewDecoder()
	switch ctx {
	case 1:
		mustDecode(t, d, beginMsg(1, commitTime, 1), ordersRelation(0, false))
	case 2:
		mustDecode(t, d, streamStartMsg(5, true), ordersRelation(6, true))
	}
	return d
}

func seeds() []seed {
	row := []col{txt("1"), null, unchanged}
	full := []col{txt("1"), txt("note"), txt("12.5")}
	return []seed{
		{"begin", 0, beginMsg(0x1000, commitTime, 7)},
		{"stream start", 0, streamStartMsg(5, true)},
		{"stream commit", 0, streamCommitMsg(5, 1, 2, commitTime)},
		{"stream abort", 0, streamAbortMsg(5, 6)},
		{"message", 0, logicalMsg(0, false, false, 9, "heartbeat", []byte("x"))},
		{"commit", 1, commitMsg(0x1000, 0x1010, commitTime)},
		{"origin", 1, originMsg(1, "o")},
		{"type", 1, typeMsg(0, false, 5000, "public", "mood")},
		{"relation", 1, ordersRelation(0, false)},
		{"insert", 1, insertMsg(0, false, ordersOID, row...)},
		{"update", 1, updateMsg(0, false, ordersOID, 0, nil, row)},
		{"update key", 1, updateMsg(0, false, ordersOID, 'K', []col{txt("1"), null, null}, row)},
		{"update old", 1, updateMsg(0, false, ordersOID, 'O', full, row)},
		{"delete", 1, deleteMsg(0, false, ordersOID, 'K', txt("1"), null, null)},
		{"truncate", 1, truncateMsg(0, false, 1, ordersOID)},
		{"message txn", 1, logicalMsg(0, false, true, 9, "p", []byte("payload"))},
		{"stream stop", 2, streamStopMsg()},
		{"stream type", 2, typeMsg(6, true, 5000, "public", "mood")},
		{"stream relation", 2, ordersRelation(6, true)},
		{"stream insert", 2, insertMsg(6, true, ordersOID, row...)},
		{"stream update", 2, updateMsg(6, true, ordersOID, 'O', full, row)},
		{"stream delete", 2, deleteMsg(6, true, ordersOID, 'O', full...)},
		{"stream truncate", 2, truncateMsg(6, true, 0, ordersOID)},
		{"stream message", 2, logicalMsg(6, true, true, 9, "p", nil)},
	}
}

func mustDecode(t testing.TB, d *Decoder, payloads ...[]byte) Message {
	t.Helper()
	var m Message
	for _, p := range payloads {
		var err error
		if m, err = d.Decode(p); err != nil {
			t.Fatalf("Decode(%q): %v", p, err)
		}
	}
	return m
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func ExampleDecoder() {
	d := NewDecoder()
	for _, p := range [][]byte{
		beginMsg(0x16B3748, commitTime, 731),
		ordersRelation(0, false),
		insertMsg(0, false, ordersOID, txt("1"), null, txt("12.500")),
		commitMsg(0x16B3748, 0x16B3780, commitTime),
	} {
		m, err := d.Decode(p)
		if err != nil {
			fmt.Println(err)
			return
		}
		switch m := m.(type) {
		case *Begin:
			fmt.Println("begin", m.XID, m.FinalLSN)
		case *Insert:
			rel, _ := d.Relation(m.RelID)
			fmt.Printf("insert into %s.%s: %s\n", rel.Namespace, rel.Name, m.New[0].Text)
		case *Commit:
			fmt.Println("commit, confirm after flush:", m.EndLSN)
		}
	}
	// Output:
	// begin 731 0/16B3748
	// insert into public.orders: 1
	// commit, confirm after flush: 0/16B3780
}
