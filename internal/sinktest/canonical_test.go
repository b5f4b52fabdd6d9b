package sinktest

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgtype"
)

func TestCanonicalAgreesAcrossDrivers(t *testing.T) {
	u := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	ist := time.FixedZone("IST", 5*3600+1800)
	num := func(i int64, exp int32) pgtype.Numeric {
		return pgtype.Numeric{Int: big.NewInt(i), Exp: exp, Valid: true}
	}
	dec := func(i int64, scale uint8) duckdb.Decimal {
		return duckdb.Decimal{Width: 18, Scale: scale, Value: big.NewInt(i)}
	}
	cases := []struct {
		want   string
		values []any // pgx's value first, then DuckDB's
	}{
		{"NULL", []any{nil, (*pgtype.Numeric)(nil), pgtype.Numeric{}, pgtype.UUID{}, []byte(nil)}},
		{"5", []any{int16(5), int32(5), int64(5), uint32(5), 5}},
		{"-9223372036854775808", []any{int64(math.MinInt64)}},
		{"true", []any{true}},
		{"NaN", []any{float32(math.NaN()), math.NaN(), pgtype.Numeric{NaN: true, Valid: true}}},
		{"+Inf", []any{float32(math.Inf(1)), math.Inf(1)}},
		{"-Inf", []any{float32(math.Inf(-1)), math.Inf(-1)}},
		{"1.5", []any{float32(1.5), 1.5}},
		{"1e+20", []any{1e20}},
		{"0.1", []any{float32(0.1)}}, // at float32's own width, not 0.10000000149011612
		{"1.5", []any{num(150, -2), num(15, -1), dec(1500, 3), dec(15, 1)}},
		{"100", []any{num(1, 2), num(100, 0), dec(100, 0), dec(10000, 2)}},
		{"0", []any{num(0, 0), num(0, -3), dec(0, 3), dec(0, 0)}},
		{"-0.01", []any{num(-1, -2), dec(-1, 2), dec(-1000, 5)}},
		{"-123.45", []any{num(-12345, -2), dec(-123450, 3)}},
		{"Infinity", []any{pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}}},
		{"99999999999999999999999999999999999999", []any{
			pgtype.Numeric{Int: mustBig("99999999999999999999999999999999999999"), Valid: true},
			duckdb.Decimal{Width: 38, Scale: 0, Value: mustBig("99999999999999999999999999999999999999")},
			mustBig("99999999999999999999999999999999999999"),
		}},
		{"2026-11-29T08:00:00.5Z", []any{
			time.Date(2026, 11, 29, 13, 30, 0, 500_000_000, ist),
			time.Date(2026, 11, 29, 8, 0, 0, 500_000_000, time.UTC),
		}},
		{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", []any{u, duckdb.UUID(u), pgtype.UUID{Bytes: u, Valid: true}, ptr(duckdb.UUID(u))}},
		{`\x0a0b`, []any{[]byte{0x0a, 0x0b}}},
		{`\x`, []any{[]byte{}}},
		{`"NULL"`, []any{"NULL"}},
		{`""`, []any{""}},
		{`"ab "`, []any{"ab "}},
		{`{"a":[true,null],"b":1,"c":"<&>"}`, []any{
			map[string]any{"b": 1.0, "a": []any{true, nil}, "c": "<&>"},
			map[string]any{"c": "<&>", "a": []any{true, nil}, "b": float64(1)},
		}},
		{`["name","payload"]`, []any{[]any{"name", "payload"}}},
	}
	for _, tc := range cases {
		for _, v := range tc.values {
			if got := Canonical(v); got != tc.want {
				t.Errorf("Canonical(%T %v) = %s, want %s", v, v, got, tc.want)
			}
		}
	}
	// Different values stay different.
	for _, pair := range [][2]any{
		{"5", int64(5)}, {"NULL", nil}, {[]byte("a"), "a"}, {num(15, -1), num(15, -2)}, {float32(0.1), 0.10000000149011612},
		{u, []byte(u[:])},
	} {
		if Canonical(pair[0]) == Canonical(pair[1]) {
			t.Errorf("Canonical(%T %v) = Canonical(%T %v) = %s", pair[0], pair[0], pair[1], pair[1], Canonical(pair[0]))
		}
	}
	if got := Canonical(struct{ X int }{1}); !strings.Contains(got, "struct") {
		t.Errorf("Canonical of an unknown type = %s, want its type named", got)
	}
}

func ptr[T any](v T) *T { return &v }

func mustBig(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return v
}

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

func TestAssertSameRows(t *testing.T) {
	cols := []string{"id", "name", "price"}
	want := [][]any{
		{int64(1), "a", pgtype.Numeric{Int: big.NewInt(150), Exp: -2, Valid: true}},
		{int64(2), "b", nil},
		{int64(3), "c", nil},
	}
	t.Run("equal in another order", func(t *testing.T) {
		got := [][]any{
			{int64(3), "c", nil},
			{int64(1), "a", duckdb.Decimal{Width: 10, Scale: 2, Value: big.NewInt(150)}},
			{int64(2), "b", nil},
		}
		r := &recorder{TB: t}
		if !AssertSameRows(r, want, got, cols) || len(r.errors) != 0 {
			t.Errorf("rows differ: %v", r.errors)
		}
	})
	t.Run("differences", func(t *testing.T) {
		got := [][]any{
			{int64(1), "a", duckdb.Decimal{Width: 10, Scale: 2, Value: big.NewInt(151)}},
			{int64(3), "c", nil},
			{int64(4), "d", nil},
		}
		r := &recorder{TB: t}
		if AssertSameRows(r, want, got, cols) {
			t.Fatal("different rows reported equal")
		}
		all := strings.Join(r.errors, "\n")
		for _, s := range []string{
			"row id=1 column price: source 1.5, sink 1.51",
			"row id=2 is in the source but not in the sink",
			"row id=4 is in the sink but not in the source",
		} {
			if !strings.Contains(all, s) {
				t.Errorf("report lacks %q:\n%s", s, all)
			}
		}
		if strings.Contains(all, "id=3") {
			t.Errorf("report names an equal row:\n%s", all)
		}
	})
	t.Run("count and limit", func(t *testing.T) {
		var many [][]any
		for i := range 50 {
			many = append(many, []any{int64(100 + i), "x", nil})
		}
		r := &recorder{TB: t}
		AssertSameRows(r, want, many, cols)
		if len(r.errors) != maxReported+1 || !strings.Contains(r.errors[0], "source has 3 rows, sink has 50") {
			t.Errorf("got %d reports:\n%s", len(r.errors), strings.Join(r.errors, "\n"))
		}
	})
}
