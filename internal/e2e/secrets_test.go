package e2e

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// TestPasswordInNoOutput captures everything a run whose URL holds a
// password writes (every command's stdout and stderr at log level debug,
// the daemon through a PostgreSQL restart, failed sign-ins, the run
// artifacts, state.path and the sink) and finds the password nowhere. The
// role signs in with scram-sha-256 over TCP; the URL holds the password
// literally, through ${VAR}, and through PGCDC_SOURCE_POSTGRES_URL.
func TestPasswordInNoOutput(t *testing.T) {
	const (
		role     = "pgcdc_pw_role"
		password = "Zq7-pgcdc-Secret-4711"
		wrong    = "Wr0ng-pgcdc-Guess-0815"
		pwEnv    = "E2E_SOURCE_PASSWORD"
	)
	cluster := pgtest.NewWith(t, pgtest.Options{HBA: []string{"host all " + role + " 127.0.0.1/32 scram-sha-256"}})
	e := newEnv(t, envOptions{cluster: cluster})
	e.exec("CREATE ROLE " + role + " LOGIN SUPERUSER PASSWORD '" + password + "'")
	seed(t, e, 20, 20)

	// The configurations: the URL with the password itself, with ${VAR},
	// with a wrong password, and naming a database that does not exist.
	base, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	withURL := func(name, u string) string {
		p := filepath.Join(e.dir, name)
		cfg := strings.Replace(string(base), strconv.Quote(e.url), strconv.Quote(u), 1)
		if cfg == string(base) {
			t.Fatal("the source URL is not in the configuration")
		}
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	src, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	src.User = url.UserPassword(role, password)
	literalURL := src.String()
	literal := withURL("literal.yml", literalURL)
	viaVar := withURL("var.yml", strings.Replace(literalURL, password, "${"+pwEnv+"}", 1))
	src.User = url.UserPassword(role, wrong)
	badPassword := withURL("wrong-password.yml", src.String())
	src.User = url.UserPassword(role, password)
	src.Path = "/no_such_database"
	badDatabase := withURL("wrong-database.yml", src.String())
	varEnv := []string{pwEnv + "=" + password}

	var outputs []string
	run := func(config string, env []string, wantOK bool, args ...string) string {
		t.Helper()
		code, out := e.runEnv(config, env, args...)
		if (code == 0) != wantOK {
			t.Fatalf("pg-cdc %v exited %d:\n%s", args, code, out)
		}
		outputs = append(outputs, out)
		return out
	}

	printed := run(literal, nil, true, "config", "print")
	if !strings.Contains(printed, "url: \"postgres://"+role+":xxxxx@") {
		t.Errorf("config print does not show the redacted URL:\n%s", printed)
	}
	run(viaVar, varEnv, true, "config", "print")
	run(e.config, []string{"PGCDC_SOURCE_POSTGRES_URL=" + literalURL}, true, "config", "print", "--redacted")
	run(literal, nil, true, "preflight")
	if out := run(literal, nil, true, "init"); !strings.Contains(out, "audit=true action=init phase=end") {
		t.Errorf("init wrote no audit record:\n%s", out)
	}

	// The daemon signs in through ${VAR}, streams a workload, and rides
	// out a PostgreSQL restart: the failed session is logged with its error.
	d := e.startCommand(varEnv, "start")
	before := e.manifest().EndLSN
	w := runWorkloadFor(e.url, 51, 2*time.Second)
	e.waitProgress(before, 30*time.Second)
	if err := cluster.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-w.done // fails when the server goes away; expected
	e.reconnect()
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	run(literal, nil, true, "status")
	run(literal, nil, true, "verify")
	d.stop()
	daemonOut := d.out.String()
	outputs = append(outputs, daemonOut)
	if !strings.Contains(daemonOut, "retrying") || !strings.Contains(daemonOut, "level=DEBUG") {
		t.Errorf("the daemon logged no retry or no debug line; the test would prove less than it claims:\n%s", lines(daemonOut, 20))
	}

	// Failures: a refused password (status, and start, which stops at
	// once and leaves a failed run), a database that does not exist.
	if out := run(badPassword, nil, false, "status"); !strings.Contains(out, "password authentication failed") {
		t.Errorf("a wrong password did not fail as one:\n%s", out)
	}
	run(badPassword, nil, false, "start")
	run(badDatabase, nil, false, "status")
	run(literal, nil, true, "compact")
	// A password given by mistake as an argument: quoted back in an error
	// (an unknown table, a flag that does not parse) and in the audit
	// record's args, it is scrubbed as a known secret.
	if out := run(literal, nil, false, "compact", "--table", "public."+password); !strings.Contains(out, "public.xxxxx") {
		t.Errorf("compact --table: the error does not name the table, scrubbed:\n%s", out)
	}
	run(viaVar, varEnv, false, "status", "--wal-rate-window", password)

	// The one way to see it: asked for explicitly (and audited).
	if out := run(literal, nil, true, "config", "print", "--redacted=false"); !strings.Contains(out, password) ||
		!strings.Contains(out, "action=\"config print\" phase=end") {
		t.Errorf("config print --redacted=false:\n%s", out)
	}
	outputs = outputs[:len(outputs)-1]

	secrets := []string{password, wrong, url.QueryEscape(password), url.QueryEscape(wrong)}
	for i, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("output %d shows a password:\n%s", i, out)
			}
		}
	}
	// Nothing pg-cdc wrote to disk holds it either: the run artifacts (two
	// runs of start), spilled state, the manifest and the data files.
	files := 0
	for _, root := range []string{filepath.Join(e.dir, "state"), e.sink} {
		err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			for _, s := range secrets {
				if bytes.Contains(data, []byte(s)) {
					t.Errorf("%s holds a password", p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(e.dir, "state", "runs", "*", "run.json"))
	if len(runs) != 2 || files < 10 {
		t.Errorf("%d runs and %d files searched; want 2 runs and more files", len(runs), files)
	}
}
