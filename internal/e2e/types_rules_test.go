package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSameInstantsUnderSessionTimeZones inserts instants from sessions in
// UTC, Asia/Kathmandu (+05:45) and America/St_Johns (-03:30/-02:30), with
// the database default set to one of them, before init and after: every
// reader sees the same instants, whatever zone wrote them.
func TestSameInstantsUnderSessionTimeZones(t *testing.T) {
	e := newEnv(t, envOptions{})
	var db string
	if err := e.conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	e.exec(`ALTER DATABASE "` + db + `" SET TimeZone = 'America/St_Johns'`)
	e.exec(`CREATE TABLE instants (id int PRIMARY KEY, zone text, tz timestamptz, ts timestamp, d date, tm time)`)
	zones := []string{"UTC", "Asia/Kathmandu", "America/St_Johns"}
	// The same instants written as each session's local wall-clock time, in
	// winter and in summer (St John's has DST), plus a literal with offset.
	insert := func(base int) {
		for i, z := range zones {
			e.exec(`SET TimeZone = '` + z + `'`)
			for j, utc := range []string{"2026-01-15 12:00:00.123456", "2026-07-15 23:59:59.999999", "1900-06-01 00:00:00"} {
				id := base + i*10 + j
				e.exec(fmt.Sprintf(`INSERT INTO instants VALUES (%d, '%s',
					(timestamp '%s' AT TIME ZONE 'UTC')::timestamptz,
					(timestamp '%s' AT TIME ZONE 'UTC')::timestamp,
					((timestamp '%s' AT TIME ZONE 'UTC'))::date,
					((timestamp '%s' AT TIME ZONE 'UTC'))::time)`, id, z, utc, utc, utc, utc))
			}
		}
		e.exec(`RESET TimeZone`)
	}
	insert(1)
	e.mustRun("init")
	d := e.start()
	insert(101)
	e.waitCaughtUp(60 * time.Second)
	d.stop()

	m := e.manifest()
	files := deltaFiles(e.sink, m, "public.instants")
	base := "'" + e.sink + "/" + m.Tables["public.instants"].Base.Files[0].Path + "'"
	from := "read_parquet([" + base + ", " + strings.Trim(files, "[]") + "])"
	// The timestamptz instant is zone-independent: it must be the same in
	// every zone's rows, and equal PostgreSQL's own epoch.
	got := duck(t, `SELECT id % 10, count(DISTINCT epoch_us(tz)), min(epoch_us(tz)), count(*) FROM `+from+` GROUP BY 1 ORDER BY 1`)
	want := map[int64]string{1: "2026-01-15 12:00:00.123456+00", 2: "2026-07-15 23:59:59.999999+00", 3: "1900-06-01 00:00:00+00"}
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	ctx := context.Background()
	for _, r := range got {
		k := asInt(t, r[0])
		var pgEpoch string
		if err := e.conn.QueryRow(ctx, `SELECT (extract(epoch from $1::timestamptz) * 1000000)::numeric(30,0)::text`, want[k]).Scan(&pgEpoch); err != nil {
			t.Fatal(err)
		}
		if asInt(t, r[1]) != 1 || fmt.Sprint(r[2]) != pgEpoch || asInt(t, r[3]) != 6 {
			t.Errorf("instant %s: %v distinct values in %v rows, first %v, PostgreSQL says %s", want[k], r[1], r[3], r[2], pgEpoch)
		}
	}
	// Every column, row by row, against PostgreSQL read in UTC.
	if _, err := e.conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	rows, err := e.conn.Query(ctx, `SELECT id, (extract(epoch from tz)*1000000)::numeric(30,0)::text,
		(extract(epoch from ts)*1000000)::numeric(30,0)::text, d::text, tm::text FROM instants ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var pgRows []string
	for rows.Next() {
		var id int
		var a, b, c, dd string
		if err := rows.Scan(&id, &a, &b, &c, &dd); err != nil {
			t.Fatal(err)
		}
		pgRows = append(pgRows, fmt.Sprintf("%d %s %s %s %s", id, a, b, c, dd))
	}
	var duckRows []string
	for _, r := range duck(t, `SELECT id, epoch_us(tz), epoch_us(ts), CAST(d AS VARCHAR), CAST(tm AS VARCHAR) FROM `+from+` ORDER BY id`) {
		duckRows = append(duckRows, fmt.Sprintf("%v %v %v %v %v", r[0], r[1], r[2], r[3], r[4]))
	}
	if strings.Join(pgRows, "\n") != strings.Join(duckRows, "\n") {
		t.Errorf("postgres:\n%s\nduckdb:\n%s", strings.Join(pgRows, "\n"), strings.Join(duckRows, "\n"))
	}
}

// TestSpecialValuesNeverFailAFlush: 'infinity', numeric NaN (PostgreSQL
// refuses Infinity in a constrained numeric), a 50 MB bytea
// and a 1 MB jsonb among ordinary rows, by snapshot and by stream: every row
// lands, the rule counters move, nothing is skipped.
func TestSpecialValuesNeverFailAFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 100 MB through PostgreSQL")
	}
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE special (id int PRIMARY KEY, at timestamptz, amount numeric(10,2), blob bytea, doc jsonb)`)
	insert := func(base int) {
		e.exec(fmt.Sprintf(`INSERT INTO special SELECT %d + g, now(), g, '\x00ff'::bytea, '{"n": 1}' FROM generate_series(0, 9) g`, base))
		e.exec(fmt.Sprintf(`INSERT INTO special VALUES (%d, 'infinity', 'NaN', NULL, NULL)`, base+10))
		e.exec(fmt.Sprintf(`INSERT INTO special VALUES (%d, '-infinity', 'NaN', NULL, NULL)`, base+11))
		e.exec(fmt.Sprintf(`INSERT INTO special VALUES (%d, now(), 1, decode(repeat('ab', 50 << 20), 'hex'), NULL)`, base+12))
		e.exec(fmt.Sprintf(`INSERT INTO special VALUES (%d, now(), 2, NULL, jsonb_build_object('k', repeat('x', 1 << 20)))`, base+13))
		e.exec(fmt.Sprintf(`INSERT INTO special SELECT %d + g, now(), g, '\x01', '[]' FROM generate_series(14, 19) g`, base))
	}
	insert(0)
	e.mustRun("init")
	d := e.start()
	insert(100)
	e.waitCaughtUp(180 * time.Second)
	d.stop()

	m := e.manifest()
	mt := m.Tables["public.special"]
	files := deltaFiles(e.sink, m, "public.special")
	from := "read_parquet([" + "'" + e.sink + "/" + mt.Base.Files[0].Path + "', " + strings.Trim(files, "[]") + "])"
	got := duck(t, `SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE isinf("at")),
		count(*) FILTER (WHERE amount IS NULL), max(octet_length(blob)), max(length(CAST(doc AS VARCHAR)))
		FROM `+from)[0]
	want := []int64{40, 40, 4, 4, 50 << 20, 1<<20 + 9}
	for i, w := range want {
		if asInt(t, got[i]) != w {
			t.Errorf("column %d of the summary: got %v, want %d (all: %v)", i, got[i], w, got)
		}
	}
	var deltaAdj int64
	for _, dl := range mt.Deltas {
		deltaAdj += dl.Adjusted["at"] + dl.Adjusted["amount"]
	}
	if mt.Base.Adjusted["at"] != 2 || mt.Base.Adjusted["amount"] != 2 || deltaAdj != 4 {
		t.Errorf("adjusted counts: base %v, deltas %d; want 2+2 and 4", mt.Base.Adjusted, deltaAdj)
	}
	out := e.mustRun("status")
	for _, w := range []string{`public.special column "at": 4 values`, `public.special column "amount": 4 values`} {
		if !strings.Contains(out, w) {
			t.Errorf("status does not show %q:\n%s", w, out)
		}
	}
}

