package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOperatorErrors checks that each condition an operator can run into
// exits with its documented code and says what to do.
func TestOperatorErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY, v text);
	        CREATE TABLE nokey (v text);
	        CREATE TABLE nothing (id int PRIMARY KEY);
	        ALTER TABLE nothing REPLICA IDENTITY NOTHING`)

	// start before init: not initialized.
	if code, out := e.run("start"); code != 18 || !strings.Contains(out, "pg-cdc init") {
		t.Errorf("start before init: exit %d, want 18 with a hint to run init:\n%s", code, out)
	}
	// ... having written nothing: no _pgcdc/ in the sink, no run artifacts.
	if _, err := os.Stat(e.sink + "/_pgcdc"); err == nil {
		t.Error("start before init made _pgcdc/ in the sink")
	}
	if runs, _ := filepath.Glob(filepath.Join(e.dir, "state", "runs", "*")); len(runs) > 0 {
		t.Errorf("start before init wrote run artifacts: %v", runs)
	}
	// REPLICA IDENTITY NOTHING is refused with the fix.
	code, out := e.run("init")
	if code != 2 || !strings.Contains(out, "public.nothing") || !strings.Contains(out, "REPLICA IDENTITY") || !strings.Contains(out, "ALTER TABLE") {
		t.Errorf("init with a REPLICA IDENTITY NOTHING table: exit %d, want 2 naming the table and the ALTER TABLE fix:\n%s", code, out)
	}
	if _, err := os.Stat(e.sink + "/_pgcdc/manifest.json"); err == nil {
		t.Error("a refused init wrote a manifest")
	}
	e.exec(`ALTER TABLE nothing REPLICA IDENTITY DEFAULT`)
	out = e.mustRun("init")
	if !strings.Contains(out, "public.nokey") || !strings.Contains(out, "insert-only") {
		t.Errorf("init does not say that public.nokey is captured insert-only:\n%s", out)
	}

	// A second writer on the same sink fails fast.
	d := e.start()
	e.exec("INSERT INTO keyed VALUES (1, 'a')")
	e.waitCaughtUp(60 * time.Second)
	if code, out := e.run("start"); code != 15 {
		t.Errorf("a second start on the same sink: exit %d, want 15:\n%s", code, out)
	}
	d.stop()

	// A start whose config names another slot is refused: the sink belongs
	// to the slot in its manifest, and the message names both.
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	other := e.dir + "/other-slot.yml"
	if err := os.WriteFile(other, []byte(strings.Replace(string(cfg), "slot: "+e.slot, "slot: other_slot", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := e.runWith(other, "start"); code != 12 || !strings.Contains(out, `"`+e.slot+`"`) || !strings.Contains(out, `"other_slot"`) {
		t.Errorf("start with another slot on an owned sink: exit %d, want 12 naming both slots:\n%s", code, out)
	}

	// Configuration errors exit 2 and name the key and line.
	bad := e.dir + "/bad.yml"
	if err := os.WriteFile(bad, []byte("source:\n  postgres:\n    url: \"postgres://x@127.0.0.1/db\"\nflush:\n  intervall_sec: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := e.runWith(bad, "status"); code != 2 || !strings.Contains(out, "intervall_sec") || !strings.Contains(out, ":5") {
		t.Errorf("unknown config key: exit %d, want 2 naming the key and line 5:\n%s", code, out)
	}
	if code, out := e.run("teardown"); code != 2 || !strings.Contains(out, "--yes") {
		t.Errorf("teardown without --yes: exit %d, want 2:\n%s", code, out)
	}
	if code, out := e.run("frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2:\n%s", code, out)
	}

	// teardown drops the slot and the publication and keeps the data.
	out = e.mustRun("teardown", "--yes")
	var slots int
	if err := e.conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&slots); err != nil || slots != 0 {
		t.Errorf("teardown left the slot (%d, %v):\n%s", slots, err, out)
	}
	if _, err := os.Stat(e.sink + "/_pgcdc/manifest.json"); err != nil {
		t.Errorf("teardown touched the sink: %v", err)
	}
	if code, out := e.run("start"); code != 10 {
		t.Errorf("start after teardown: exit %d, want 10 (slot lost):\n%s", code, out)
	}
}
