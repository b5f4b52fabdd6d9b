package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestRunArtifacts runs start under a workload, stops it with SIGTERM and
// reads the run directory it leaves under state.path/runs: run.json,
// events.ndjson, state.json and summary.md (docs/event-schema.md).
func TestRunArtifacts(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 20, 20)
	e.mustRun("init")
	d := e.start()
	w := runWorkloadFor(e.url, 41, 2*time.Second)
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	m := e.manifest()

	dir := onlyRunDir(t, e)
	id := filepath.Base(dir)
	out := d.out.String()
	for _, want := range []string{"msg=\"writing run artifacts\" run_id=" + id,
		"audit=true action=start phase=begin", "audit=true action=stop_requested phase=event",
		"audit=true action=start phase=end", "result=ok exit_code=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the daemon's log lacks %q", want)
		}
	}

	var run struct {
		Schema     int            `json:"schema"`
		RunID      string         `json:"run_id"`
		Command    string         `json:"command"`
		PID        int            `json:"pid"`
		StartedAt  time.Time      `json:"started_at"`
		StoppedAt  *time.Time     `json:"stopped_at"`
		ExitCode   *int           `json:"exit_code"`
		Error      string         `json:"error"`
		DurableLSN string         `json:"durable_lsn"`
		Config     map[string]any `json:"config"`
	}
	readJSONFile(t, filepath.Join(dir, "run.json"), &run)
	if run.Schema != 1 || run.RunID != id || run.Command != "start" || run.PID != d.cmd.Process.Pid ||
		run.StoppedAt == nil || !run.StoppedAt.After(run.StartedAt) || run.ExitCode == nil || *run.ExitCode != 0 ||
		run.Error != "" || run.DurableLSN != m.EndLSN.String() {
		t.Errorf("run.json: %+v (manifest end LSN %s)", run, m.EndLSN)
	}
	if run.Config["flush.interval_sec"] != 1.0 || run.Config["replication.slot"] != e.slot || run.Config["retry.max_backoff"] != "30s" {
		t.Errorf("run.json config: %v", run.Config)
	}

	// events.ndjson: the envelope on every line, in order, the run's story.
	f, err := os.Open(filepath.Join(dir, "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := map[string]int{}
	var types []string
	var rows int64
	var lastFlushLSN string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var ev struct {
			Schema int       `json:"schema"`
			TS     time.Time `json:"ts"`
			RunID  string    `json:"run_id"`
			Seq    int       `json:"seq"`
			Type   string    `json:"type"`
			Rows   int64     `json:"rows"`
			LSN    string    `json:"lsn"`
			Epoch  uint64    `json:"epoch"`
			Exit   *int      `json:"exit_code"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events.ndjson line %d: %v: %s", n, err, sc.Text())
		}
		if ev.Schema != 1 || ev.RunID != id || ev.Seq != n || ev.TS.IsZero() {
			t.Errorf("events.ndjson line %d envelope: %s", n, sc.Text())
		}
		count[ev.Type]++
		types = append(types, ev.Type)
		if ev.Type == "flushed" {
			rows += ev.Rows
			lastFlushLSN = ev.LSN
			if ev.Epoch == 0 || ev.LSN == "" {
				t.Errorf("flushed without epoch or LSN: %s", sc.Text())
			}
		}
		if ev.Type == "run_stopped" && (ev.Exit == nil || *ev.Exit != 0) {
			t.Errorf("run_stopped: %s", sc.Text())
		}
	}
	if len(types) == 0 || types[0] != "run_started" || types[len(types)-1] != "run_stopped" ||
		count["session_started"] != 1 || count["flushed"] < 1 || count["stop_requested"] != 1 || rows == 0 {
		t.Fatalf("events: %v", types)
	}
	if l, err := cdc.ParseLSN(lastFlushLSN); err != nil || l > m.EndLSN {
		t.Errorf("the last flush at %s (%v) is past the manifest's end LSN %s", lastFlushLSN, err, m.EndLSN)
	}

	var state struct {
		Schema     int    `json:"schema"`
		RunID      string `json:"run_id"`
		DurableLSN string `json:"durable_lsn"`
		Epoch      uint64 `json:"epoch"`
		Connected  bool   `json:"connected"`
		Sessions   int    `json:"sessions"`
		Tables     map[string]struct {
			LastDeltaEpoch uint64 `json:"last_delta_epoch"`
			Deltas         int    `json:"deltas"`
		} `json:"tables"`
	}
	readJSONFile(t, filepath.Join(dir, "state.json"), &state)
	if state.Schema != 1 || state.RunID != id || state.DurableLSN != m.EndLSN.String() || state.Epoch != m.Epoch ||
		state.Connected || state.Sessions != 1 {
		t.Errorf("state.json: %+v; manifest: epoch %d, end LSN %s", state, m.Epoch, m.EndLSN)
	}
	for name, mt := range m.Tables {
		var last uint64
		for _, d := range mt.Deltas {
			last = max(last, d.Epoch)
		}
		if got := state.Tables[name]; got.LastDeltaEpoch != last || got.Deltas != len(mt.Deltas) {
			t.Errorf("state.json table %s: %+v, manifest: last delta epoch %d, %d deltas", name, got, last, len(mt.Deltas))
		}
	}
	if state.Tables["public.orders"].LastDeltaEpoch == 0 {
		t.Error("state.json: public.orders has no delta epoch after a workload")
	}

	summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# pg-cdc run " + id, "stopped cleanly on request", fmt.Sprintf(": %d rows, ", rows),
		"durable LSN at the stop: " + m.EndLSN.String(), "| public.orders |", "## Errors\n\nNone."} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
}

// onlyRunDir is the one run directory under the test's state.path.
func onlyRunDir(t *testing.T, e *env) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(e.dir, "state", "runs", "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("run directories: %v %v", dirs, err)
	}
	return dirs[0]
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
}