// TestTypeOverride: types: {"public.o.u": string, "public.o.n": string}
// stores both columns as text, in the snapshot and in the stream alike,
// records the choice in the manifest, and keeps numeric NaN.
func TestTypeOverride(t *testing.T) {
	e := newEnv(t, envOptions{extraYAML: "types:\n  \"public.o.u\": string\n  \"public.o.n\": string\n"})
	e.exec(`CREATE TABLE o (id int PRIMARY KEY, u uuid, n numeric(10,2))`)
	e.exec(`INSERT INTO o VALUES (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'NaN')`)
	e.mustRun("init")
	d := e.start()
	e.exec(`INSERT INTO o VALUES (2, '00000000-0000-0000-0000-000000000000', 1.5)`)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	m := e.manifest()
	mt := m.Tables["public.o"]
	for _, c := range mt.Schemas[0].Columns[1:] {
		if c.Representation != "string" || c.ParquetType != "STRING" {
			t.Errorf("manifest column %s: representation %q, parquet type %q", c.Name, c.Representation, c.ParquetType)
		}
	}
	from := "read_parquet(['" + e.sink + "/" + mt.Base.Files[0].Path + "', " + strings.Trim(deltaFiles(e.sink, m, "public.o"), "[]") + "])"
	got := duck(t, `SELECT id, u, n, typeof(u), typeof(n) FROM `+from+` ORDER BY id`)
	want := [][]string{{"1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "NaN", "VARCHAR", "VARCHAR"},
		{"2", "00000000-0000-0000-0000-000000000000", "1.50", "VARCHAR", "VARCHAR"}}
	for i := range want {
		for j := range want[i] {
			if fmt.Sprint(got[i][j]) != want[i][j] {
				t.Errorf("row %d column %d: got %v, want %s", i, j, got[i][j], want[i][j])
			}
		}
	}
	// A key that names no column stops a fresh init.
	e2 := newEnv(t, envOptions{extraYAML: "types:\n  \"public.o.nope\": string\n"})
	e2.exec(`CREATE TABLE o (id int PRIMARY KEY)`)
	if code, out := e2.run("init"); code == 0 || !strings.Contains(out, "public.o.nope names no captured column") {
		t.Errorf("init with a bad types: key exited %d:\n%s", code, out)
	}
}
