package pgoutput

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// viaPglogrepl decodes a DML payload the reference way: pglogrepl.ParseV2,
// then convert.
func viaPglogrepl(d *Decoder, data []byte) (Message, error) {
	raw, err := parse(data, d.inStream)
	if err != nil {
		return nil, err
	}
	return d.convert(raw)
}

// sameDML compares decodeDML with the reference on a payload checkFrame
// accepts, in decoder d's state. Where the reference fails, decodeDML may
// succeed: pglogrepl checks lengths more strictly than the protocol (it
// refuses an insert of a table without columns), and checkFrame has already
// checked the structure.
func sameDML(t *testing.T, d *Decoder, data []byte) {
	t.Helper()
	got, gotErr := d.decodeDML(data)
	want, wantErr := viaPglogrepl(d, data)
	if wantErr != nil {
		return
	}
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("payload %x: error %v, pglogrepl path %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("payload %x:\n got %#v\nwant %#v", data, got, want)
	}
}

func TestDecodeDMLMatchesPglogrepl(t *testing.T) {
	row := []col{txt("1"), null, unchanged}
	full := []col{txt("1"), txt("note"), txt("12.5")}
	empty := []col{txt(""), txt(""), null}
	for _, streamed := range []bool{false, true} {
		var xid uint32
		ctx := 1
		if streamed {
			xid, ctx = 6, 2
		}
		for _, p := range [][]byte{
			insertMsg(xid, streamed, ordersOID, row...),
			insertMsg(xid, streamed, ordersOID, empty...),
			insertMsg(xid, streamed, ordersOID, full...),
			updateMsg(xid, streamed, ordersOID, 0, nil, row),
			updateMsg(xid, streamed, ordersOID, 'K', []col{txt("1"), null, null}, row),
			updateMsg(xid, streamed, ordersOID, 'O', full, row),
			deleteMsg(xid, streamed, ordersOID, 'K', txt("1"), null, null),
			deleteMsg(xid, streamed, ordersOID, 'O', full...),
			// Too few and too many columns for the relation; an unknown one.
			insertMsg(xid, streamed, ordersOID, txt("1")),
			insertMsg(xid, streamed, ordersOID, txt("1"), null, null, null),
			updateMsg(xid, streamed, ordersOID, 'K', []col{txt("1")}, row),
			deleteMsg(xid, streamed, ordersOID+1, 'K', txt("1"), null, null),
		} {
			d := primed(t, ctx)
			if err := checkFrame(p, d.inStream); err != nil {
				t.Fatalf("payload %x: %v", p, err)
			}
			sameDML(t, d, p)
		}
	}
}

// The values of one message share a copy of the payload: appending to one
// must not overwrite the next, and the caller's buffer may be reused.
func TestDecodeDMLOwnsValues(t *testing.T) {
	d := primed(t, 1)
	p := insertMsg(0, false, ordersOID, txt("1"), txt("note"), txt("12.5"))
	m, err := d.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i] = 0
	}
	vals := m.(*Insert).New
	_ = append(vals[0].Text, "XXXX"...)
	if got := []string{string(vals[0].Text), string(vals[1].Text), string(vals[2].Text)}; !reflect.DeepEqual(got, []string{"1", "note", "12.5"}) {
		t.Errorf("values %q after the payload was reused and a value appended to", got)
	}
	if vals[1].Kind != cdc.DatumText {
		t.Errorf("kind %v", vals[1].Kind)
	}
}

// FuzzDecodeDML holds decodeDML equal to the pglogrepl path on every DML
// payload checkFrame accepts, in each decoder state.
func FuzzDecodeDML(f *testing.F) {
	for _, s := range seeds() {
		if len(s.payload) > 0 && (s.payload[0] == 'I' || s.payload[0] == 'U' || s.payload[0] == 'D') {
			f.Add(s.payload)
		}
	}
	f.Add(updateMsg(6, true, ordersOID, 'O', []col{txt("1"), txt(""), null}, []col{txt("2"), unchanged, txt("x")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || (data[0] != 'I' && data[0] != 'U' && data[0] != 'D') {
			return
		}
		for ctx := 1; ctx < 3; ctx++ {
			d := primed(t, ctx)
			if checkFrame(data, d.inStream) != nil {
				continue
			}
			sameDML(t, d, data)
		}
	})
}
