package parquetfile

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func writeBytes(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

func TestParquetTypeNames(t *testing.T) {
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id": "INT64", "flag": "BOOLEAN", "small": "INT16", "medium": "INT32", "o": "INT64",
		"f4": "FLOAT", "f8": "DOUBLE", "amount": "DECIMAL(12,3)", "d5": "DECIMAL(5,2)",
		"big": "DECIMAL(38,10)", "mid": "DECIMAL(20,0)", "free": "STRING", "name": "STRING",
		"vc": "STRING", "bp": "STRING", "blob": "BINARY", "day": "DATE", "ts": "TIMESTAMP(us)",
		"tstz": "TIMESTAMP(us,UTC)", "u": "UUID", "j": "JSON", "jb": "JSON", "iv": "STRING", "arr": "LIST<INT32>", "tm": "TIME(us)",
	}
	for i, c := range table.Columns {
		if got := s.ParquetType(i); got != want[c.Name] {
			t.Errorf("ParquetType(%s) = %s, want %s", c.Name, got, want[c.Name])
		}
	}
	mc := s.ManifestColumns(table)
	if mc[0].Name != "id" || mc[0].Nullable || mc[0].FieldID != 1 || mc[7].ParquetType != "DECIMAL(12,3)" ||
		mc[7].TypeMod != numericMod(12, 3) || !mc[1].Nullable {
		t.Errorf("ManifestColumns = %+v", mc[:8])
	}
}

func TestNumericTypmod(t *testing.T) {
	cases := []struct {
		typmod int32
		p, s   int
		ok     bool
	}{
		{numericMod(12, 3), 12, 3, true},
		{numericMod(38, 0), 38, 0, true},
		{numericMod(1, 1), 1, 1, true},
		{numericMod(39, 2), 0, 0, false},
		{-1, 0, 0, false},
		{3, 0, 0, false},
		{int32(5<<16|(-2&0x7ff)) + varhdrsz, 0, 0, false}, // numeric(5,-2), PostgreSQL 15
		{numericMod(2, 5), 0, 0, false},                   // scale above precision
		{numericMod(1000, 0), 0, 0, false},
	}
	for _, tc := range cases {
		p, s, ok := numericTypmod(tc.typmod)
		if ok != tc.ok || (ok && (p != tc.p || s != tc.s)) {
			t.Errorf("numericTypmod(%d) = %d, %d, %v; want %d, %d, %v", tc.typmod, p, s, ok, tc.p, tc.s, tc.ok)
		}
	}
	// Beyond DECIMAL's reach the column keeps PostgreSQL's exact text.
	table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{
		{Name: "wide", TypeOID: oidNumeric, TypeMod: numericMod(50, 10)},
		{Name: "neg", TypeOID: oidNumeric, TypeMod: int32(5<<16|(-2&0x7ff)) + varhdrsz},
	}}
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	if s.ParquetType(0) != "STRING" || s.ParquetType(1) != "STRING" {
		t.Errorf("wide, neg = %s, %s; want STRING", s.ParquetType(0), s.ParquetType(1))
	}
}

func TestDecimalBytes(t *testing.T) {
	for p, want := range map[int]int{1: 1, 2: 1, 3: 2, 9: 4, 10: 5, 18: 8, 19: 9, 20: 9, 38: 16} {
		if got := decimalBytes(p); got != want {
			t.Errorf("decimalBytes(%d) = %d, want %d", p, got, want)
		}
	}
}

func TestParseInt(t *testing.T) {
	cases := []struct {
		in     string
		lo, hi int64
		want   int64
		ok     bool
	}{
		{"0", -10, 10, 0, true},
		{"-0", -10, 10, 0, true},
		{"+7", -10, 10, 7, true},
		{"-9223372036854775808", -1 << 63, 1<<63 - 1, -1 << 63, true},
		{"9223372036854775807", -1 << 63, 1<<63 - 1, 1<<63 - 1, true},
		{"99999999999999999999", -1 << 63, 1<<63 - 1, 0, false},
		{"-1", 0, 10, 0, false},
		{"-0", 0, 10, 0, true},
		{"11", -10, 10, 0, false},
		{"-11", -10, 10, 0, false},
		{"-10", -10, 10, -10, true},
		{"", -10, 10, 0, false},
		{"+", -10, 10, 0, false},
	}
	for _, tc := range cases {
		got, err := parseInt([]byte(tc.in), tc.lo, tc.hi)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseInt(%q, %d, %d) = %d, %v", tc.in, tc.lo, tc.hi, got, err)
		}
	}
}

