package parquetfile

import (
	"math/big"
	"strconv"
	"testing"
)

// FuzzConverters feeds arbitrary text to every column's converter: none may
// panic, and what the exact ones accept must agree with the standard
// library's reading of the same text.
func FuzzConverters(f *testing.F) {
	for _, r := range allTypesRows() {
		for _, v := range r.values {
			if len(v) < 200 {
				f.Add([]byte(v))
			}
		}
	}
	for _, s := range []string{"NaN", "-0", "1.", ".5", "-.5", "00000000000000000000000000000000000000001", `\x`, "0044-03-15 BC",
		"2026-11-29 08:00:00+05:30:15", "9223372036854775807", "-9223372036854775808", "294276-12-31 23:59:59.999999",
		"{1,NULL,\"a\\\"b\"}", "[0:1]={1,2}", "{{1,2},{3,4}}", "{}", "24:00:00", "-1 days +02:00:00"} {
		f.Add([]byte(s))
	}
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		for i := range s.cols {
			c := &s.cols[i]
			if c.elem != nil {
				_, _, _, _ = appendList(nil, nil, text, c.elem, 0)
				continue
			}
			v, buf, err := c.conv(nil, text)
			if err != nil {
				continue
			}
			switch table.Columns[i].Name {
			case "id":
				want, perr := strconv.ParseInt(string(text), 10, 64)
				if perr != nil || want != v.Int64() {
					t.Errorf("id %q: got %d, strconv says %d, %v", text, v.Int64(), want, perr)
				}
			case "amount", "big":
				checkDecimal(t, text, table.Columns[i].TypeMod, v.Int64(), buf)
			}
		}
	})
}

// checkDecimal compares an accepted decimal with math/big's exact reading.
func checkDecimal(t *testing.T, text []byte, typmod int32, i64 int64, flba []byte) {
	p, s, _ := numericTypmod(typmod)
	want, ok := new(big.Rat).SetString(string(text))
	if !ok {
		t.Errorf("decimal %q accepted, but math/big cannot read it", text)
		return
	}
	var unscaled *big.Int
	if p <= 18 {
		unscaled = big.NewInt(i64)
	} else {
		unscaled = twosComplementBytes(flba)
	}
	got := new(big.Rat).SetFrac(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil))
	if got.Cmp(want) != 0 {
		t.Errorf("decimal %q stored as %s", text, got.FloatString(s))
	}
}

func twosComplementBytes(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}
