package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestDescribeColumns reads added columns with the value PostgreSQL gives
// the rows that existed before them (attmissingval), which is not the
// column's current default once that was changed, and NULL for a column
// added without a default or with a volatile one (the table was rewritten).
func TestDescribeColumns(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TYPE mood AS ENUM ('sad', 'ok')`,
		`CREATE TABLE t (id int PRIMARY KEY)`,
		`INSERT INTO t VALUES (1)`,
		`ALTER TABLE t ADD COLUMN n int DEFAULT 7`,
		`ALTER TABLE t ALTER COLUMN n SET DEFAULT 8`,
		`ALTER TABLE t ADD COLUMN s text DEFAULT 'a "b", c'`,
		`ALTER TABLE t ADD COLUMN plain bigint`,
		`ALTER TABLE t ADD COLUMN m mood DEFAULT 'ok'`,
		`ALTER TABLE t ADD COLUMN ts timestamptz DEFAULT '2026-01-02 03:04:05+02'`,
		`ALTER TABLE t ADD COLUMN stamp timestamptz DEFAULT now()`,
		`ALTER TABLE t ADD COLUMN gone int DEFAULT 1`,
		`ALTER TABLE t DROP COLUMN gone`)
	var oid uint32
	if _, err := fmt.Sscan(e.queryString(`SELECT 't'::regclass::oid::text`), &oid); err != nil {
		t.Fatal(err)
	}
	got, err := e.db.DescribeColumns(testCtx(t), oid, []string{"n", "s", "plain", "m", "ts", "stamp", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	show := func(c cdc.Column) string {
		m := "NULL"
		if c.Missing != nil {
			m = *c.Missing
		}
		if c.VolatileDefault {
			m += " volatile"
		}
		if c.Name == "stamp" && c.Missing != nil {
			m = "now" // the time of the ALTER
		}
		return fmt.Sprintf("%s attnum=%d type=%s labels=%v missing=%s", c.Name, c.AttNum, c.PGType, c.EnumLabels, m)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, show(c))
	}
	want := []string{
		"n attnum=2 type=integer labels=[] missing=7",
		`s attnum=3 type=text labels=[] missing=a "b", c`,
		"plain attnum=4 type=bigint labels=[] missing=NULL",
		"m attnum=5 type=mood labels=[sad ok] missing=ok",
		"ts attnum=6 type=timestamp with time zone labels=[] missing=2026-01-02 01:04:05+00",
		"stamp attnum=7 type=timestamp with time zone labels=[] missing=now",
		"gone attnum=0 type= labels=[] missing=NULL",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// A volatile default rewrites the table (a value per row, no WAL for
	// them) and clears every missing value; a volatile default set later
	// looks the same in the catalog.
	e.exec(`CREATE TABLE v (id int PRIMARY KEY, k int DEFAULT 3)`,
		`INSERT INTO v VALUES (1)`,
		`ALTER TABLE v ADD COLUMN n int DEFAULT 7`,
		`ALTER TABLE v ADD COLUMN r float8 DEFAULT random()`,
		`ALTER TABLE v ADD COLUMN later float8`,
		`ALTER TABLE v ALTER COLUMN later SET DEFAULT random()`)
	if _, err := fmt.Sscan(e.queryString(`SELECT 'v'::regclass::oid::text`), &oid); err != nil {
		t.Fatal(err)
	}
	if got, err = e.db.DescribeColumns(testCtx(t), oid, []string{"n", "r", "later"}); err != nil {
		t.Fatal(err)
	}
	lines = nil
	for _, c := range got {
		lines = append(lines, show(c))
	}
	want = []string{
		"n attnum=3 type=integer labels=[] missing=NULL",
		"r attnum=4 type=double precision labels=[] missing=NULL volatile",
		"later attnum=5 type=double precision labels=[] missing=NULL volatile",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("after a rewrite: got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
