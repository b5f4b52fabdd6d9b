package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestSchemaChangeStopsWithoutLoss: following schema changes is not in this
// version, so an added column must stop the daemon with its exit code and a
// message naming the table, after everything before the change is durable
// and nothing after it was confirmed.
func TestSchemaChangeStopsWithoutLoss(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE evolving (id int PRIMARY KEY, v text)`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.exec(`INSERT INTO evolving SELECT g, 'before' FROM generate_series(1, 100) g`)
	e.waitCaughtUp(60 * time.Second)
	e.exec(`ALTER TABLE evolving ADD COLUMN w int`)
	e.exec(`INSERT INTO evolving VALUES (101, 'after', 1)`)
	code := d.wait(60 * time.Second)
	if code != 16 {
		t.Fatalf("exit %d after a schema change, want 16:\n%s", code, lines(withoutDebug(d.out.String()), 10))
	}
	if !strings.Contains(d.out.String(), "public.evolving") {
		t.Errorf("the error does not name the table:\n%s", lines(withoutDebug(d.out.String()), 10))
	}
	s.check()
	m := e.manifest()
	var rows int64
	for _, dl := range m.Tables["public.evolving"].Deltas {
		rows += dl.Rows
	}
	if rows != 100 {
		t.Errorf("the manifest holds %d change rows, want the 100 from before the change", rows)
	}
	// A restart replays the same change and stops the same way: terminal.
	if code, out := e.run("start"); code != 16 {
		t.Errorf("restart after a schema change: exit %d, want 16:\n%s", code, lines(withoutDebug(out), 10))
	}
}
