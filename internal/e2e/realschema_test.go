package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInheritanceFromEmptyInit: init on a database with no table yet, then
// the application creates a parent and a child (INHERITS) with rows while
// start runs with discovery on. Both are captured without a publication
// conflict (42710 stopped start at every restart), each with its own rows
// — a child's row is the child's, never the parent's — whole from their
// first transaction; a restart streams on; the sampler never sees a
// confirm past the manifest.
func TestInheritanceFromEmptyInit(t *testing.T) {
	waitBound(t)
	e := newEnv(t, envOptions{extraYAML: "backfill:\n  discover_interval_sec: 1\n"})
	out := e.mustRun("init")
	if !strings.Contains(out, "no tables yet") {
		t.Errorf("init on an empty database says:\n%s", out)
	}
	if n := len(e.manifest().Tables); n != 0 {
		t.Fatalf("the manifest of an empty init holds %d tables", n)
	}
	s := e.startSampler()
	d := e.start()
	e.exec(`CREATE TABLE person (id int PRIMARY KEY, name text)`)
	e.exec(`CREATE TABLE emp (salary int, PRIMARY KEY (id)) INHERITS (person)`)
	e.exec(`INSERT INTO person SELECT g, 'p' || g FROM generate_series(1, 200) g`)
	e.exec(`INSERT INTO emp SELECT g, 'e' || g, g * 10 FROM generate_series(1001, 1100) g`)
	complete := func() bool {
		m := e.manifest()
		for _, k := range []string{"public.person", "public.emp"} {
			if m.Tables[k] == nil || !m.Tables[k].Snapshot.Complete() {
				return false
			}
		}
		return true
	}
	e.waitFor("person and emp to be captured", 90*time.Second, complete)
	// Through the parent: an UPDATE and a DELETE that reach the child's
	// rows change them as the child's.
	e.exec(`UPDATE person SET name = name || '!' WHERE id % 10 = 0`)
	e.exec(`DELETE FROM person WHERE id % 25 = 0`)
	e.exec(`INSERT INTO emp VALUES (2001, 'late', 1)`)
	e.waitCaughtUp(90 * time.Second)
	assertSinkEqualsSource(t, e, "public.person", "public.emp")

	// A restart publishes nothing twice and streams on.
	d.stop()
	d = e.start()
	e.exec(`INSERT INTO person VALUES (3001, 'after restart')`)
	e.exec(`INSERT INTO emp VALUES (3002, 'after restart', 2)`)
	e.waitCaughtUp(90 * time.Second)
	select {
	case <-d.done:
		t.Fatalf("start exited %d after a restart:\n%s", d.exitCode(), lines(withoutDebug(d.out.String()), 20))
	default:
	}
	assertSinkEqualsSource(t, e, "public.person", "public.emp")
	d.stop()
	s.check()
}

// TestInfinityReadBack: timestamp, timestamptz and date ±infinity read
// back as infinity through pg-cdc query, POST /v1/query and MCP's query
// tool, not as the dates at the ends of their ranges.
func TestInfinityReadBack(t *testing.T) {
	waitBound(t)
	token, hash := serveToken(t, "reader")
	addr := freeAddr(t)
	e := newEnv(t, envOptions{extraYAML: fmt.Sprintf("serve:\n  listen: %s\n  tokens:\n    reader: %q\n", addr, hash)})
	e.exec(`CREATE TABLE inf (id int PRIMARY KEY, ts timestamp, tstz timestamptz, d date)`)
	e.exec(`INSERT INTO inf VALUES (1, 'infinity', 'infinity', 'infinity'), (2, '-infinity', '-infinity', '-infinity'),
		(3, '2026-01-02 03:04:05', '2026-01-02 03:04:05+00', '2026-01-02')`)
	e.mustRun("init")
	d := e.start()
	e.exec(`INSERT INTO inf VALUES (4, 'infinity', '-infinity', 'infinity')`)
	e.waitCaughtUp(90 * time.Second)
	d.stop()

	const sql = `SELECT id, ts, tstz, d FROM public.inf ORDER BY id`
	want := [][]string{
		{"1", "infinity", "infinity", "infinity"},
		{"2", "-infinity", "-infinity", "-infinity"},
		{"4", "infinity", "-infinity", "infinity"},
	}
	check := func(surface, answer string) {
		t.Helper()
		for _, w := range want {
			for _, v := range w[1:] {
				if !strings.Contains(answer, v) {
					t.Errorf("%s: no %q in:\n%s", surface, v, answer)
				}
			}
		}
		for _, bad := range []string{"294247", "290308", "5881580", "5877641"} {
			if strings.Contains(answer, bad) {
				t.Errorf("%s renders infinity as a date (%s):\n%s", surface, bad, answer)
			}
		}
		if !strings.Contains(answer, "2026-01-02") {
			t.Errorf("%s: the finite row is missing:\n%s", surface, answer)
		}
	}

	code, out := e.run("query", "--format", "csv", sql)
	if code != 0 {
		t.Fatalf("pg-cdc query: exit %d:\n%s", code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, strings.Join(w, ",")) {
			t.Errorf("pg-cdc query: no row %q in:\n%s", strings.Join(w, ","), out)
		}
	}
	check("pg-cdc query", out)

	srv := startServe(t, e, "http://"+addr)
	defer srv.stop()
	status, body := postQuery(t, "http://"+addr, token, sql)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/query: %d %s", status, body)
	}
	check("POST /v1/query", body)

	cmd := exec.Command(binary, "mcp", "-c", e.config)
	cmd.Env = append(os.Environ(), e.procEnv...)
	cs := mcpClient(t, context.Background(), &mcp.CommandTransport{Command: cmd})
	answer, refused := mcpAsk(t, cs)(sql)
	if refused {
		t.Fatalf("MCP query: %s", answer)
	}
	check("MCP query", answer)
}
