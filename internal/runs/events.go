package runs

import "github.com/pg-cdc/pg-cdc/internal/cdc"

// Schema is the version of the records a run directory holds: every line
// of events.ndjson, state.json and run.json carry it as "schema". A field
// may be added within a version; renaming or removing one, or changing its
// meaning, makes a new version (docs/event-schema.md).
const Schema = 1

// Event is one line of events.ndjson. The types below are the whole set;
// each line is the envelope ("schema", "ts", "run_id", "seq", "type")
// followed by the event's own fields.
type Event interface {
	// Type is the value of the line's "type".
	Type() string
}

// RunStarted is the first event of a run.
type RunStarted struct {
	Version string `json:"version"`
	Command string `json:"command"`
	PID     int    `json:"pid"`
	Host    string `json:"host"`
}

// SessionStarted: a replication session streams from LSN (the manifest's
// end LSN at epoch Epoch). Session counts from 1 within the run.
type SessionStarted struct {
	Session  int     `json:"session"`
	Slot     string  `json:"slot"`
	LSN      cdc.LSN `json:"lsn"`
	Epoch    uint64  `json:"epoch"`
	Tables   int     `json:"tables"`
	Provider string  `json:"provider"`
}

// SessionFailed: a session (or its setup) failed with an error start
// retries after WaitMS; Attempt counts the failures in a row.
type SessionFailed struct {
	Attempt int    `json:"attempt"`
	Err     string `json:"err"`
	WaitMS  int64  `json:"wait_ms"`
}

// Flushed: an epoch became durable (its files and the manifest written);
// LSN is the manifest's new end LSN.
type Flushed struct {
	Epoch      uint64  `json:"epoch"`
	LSN        cdc.LSN `json:"lsn"`
	Reason     string  `json:"reason"`
	Txns       int     `json:"txns"`
	Rows       int64   `json:"rows"`
	Tables     int     `json:"tables"`
	Bytes      int64   `json:"bytes"`
	DurationMS int64   `json:"duration_ms"`
}

// Compacted: a compaction pass inside start (compaction.interval) ended.
// Err is empty when it succeeded.
type Compacted struct {
	// Merges counts minor compactions, which merged MergedDeltas deltas;
	// Tables counts major ones, which folded FoldedDeltas deltas into
	// bases of Rows rows.
	Merges       int    `json:"merges,omitempty"`
	MergedDeltas int    `json:"merged_deltas,omitempty"`
	Tables       int    `json:"tables"`
	Rows         int64  `json:"rows"`
	FoldedDeltas int    `json:"folded_deltas"`
	GCDeleted    int    `json:"gc_deleted"`
	DurationMS   int64  `json:"duration_ms"`
	Err          string `json:"err,omitempty"`
}

// Guardrail: the slot's retained WAL crossed guardrail.max_retained_wal_bytes,
// upwards (Exceeded) or back down.
type Guardrail struct {
	Slot          string `json:"slot"`
	RetainedBytes int64  `json:"retained_bytes"`
	LimitBytes    int64  `json:"limit_bytes"`
	Exceeded      bool   `json:"exceeded"`
}

// StopRequested: SIGTERM or SIGINT arrived; the stream drains.
type StopRequested struct{}

// RunStopped is the last event of a run.
type RunStopped struct {
	ExitCode   int     `json:"exit_code"`
	Err        string  `json:"err,omitempty"`
	DurationMS int64   `json:"duration_ms"`
	DurableLSN cdc.LSN `json:"durable_lsn"`
}

func (RunStarted) Type() string     { return "run_started" }
func (SessionStarted) Type() string { return "session_started" }
func (SessionFailed) Type() string  { return "session_failed" }
func (Flushed) Type() string        { return "flushed" }
func (Compacted) Type() string      { return "compacted" }
func (Guardrail) Type() string      { return "guardrail" }
func (StopRequested) Type() string  { return "stop_requested" }
func (RunStopped) Type() string     { return "run_stopped" }

// Types lists every event, one of each, for documentation tests.
func Types() []Event {
	return []Event{RunStarted{}, SessionStarted{}, SessionFailed{}, Flushed{}, Compacted{}, Guardrail{}, StopRequested{}, RunStopped{}}
}
