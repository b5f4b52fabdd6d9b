package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/logging"
	"github.com/pg-cdc/pg-cdc/internal/runs"
)

// auditedActions are the commands that act on the source, the sink or the
// configuration's secrets; each logs an audit record when it begins and
// when it ends (docs/operations.md#audit-stream). status, dump and version
// only read, and are not audited.
var auditedActions = map[string]bool{
	"preflight": true, "init": true, "start": true, "teardown": true,
	"compact": true, "verify": true, "config print": true, "rebuild": true,
	"reconcile": true, "resnapshot": true,
}

// audit is the audit stream of one command: records with audit=true and
// stable keys, logged at info whatever log.level says, through the same
// secret scrubbing as the log.
type audit struct {
	log     *slog.Logger
	action  string
	runID   string
	who     []any // user, host, pid, run_id
	args    []string
	started time.Time
}

// newAudit returns the audit of action, or nil when action is not audited.
func newAudit(action, runID string, args []string, format string, w io.Writer, scrub *logging.Scrubber) *audit {
	if !auditedActions[action] {
		return nil
	}
	clean := make([]string, len(args))
	for i, a := range args {
		clean[i] = scrub.Scrub(a)
	}
	host, _ := os.Hostname()
	// Info whatever log.level says: an operator's trail is not a verbosity.
	log := slog.New(logging.NewHandler(baseHandler(format, slog.LevelInfo, w), scrub)).With("audit", true)
	return &audit{log: log, action: action, runID: runID, args: clean, started: time.Now(),
		who: []any{"user", currentUser(), "host", host, "pid", os.Getpid(), "run_id", runID}}
}

// record logs one audit record: action and phase, who, then attrs.
func (a *audit) record(action, phase string, attrs ...any) {
	a.log.Info("operator action", append(append([]any{"action", action, "phase", phase}, a.who...), attrs...)...)
}

// begin logs the start of the action.
func (a *audit) begin() {
	if a == nil {
		return
	}
	a.record(a.action, "begin", "args", a.args)
}

// end logs how the action ended.
func (a *audit) end(code int, err error) {
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

// event logs an operator action inside a running command, such as the
// stop request of start.
func (a *audit) event(action string) {
	if a == nil {
		return
	}
	a.record(action, "event")
}

type auditKey struct{}

// withAudit makes a (and its run ID) available to the command.
func withAudit(ctx context.Context, a *audit) context.Context {
	return context.WithValue(ctx, auditKey{}, a)
}

// auditFrom is the command's audit; nil (whose methods do nothing) when
// there is none.
func auditFrom(ctx context.Context) *audit {
	a, _ := ctx.Value(auditKey{}).(*audit)
	return a
}

// runIDFrom is the command's run ID, shared by its audit records and its
// run artifacts; a new one when the command has no audit.
func runIDFrom(ctx context.Context) string {
	if a := auditFrom(ctx); a != nil {
		return a.runID
	}
	id, _ := runs.NewID(time.Now(), nil)
	return id
}

// actionOf names a command as the audit stream does: its path without
// the program name ("start", "config print").
func actionOf(cmd *cobra.Command) string {
	_, rest, _ := strings.Cut(cmd.CommandPath(), " ")
	return rest
}

// currentUser is the OS user name, or its uid when the system has no
// name for it (a container without an /etc/passwd entry).
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}
