// Package audit is the audit stream of operator actions
// (docs/operations.md#audit-stream): a record when an action begins, one
// when it ends (result, exit code, duration, error) and one per event
// inside it (a stop request), with stable keys and audit=true, logged at
// info whatever log.level says, through the same secret scrubbing as the
// log.
package audit

import (
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/logging"
	"github.com/pg-cdc/pg-cdc/internal/runs"
)

// Actions are the commands that act on the source, the sink or the
// configuration's secrets; status, dump and version only read, and are not
// audited.
var Actions = map[string]bool{
	"preflight": true, "init": true, "start": true, "teardown": true,
	"compact": true, "verify": true, "config print": true, "rebuild": true,
	"reconcile": true, "resnapshot": true, "promote": true,
}

// Log is the audit stream of one command. A nil *Log (a command that is
// not audited) does nothing.
type Log struct {
	log     *slog.Logger
	action  string
	who     []any // user, host, pid, run_id
	args    []string
	started time.Time
}

// New returns the audit of action, or nil when action is not audited.
// handler makes the slog handler of the stream (text or JSON on w) at a
// level; args are the command line, scrubbed here.
func New(action, runID string, args []string, handler func(level slog.Level) slog.Handler, scrub *logging.Scrubber) *Log {
	if !Actions[action] {
		return nil
	}
	clean := make([]string, len(args))
	for i, a := range args {
		clean[i] = scrub.Scrub(a)
	}
	host, _ := os.Hostname()
	// Info whatever log.level says: an operator's trail is not a verbosity.
	log := slog.New(logging.NewHandler(handler(slog.LevelInfo), scrub)).With("audit", true)
	return &Log{log: log, action: action, args: clean, started: time.Now(),
		who: []any{"user", CurrentUser(), "host", host, "pid", os.Getpid(), "run_id", runID}}
}

// TextOrJSON is the handler factory of New for log.format's two formats.
func TextOrJSON(format string, w io.Writer) func(slog.Level) slog.Handler {
	return func(level slog.Level) slog.Handler {
		opts := &slog.HandlerOptions{Level: level}
		if format == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
}

// record logs one audit record: action and phase, who, then attrs.
func (a *Log) record(action, phase string, attrs ...any) {
	a.log.Info("operator action", append(append([]any{"action", action, "phase", phase}, a.who...), attrs...)...)
}

// Begin logs the start of the action.
func (a *Log) Begin() {
	if a == nil {
		return
	}
	a.record(a.action, "begin", "args", a.args)
}

// End logs how the action ended.
func (a *Log) End(code int, err error) {
	if a == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	attrs := []any{"args", a.args, "result", result, "exit_code", code, "duration_ms", time.Since(a.started).Milliseconds()}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	a.record(a.action, "end", attrs...)
}

// Event logs an operator action inside a running command, such as the
// stop request of start.
func (a *Log) Event(action string) {
	if a == nil {
		return
	}
	a.record(action, "event")
}

// CurrentUser is the OS user name, or its uid when the system has no name
// for it (a container without an /etc/passwd entry).
func CurrentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

// NewRunID returns a new run id (internal/runs' form), shared by a
// command's audit records and, for start, its run artifacts.
func NewRunID() (string, error) { return runs.NewID(time.Now(), nil) }
