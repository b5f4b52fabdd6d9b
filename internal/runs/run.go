package runs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// File names inside a run directory.
const (
	RunFile     = "run.json"
	EventsFile  = "events.ndjson"
	StateFile   = "state.json"
	SummaryFile = "summary.md"
)

// DefaultKeep is how many run directories Start keeps, the new one
// included.
const DefaultKeep = 20

// DefaultMaxEventsBytes bounds events.ndjson: a line that would take it
// past this first moves it to events.ndjson.1 (replacing the one there) and
// starts a new file, so a run of months keeps at most twice this. seq goes
// on across the files.
const DefaultMaxEventsBytes = 64 << 20

// idTime is the time part of a run ID: UTC, sortable, no separators that a
// file system or a shell would mind.
const idTime = "20060102T150405Z"

var idPattern = regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{6}$`)

// NewID returns a run ID: the UTC time and six random hex digits,
// "20260102T150405Z-1a2b3c". IDs sort by time.
func NewID(now time.Time, random io.Reader) (string, error) {
	if random == nil {
		random = rand.Reader
	}
	b := make([]byte, 3)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return now.UTC().Format(idTime) + "-" + hex.EncodeToString(b), nil
}

// Info says who runs what; run.json holds it.
type Info struct {
	RunID     string    `json:"run_id"`
	Version   string    `json:"version"`
	Command   string    `json:"command"`
	Args      []string  `json:"args"`
	PID       int       `json:"pid"`
	Host      string    `json:"host"`
	User      string    `json:"user"`
	StartedAt time.Time `json:"started_at"`
	// Config is the redacted configuration, key ("flush.interval_sec") to
	// value.
	Config map[string]any `json:"config"`
}

// Stop is how a run ended.
type Stop struct {
	ExitCode int
	// Err is the error the run stopped with (already scrubbed by the
	// caller; Options.Redact applies as well); empty for a clean stop.
	Err string
	// DurableLSN is the manifest's end LSN at the stop.
	DurableLSN cdc.LSN
}

// State is what state.json holds: the stream at one moment.
type State struct {
	Schema       int       `json:"schema"`     // set by WriteState
	RunID        string    `json:"run_id"`     // set by WriteState
	UpdatedAt    time.Time `json:"updated_at"` // set by WriteState
	StartedAt    time.Time `json:"started_at"`
	Connected    bool      `json:"connected"`
	Sessions     int       `json:"sessions"`
	Reconnects   int       `json:"reconnects"`
	ReceivedLSN  cdc.LSN   `json:"received_lsn"`
	DurableLSN   cdc.LSN   `json:"durable_lsn"`
	ConfirmedLSN cdc.LSN   `json:"confirmed_lsn"`
	DurableAt    time.Time `json:"durable_at,omitzero"`
	Epoch        uint64    `json:"epoch"`
	LagSeconds   float64   `json:"lag_seconds"`
	LagBytes     int64     `json:"lag_bytes"`
	BufferEvents int64     `json:"buffer_events"`
	BufferBytes  int64     `json:"buffer_bytes"`
	SpilledBytes int64     `json:"spilled_bytes"`
	// Tables, by "schema.table", from the manifest.
	Tables      map[string]TableState `json:"tables"`
	LastError   string                `json:"last_error,omitempty"`
	LastErrorAt time.Time             `json:"last_error_at,omitzero"`
}

// TableState is one table in state.json.
type TableState struct {
	// LastDeltaEpoch is the newest epoch with a delta file of the table
	// (0: none since the snapshot or the last compaction).
	LastDeltaEpoch uint64 `json:"last_delta_epoch"`
	Deltas         int    `json:"deltas"`
	BaseEpoch      uint64 `json:"base_epoch"`
}

// Options tune a Run; the zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Redact is applied to every line and file before it is written; nil
	// writes them as they are.
	Redact func(string) string
	// Keep is how many run directories to keep, this one included; 0
	// means DefaultKeep.
	Keep int
	// MaxEventsBytes bounds events.ndjson; 0 means DefaultMaxEventsBytes.
	MaxEventsBytes int64
}

// Run is one run directory, open for writing.
type Run struct {
	dir  string
	info Info
	opts Options

	mu         sync.Mutex
	events     *os.File
	eventBytes int64 // written to events
	seq        int64
	tally      tally
	state      *State
	done       bool
}

// Start prunes old run directories under root, creates root/<info.RunID>,
// writes run.json and the run_started event.
func Start(root string, info Info, opts Options) (*Run, error) {
	if !idPattern.MatchString(info.RunID) {
		return nil, fmt.Errorf("run id %q: want the form of NewID", info.RunID)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxEventsBytes <= 0 {
		opts.MaxEventsBytes = DefaultMaxEventsBytes
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if err := prune(root, opts.Keep-1); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, info.RunID)
	if err := os.Mkdir(dir, 0o750); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	r := &Run{dir: dir, info: info, opts: opts}
	if err := r.writeRunFile(nil); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("run events: %w", err)
	}
	r.events = f
	if err := r.Emit(RunStarted{Version: info.Version, Command: info.Command, PID: info.PID, Host: info.Host}); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// Dir is the run directory.
func (r *Run) Dir() string { return r.dir }

// ID is the run ID.
func (r *Run) ID() string { return r.info.RunID }

// Emit appends one event to events.ndjson. After Finish it does nothing.
func (r *Run) Emit(e Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.emit(e)
}

func (r *Run) emit(e Event) error {
	if r.done {
		return nil
	}
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Type(), err)
	}
	now := r.opts.Now()
	r.seq++
	head, err := json.Marshal(struct {
		Schema int    `json:"schema"`
		TS     string `json:"ts"`
		RunID  string `json:"run_id"`
		Seq    int64  `json:"seq"`
		Type   string `json:"type"`
	}{Schema, now.UTC().Format(time.RFC3339Nano), r.info.RunID, r.seq, e.Type()})
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Type(), err)
	}
	// The envelope's fields first, then the event's own.
	line := head[:len(head)-1]
	if len(body) > 2 {
		line = append(append(line, ','), body[1:]...)
	} else {
		line = append(line, '}')
	}
	r.tally.add(e, now)
	text := r.opts.Redact(string(line)) + "\n"
	if r.eventBytes > 0 && r.eventBytes+int64(len(text)) > r.opts.MaxEventsBytes {
		if err := r.rotateEvents(); err != nil {
			return err
		}
	}
	n, err := io.WriteString(r.events, text)
	r.eventBytes += int64(n)
	if err != nil {
		return fmt.Errorf("write %s: %w", EventsFile, err)
	}
	return nil
}

// rotateEvents moves events.ndjson to events.ndjson.1 and starts a new one.
func (r *Run) rotateEvents() error {
	path := filepath.Join(r.dir, EventsFile)
	if err := r.events.Close(); err != nil {
		return fmt.Errorf("rotate %s: %w", EventsFile, err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		return fmt.Errorf("rotate %s: %w", EventsFile, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("rotate %s: %w", EventsFile, err)
	}
	r.events, r.eventBytes = f, 0
	return nil
}

// WriteState replaces state.json with s.
func (r *Run) WriteState(s State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	return r.writeState(s)
}

func (r *Run) writeState(s State) error {
	s.Schema, s.RunID, s.UpdatedAt = Schema, r.info.RunID, r.opts.Now().UTC()
	if s.Tables == nil {
		s.Tables = map[string]TableState{}
	}
	r.state = &s
	return r.writeJSON(StateFile, s)
}

// Finish writes the final state, the run_stopped event, run.json with the
// stop, and summary.md, and closes the run. Every step is tried; the
// errors are joined.
func (r *Run) Finish(final State, stop Stop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	now := r.opts.Now()
	errs := []error{r.emit(RunStopped{ExitCode: stop.ExitCode, Err: stop.Err,
		DurationMS: now.Sub(r.info.StartedAt).Milliseconds(), DurableLSN: stop.DurableLSN})}
	r.done = true
	errs = append(errs, r.writeState(final), r.writeRunFile(&stopRecord{at: now, Stop: stop}))
	errs = append(errs, r.writeFile(SummaryFile, []byte(summary(r.info, now, stop, *r.state, r.tally))))
	if err := r.events.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close %s: %w", EventsFile, err))
	}
	return errors.Join(errs...)
}

type stopRecord struct {
	at time.Time
	Stop
}

// writeRunFile writes run.json: the info, and the stop once there is one.
func (r *Run) writeRunFile(stop *stopRecord) error {
	rec := struct {
		Schema int `json:"schema"`
		Info
		StoppedAt  *time.Time `json:"stopped_at,omitempty"`
		DurationMS *int64     `json:"duration_ms,omitempty"`
		ExitCode   *int       `json:"exit_code,omitempty"`
		Error      string     `json:"error,omitempty"`
		DurableLSN *cdc.LSN   `json:"durable_lsn,omitempty"`
	}{Schema: Schema, Info: r.info}
	rec.StartedAt = rec.StartedAt.UTC()
	if stop != nil {
		at := stop.at.UTC()
		d := at.Sub(r.info.StartedAt).Milliseconds()
		rec.StoppedAt, rec.DurationMS, rec.ExitCode, rec.Error = &at, &d, &stop.ExitCode, stop.Err
		rec.DurableLSN = &stop.DurableLSN
	}
	return r.writeJSON(RunFile, rec)
}

func (r *Run) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return r.writeFile(name, append(b, '\n'))
}

// writeFile replaces name atomically: a reader sees the old file or the
// new one, never a part.
func (r *Run) writeFile(name string, data []byte) error {
	data = []byte(r.opts.Redact(string(data)))
	tmp, err := os.CreateTemp(r.dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o640)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(r.dir, name))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", name, werr)
	}
	return nil
}

// prune removes the oldest run directories under root until at most keep
// remain. Only names of the run ID form are counted or removed.
func prune(root string, keep int) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	slices.Sort(ids)
	var errs []error
	for len(ids) > max(keep, 0) {
		if err := os.RemoveAll(filepath.Join(root, ids[0])); err != nil {
			errs = append(errs, fmt.Errorf("remove old run: %w", err))
		}
		ids = ids[1:]
	}
	return errors.Join(errs...)
}

// tally is what the summary counts from the events of a run.
type tally struct {
	Flushes, Sessions, Failures, Compactions, CompactionErrs, GuardrailCrossings int
	Rows, Bytes                                                                  int64
	FirstEpoch, LastEpoch                                                        uint64
	StopRequestedAt                                                              time.Time
	// Errors are the last few failures, oldest first.
	Errors []timedError
}

type timedError struct {
	At   time.Time
	What string
}

// maxSummaryErrors bounds the errors summary.md lists.
const maxSummaryErrors = 10

func (t *tally) add(e Event, at time.Time) {
	switch e := e.(type) {
	case Flushed:
		if t.Flushes == 0 {
			t.FirstEpoch = e.Epoch
		}
		t.Flushes++
		t.LastEpoch = e.Epoch
		t.Rows += e.Rows
		t.Bytes += e.Bytes
	case SessionStarted:
		t.Sessions++
	case SessionFailed:
		t.Failures++
		t.addError(at, fmt.Sprintf("session failed (attempt %d, retried after %s): %s", e.Attempt, time.Duration(e.WaitMS)*time.Millisecond, e.Err))
	case Compacted:
		t.Compactions++
		if e.Err != "" {
			t.CompactionErrs++
			t.addError(at, "compaction failed: "+e.Err)
		}
	case Guardrail:
		if e.Exceeded {
			t.GuardrailCrossings++
		}
	case StopRequested:
		t.StopRequestedAt = at
	case RunStopped:
		if e.Err != "" {
			t.addError(at, fmt.Sprintf("stopped with exit code %d: %s", e.ExitCode, e.Err))
		}
	}
}

func (t *tally) addError(at time.Time, what string) {
	t.Errors = append(t.Errors, timedError{at, what})
	if len(t.Errors) > maxSummaryErrors {
		t.Errors = t.Errors[len(t.Errors)-maxSummaryErrors:]
	}
}

// summary renders summary.md.
func summary(info Info, stoppedAt time.Time, stop Stop, final State, t tally) string {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# pg-cdc run %s\n\n", info.RunID)
	p("- command: `pg-cdc %s`, version %s, pid %d on %s (user %s)\n", info.Command, info.Version, info.PID, info.Host, info.User)
	p("- started %s, stopped %s: %s\n", info.StartedAt.UTC().Format(time.RFC3339), stoppedAt.UTC().Format(time.RFC3339),
		stoppedAt.Sub(info.StartedAt).Round(time.Second))
	switch {
	case stop.ExitCode == 0 && !t.StopRequestedAt.IsZero():
		p("- result: exit 0, stopped cleanly on request (%s)\n", t.StopRequestedAt.UTC().Format(time.RFC3339))
	case stop.ExitCode == 0:
		p("- result: exit 0\n")
	default:
		p("- result: **exit %d**: %s\n", stop.ExitCode, stop.Err)
	}
	if t.Flushes > 0 {
		p("- flushed %d epochs (%d to %d): %d rows, %s\n", t.Flushes, t.FirstEpoch, t.LastEpoch, t.Rows, humanBytes(t.Bytes))
	} else {
		p("- flushed no epoch: 0 rows\n")
	}
	p("- durable LSN at the stop: %s (epoch %d)\n", stop.DurableLSN, final.Epoch)
	p("- replication sessions: %d, reconnects: %d, failed sessions: %d\n", t.Sessions, final.Reconnects, t.Failures)
	if t.Compactions > 0 {
		p("- compaction passes: %d (%d failed)\n", t.Compactions, t.CompactionErrs)
	}
	if t.GuardrailCrossings > 0 {
		p("- retained WAL crossed guardrail.max_retained_wal_bytes %d times\n", t.GuardrailCrossings)
	}
	if len(final.Tables) > 0 {
		p("\n## Tables\n\n| table | last delta epoch | deltas | base epoch |\n| --- | --- | --- | --- |\n")
		names := make([]string, 0, len(final.Tables))
		for n := range final.Tables {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			ts := final.Tables[n]
			p("| %s | %d | %d | %d |\n", n, ts.LastDeltaEpoch, ts.Deltas, ts.BaseEpoch)
		}
	}
	p("\n## Errors\n\n")
	if len(t.Errors) == 0 {
		p("None.\n")
	}
	for _, e := range t.Errors {
		p("- %s: %s\n", e.At.UTC().Format(time.RFC3339), e.What)
	}
	p("\nDetails: %s, %s, %s.\n", EventsFile, StateFile, RunFile)
	return b.String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
