package pgoutput

import (
	"testing"
	"time"
)

// BenchmarkDecodeInsert decodes the insert of a row shaped like issue 3's
// benchmark table (id bigint, a int, b text, c timestamptz, d numeric,
// e jsonb) inside a transaction.
func BenchmarkDecodeInsert(b *testing.B) {
	rel := relationMsg(0, false, 16390, "public", "bench", 'd',
		relCol{Key: true, Name: "id", TypeOID: 20, TypeMod: -1},
		relCol{Name: "a", TypeOID: 23, TypeMod: -1},
		relCol{Name: "b", TypeOID: 25, TypeMod: -1},
		relCol{Name: "c", TypeOID: 1184, TypeMod: -1},
		relCol{Name: "d", TypeOID: 1700, TypeMod: 12<<16 | 2 + 4},
		relCol{Name: "e", TypeOID: 3802, TypeMod: -1})
	ins := insertMsg(0, false, 16390, txt("123456"), txt("23456"), txt("e10adc3949ba59abbe56e057f20f883e"),
		txt("2026-11-29 09:43:16.123456+00"), txt("1234.56"),
		txt(`{"k": 123456, "v": "fcea920f7412b5da7be0cf42b8c93759", "tag": "t72"}`))
	d := NewDecoder()
	for _, m := range [][]byte{beginMsg(100, time.Now(), 7), rel} {
		if _, err := d.Decode(m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(ins)))
	for b.Loop() {
		if _, err := d.Decode(ins); err != nil {
			b.Fatal(err)
		}
	}
}
