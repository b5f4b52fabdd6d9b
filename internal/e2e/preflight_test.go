package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// TestPreflightFails: against a server with wal_level = replica and a table
// with REPLICA IDENTITY NOTHING, pg-cdc preflight exits 2 (the code init
// gives the same problems) and prints each problem with its fix: the
// wal_level setting and the ALTER TABLE. It creates nothing, not even the
// sink's directory.
func TestPreflightFails(t *testing.T) {
	cluster := pgtest.NewWith(t, pgtest.Options{Settings: []string{"wal_level = replica"}})
	e := newEnv(t, envOptions{cluster: cluster})
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY, v text);
	        CREATE TABLE nothing (id int PRIMARY KEY, v text);
	        ALTER TABLE nothing REPLICA IDENTITY NOTHING`)

	code, out := e.run("preflight")
	if code != 2 {
		t.Errorf("preflight exited %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{
		"✗ wal_level is replica, not logical",
		"fix: as a superuser run ALTER SYSTEM SET wal_level = logical",
		"✗ table public.nothing has REPLICA IDENTITY NOTHING",
		`fix: ALTER TABLE "public"."nothing" REPLICA IDENTITY DEFAULT`,
		"✓ 2 tables to capture: public.keyed, public.nothing",
		"preflight: ", "2 failed (fixes for provider self-managed)",
		"hint: each failed check above is followed by its fix",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(e.sink); !os.IsNotExist(err) {
		t.Errorf("preflight created the sink directory (stat: %v)", err)
	}

	// The same as JSON, on stdout; the verdict is the exit code.
	code, out = e.run("preflight", "--format", "json")
	var rep struct {
		Provider string `json:"provider"`
		Failed   int    `json:"failed"`
		Checks   []struct {
			Name, Status, Detail, Fix string
		} `json:"checks"`
	}
	// The report is the output's JSON document, between the audit records
	// and main's error line on stderr.
	report := out[max(0, strings.Index(out, "{\n")):]
	if err := json.NewDecoder(strings.NewReader(report)).Decode(&rep); err != nil {
		t.Fatalf("preflight --format json: %v:\n%s", err, out)
	}
	fixes := map[string]string{}
	for _, c := range rep.Checks {
		if c.Status == "fail" {
			fixes[c.Name] = c.Fix
		}
	}
	if code != 2 || rep.Provider != "self-managed" || rep.Failed != 2 ||
		!strings.Contains(fixes["wal_level"], "wal_level = logical") || !strings.Contains(fixes["replica_identity"], "REPLICA IDENTITY DEFAULT") {
		t.Errorf("preflight --format json: exit %d, %+v", code, rep)
	}

	// init refuses the same server with the same exit code.
	if code, out := e.run("init"); code != 2 || !strings.Contains(out, "wal_level is replica") {
		t.Errorf("init on the same server: exit %d, want 2:\n%s", code, out)
	}
}

// TestPreflightPasses: on a ready server preflight exits 0 before init
// (the publication and the slot are "created by init", the sink directory
// is left alone), init then succeeds, and preflight after init holds the
// slot and the publication to the manifest and still exits 0.
func TestPreflightPasses(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY, v text); INSERT INTO keyed VALUES (1, 'a')`)

	out := e.mustRun("preflight")
	for _, want := range []string{
		"✓ wal_level = logical",
		"does not exist yet; init creates it",
		"storage.path " + e.sink + " does not exist yet",
		"0 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight before init lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "✗") {
		t.Errorf("a check failed on a ready server:\n%s", out)
	}
	if _, err := os.Stat(e.sink); !os.IsNotExist(err) {
		t.Errorf("preflight created the sink directory (stat: %v)", err)
	}

	e.mustRun("init")
	out = e.mustRun("preflight")
	for _, want := range []string{
		"✓ initialized at epoch 0",
		"enforces conditional writes",
		"publishes every operation of the captured tables",
		"✓ slot \"" + e.slot + "\": inactive",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight after init lacks %q:\n%s", want, out)
		}
	}

	// start names the provider it detected; preflight beside it sees the
	// slot streamed, and its probe does not disturb the writer.
	d := e.start()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(d.out.String(), "msg=streaming") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if log := d.out.String(); !strings.Contains(log, "provider=self-managed") {
		t.Errorf("start does not log provider=self-managed:\n%s", log)
	}
	out = e.mustRun("preflight")
	if !strings.Contains(out, "✓ slot \""+e.slot+"\": active (PID") {
		t.Errorf("preflight beside start does not see the slot active:\n%s", out)
	}
	e.exec(`INSERT INTO keyed VALUES (2, 'b')`)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
}
