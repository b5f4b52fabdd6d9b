package render

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// dumpSettings are the session settings whose output the text renderer
// reproduces.
const dumpSettings = `SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; SET TimeZone = 'UTC';
	SET extra_float_digits = 1; SET bytea_output = 'hex'`

// TestAgainstPostgres is the independent oracle: the cases' values are
// stored in a real PostgreSQL, read by the source adapter's COPY (as a
// snapshot does), written by internal/parquetfile, read back with
// parquet-go and rendered; the text must equal what PostgreSQL's own output
// functions print under dumpSettings, value for value. It also checks that
// the cases list PostgreSQL's canonical text, which TestRoundTripText
// relies on.
func TestAgainstPostgres(t *testing.T) {
	url := pgtest.Shared(t).CreateDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	_, rows := casesTable(typeCases)
	exec(typeSetupSQL)
	cols := []string{"id int8 PRIMARY KEY"}
	for i, c := range typeCases {
		cols = append(cols, fmt.Sprintf("c%d %s", i, c.sql))
	}
	exec("CREATE TABLE typed (" + strings.Join(cols, ", ") + ")")
	for _, r := range rows {
		lits := []string{r[0]}
		for i, v := range r[1:] {
			if v == null {
				lits = append(lits, "NULL")
				continue
			}
			lits = append(lits, "'"+strings.ReplaceAll(v, "'", "''")+"'::"+typeCases[i].sql)
		}
		exec("INSERT INTO typed VALUES (" + strings.Join(lits, ", ") + ")")
	}

	// What PostgreSQL prints, by its output functions (format's %s; a ::text
	// cast differs for inet).
	exec(dumpSettings)
	sel := []string{"id::text"}
	for i := range typeCases {
		sel = append(sel, fmt.Sprintf("CASE WHEN c%[1]d IS NULL THEN NULL ELSE format('%%s', c%[1]d) END", i))
	}
	pgRows, err := conn.Query(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM typed ORDER BY typed.id")
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	for pgRows.Next() {
		ptrs := make([]*string, len(sel))
		dst := make([]any, len(sel))
		for i := range ptrs {
			dst[i] = &ptrs[i]
		}
		if err := pgRows.Scan(dst...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(sel))
		for i, p := range ptrs {
			row[i] = null
			if p != nil {
				row[i] = *p
			}
		}
		want = append(want, row)
	}
	if err := pgRows.Err(); err != nil {
		t.Fatal(err)
	}

	// The cases hold PostgreSQL's canonical text.
	for r := range rows {
		for c := 1; c < len(rows[r]); c++ {
			if rows[r][c] != want[r][c] {
				t.Errorf("case %s value %d: PostgreSQL prints %q, the case says %q", typeCases[c-1].sql, r+1, want[r][c], rows[r][c])
			}
		}
	}

	// The production path: discover, COPY, parquetfile, parquet-go, render.
	db, err := postgres.Connect(ctx, postgres.StaticURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables, err := db.DiscoverTables(ctx, nil, []cdc.TableID{{Schema: "public", Name: "typed"}}, nil)
	if err != nil || len(tables) != 1 {
		t.Fatalf("discover: %v (%d tables)", err, len(tables))
	}
	schema, err := parquetfile.NewSchema(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	var file strings.Builder
	w := parquetfile.NewWriter(&file, schema)
	seq := int64(0)
	if _, err := db.CopyTable(ctx, "", tables[0], func(values []cdc.Datum) error {
		seq++
		return w.Write(cdc.RowMeta{Op: cdc.OpInsert, LSN: 1, Seq: seq, XID: 1, CommitTime: time.Unix(0, 0)}, values)
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(schema.ManifestColumns(tables[0]))
	if err != nil {
		t.Fatal(err)
	}
	got := renderText(t, tab, readRows(t, []byte(file.String())))
	byID := map[string][]string{}
	for _, g := range got {
		byID[g[0]] = g
	}
	checked := 0
	for _, wr := range want {
		g, ok := byID[wr[0]]
		if !ok {
			t.Errorf("row id %s not rendered", wr[0])
			continue
		}
		for c := 1; c < len(wr); c++ {
			checked++
			if g[c] != wr[c] {
				r, _ := strconv.Atoi(wr[0])
				t.Errorf("%s (%s) row %d: rendered %q, PostgreSQL prints %q", typeCases[c-1].sql, tab.cols[c].ptype, r, g[c], wr[c])
			}
		}
	}
	t.Logf("%d values compared with PostgreSQL's output", checked)
}

// TestAgainstPostgresRandom compares the float, date and timestamp
// printers with PostgreSQL's on random values: float bit patterns of every
// exponent (sent in binary, so PostgreSQL gets the exact bits), and days
// and microseconds across the whole timestamp range, BC included.
func TestAgainstPostgresRandom(t *testing.T) {
	url := pgtest.Shared(t).CreateDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, dumpSettings); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 5000

	f8 := make([]float64, n)
	f4 := make([]float32, n)
	for i := range n {
		f8[i] = math.Float64frombits(rng.Uint64())
		f4[i] = math.Float32frombits(rng.Uint32())
		if i%4 == 0 { // short decimals, where ties between candidates show
			f8[i] = float64(rng.IntN(1_000_000)) / math.Pow10(rng.IntN(30))
			f4[i] = float32(rng.IntN(1_000_000)) / float32(math.Pow10(rng.IntN(12)))
		}
	}
	var got8, got4 []string
	if err := conn.QueryRow(ctx, "SELECT array_agg(x::text ORDER BY o) FROM unnest($1::float8[]) WITH ORDINALITY AS u(x, o)", f8).Scan(&got8); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT array_agg(x::text ORDER BY o) FROM unnest($1::float4[]) WITH ORDINALITY AS u(x, o)", f4).Scan(&got4); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if s := string(appendFloat(nil, f8[i], 64)); s != got8[i] {
			t.Errorf("float8 %b: rendered %q, PostgreSQL prints %q", math.Float64bits(f8[i]), s, got8[i])
		}
		if s := string(appendFloat(nil, float64(f4[i]), 32)); s != got4[i] {
			t.Errorf("float4 %b: rendered %q, PostgreSQL prints %q", math.Float32bits(f4[i]), s, got4[i])
		}
	}

	// Dates from 4713 BC to beyond year 294247's limit, timestamps inside it.
	const minDay, maxDay = -2440588, 106751990 // 4714-11-24 BC, 294247-01-09
	days := make([]int32, n)
	micros := make([]int64, n)
	for i := range n {
		days[i] = int32(minDay + rng.Int64N(maxDay-minDay+1))
		micros[i] = rng.Int64N(microsPerDay)
		if i%3 == 0 {
			micros[i] = rng.Int64N(86400) * microsPerSecond
		}
	}
	var gotD, gotTS, gotTZ []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(d::text ORDER BY o), array_agg(ts::text ORDER BY o), array_agg(ts::timestamptz::text ORDER BY o)
		FROM (SELECT date '1970-01-01' + d AS d, (date '1970-01-01' + d) + us * interval '1 microsecond' AS ts, o
		      FROM unnest($1::int4[], $2::int8[]) WITH ORDINALITY AS u(d, us, o)) s`, days, micros).Scan(&gotD, &gotTS, &gotTZ); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		us := int64(days[i])*microsPerDay + micros[i]
		if s := string(appendDate(nil, days[i])); s != gotD[i] {
			t.Errorf("date %d: rendered %q, PostgreSQL prints %q", days[i], s, gotD[i])
		}
		if s := string(appendTimestamp(nil, us, false)); s != gotTS[i] {
			t.Errorf("timestamp %d: rendered %q, PostgreSQL prints %q", us, s, gotTS[i])
		}
		if s := string(appendTimestamp(nil, us, true)); s != gotTZ[i] {
			t.Errorf("timestamptz %d: rendered %q, PostgreSQL prints %q", us, s, gotTZ[i])
		}
	}
}
