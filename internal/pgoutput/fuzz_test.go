package pgoutput

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary payloads to decoders in the three states a
// payload can meet (fresh; inside a transaction; inside a stream block, each
// with a described relation). Decode must never panic, must never reach
// pglogrepl with bytes it cannot parse (errParserPanic), and must return
// either a message or an error.
func FuzzDecode(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s.payload)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for ctx := 0; ctx < 3; ctx++ {
			d := primed(t, ctx)
			m, err := d.Decode(data)
			if errors.Is(err, errParserPanic) {
				t.Fatalf("context %d: the frame check let through bytes that crash pglogrepl: %v", ctx, err)
			}
			if (m == nil) == (err == nil) {
				t.Fatalf("context %d: Decode returned message %#v and error %v", ctx, m, err)
			}
		}
	})
}

// FuzzDecodeSequence feeds one decoder a sequence of payloads (each prefixed
// by a 2-byte big-endian length), so that the nesting state and the relation
// cache meet arbitrary orders: Relation messages that replace each other,
// streams opened and closed at odd places.
func FuzzDecodeSequence(f *testing.F) {
	frame := func(payloads ...[]byte) []byte {
		var out enc
		for _, p := range payloads {
			out = append(out.u16(uint16(len(p))), p...)
		}
		return out
	}
	f.Add(frame(beginMsg(1, commitTime, 1), ordersRelation(0, false),
		insertMsg(0, false, ordersOID, txt("1"), null, unchanged), commitMsg(1, 2, commitTime)))
	f.Add(frame(streamStartMsg(5, true), ordersRelation(6, true),
		updateMsg(6, true, ordersOID, 'K', []col{txt("1"), null, null}, []col{txt("2"), null, null}),
		streamStopMsg(), streamAbortMsg(5, 6), streamCommitMsg(5, 3, 4, commitTime)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder()
		for len(data) >= 2 {
			n := int(data[0])<<8 | int(data[1])
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			m, err := d.Decode(data[:n])
			data = data[n:]
			if errors.Is(err, errParserPanic) {
				t.Fatalf("the frame check let through bytes that crash pglogrepl: %v", err)
			}
			if (m == nil) == (err == nil) {
				t.Fatalf("Decode returned message %#v and error %v", m, err)
			}
		}
	})
}