// Timestamps agree with the standard library wherever it can parse them.
func TestParseTimestampAgreesWithTime(t *testing.T) {
	cases := []struct{ in, layout string }{
		{"2026-11-29 08:00:00", "2006-01-02 15:04:05"},
		{"2026-11-29 08:00:00.1", "2006-01-02 15:04:05.999999"},
		{"2026-11-29 08:00:00.12", "2006-01-02 15:04:05.999999"},
		{"2026-11-29 08:00:00.123", "2006-01-02 15:04:05.999999"},
		{"2026-11-29 08:00:00.1234", "2006-01-02 15:04:05.999999"},
		{"2026-11-29 08:00:00.12345", "2006-01-02 15:04:05.999999"},
		{"2026-11-29 08:00:00.123456", "2006-01-02 15:04:05.999999"},
		{"2000-02-29 23:59:59.999999", "2006-01-02 15:04:05.999999"},
		{"1900-03-01 00:00:00", "2006-01-02 15:04:05"},
		{"0001-01-01 00:00:00", "2006-01-02 15:04:05"},
		{"9999-12-31 23:59:59.999999", "2006-01-02 15:04:05.999999"},
	}
	for _, tc := range cases {
		want, err := time.Parse(tc.layout, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseTimestamp([]byte(tc.in), false)
		if err != nil || got != want.UnixMicro() {
			t.Errorf("parseTimestamp(%q) = %d, %v; want %d", tc.in, got, err, want.UnixMicro())
		}
		for _, off := range []string{"+00", "+05:30", "-03", "-09:30", "+05:53:28"} {
			in := tc.in + off
			wantTZ, err := time.Parse(tc.layout+"-07:00:00", tc.in+padOffset(off))
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseTimestamp([]byte(in), true)
			if err != nil || got != wantTZ.UnixMicro() {
				t.Errorf("parseTimestamp(%q) = %d, %v; want %d", in, got, err, wantTZ.UnixMicro())
			}
		}
	}
}

// padOffset turns PostgreSQL's "+05" or "+05:30" into "+05:00:00" form.
func padOffset(off string) string {
	for len(off) < len("+05:30:00") {
		off += ":00"
	}
	return off
}

func TestParseDateBC(t *testing.T) {
	// 1 BC is year 0, a leap year in the proleptic Gregorian calendar; the
	// day before 0001-01-01 is 0001-12-31 BC.
	ad, _, err := parseDate([]byte("0001-01-01"))
	if err != nil {
		t.Fatal(err)
	}
	bc, _, err := parseDate([]byte("0001-12-31 BC"))
	if err != nil || bc != ad-1 {
		t.Errorf("0001-12-31 BC = %d, %v; want %d", bc, err, ad-1)
	}
	if _, _, err := parseDate([]byte("0001-02-29 BC")); err != nil {
		t.Errorf("0001-02-29 BC (year 0 is leap): %v", err)
	}
	if _, _, err := parseDate([]byte("0002-02-29 BC")); err == nil {
		t.Error("0002-02-29 BC (year -1 is not leap) accepted")
	}
	// PostgreSQL's earliest date.
	if d, _, err := parseDate([]byte("4714-11-24 BC")); err != nil || d != -2440588 {
		t.Errorf("4714-11-24 BC = %d, %v; want -2440588 (Julian day 0)", d, err)
	}
}

func TestDecimalConverters(t *testing.T) {
	cases := []struct {
		p, s int
		in   string
		want string // the unscaled integer
	}{
		{5, 2, "7", "700"},
		{5, 2, "-0.5", "-50"},
		{5, 2, "1.5000", "150"}, // zeros beyond the scale change nothing
		{5, 2, "-0.00", "0"},
		{5, 2, "000999.99", "99999"},
		{12, 3, "-123.450", "-123450"},
		{18, 0, "999999999999999999", "999999999999999999"},
		{18, 18, "-0.999999999999999999", "-999999999999999999"},
		{19, 0, "-9999999999999999999", "-9999999999999999999"},
		{38, 0, "-99999999999999999999999999999999999999", "-99999999999999999999999999999999999999"},
		{38, 38, "0.00000000000000000000000000000000000001", "1"},
		{38, 2, "-1", "-100"},
	}
	for _, tc := range cases {
		_, conv := decimalNode(tc.p, tc.s)
		v, buf, err := conv(nil, []byte(tc.in))
		if err != nil {
			t.Errorf("numeric(%d,%d) %q: %v", tc.p, tc.s, tc.in, err)
			continue
		}
		var got string
		switch {
		case tc.p <= 9:
			got = strconv.FormatInt(int64(v.Int32()), 10)
		case tc.p <= 18:
			got = strconv.FormatInt(v.Int64(), 10)
		default:
			if len(buf) != decimalBytes(tc.p) {
				t.Errorf("numeric(%d,%d) %q: %d bytes, want %d", tc.p, tc.s, tc.in, len(buf), decimalBytes(tc.p))
			}
			got = twosComplementBytes(v.ByteArray()).String()
		}
		if got != tc.want {
			t.Errorf("numeric(%d,%d) %q = %s, want %s", tc.p, tc.s, tc.in, got, tc.want)
		}
	}
}
