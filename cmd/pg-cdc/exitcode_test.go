package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

func TestExitCode(t *testing.T) {
	wrap := func(class error) error {
		return fmt.Errorf("session: %w", &cdc.Error{Class: class, Msg: "m", Hint: "h"})
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitUnexpected},
		{cdc.Usage(errors.New("bad key")), ExitUsage},
		{fmt.Errorf("preflight: %w", postgres.ErrPreflight), ExitUsage},
		{commandLine(errors.New(`unknown command "x" for "pg-cdc"`)), ExitUsage},
		// Codes come from classes, never from messages.
		{errors.New(`unknown command "x" for "pg-cdc"`), ExitUnexpected},
		{wrap(cdc.ErrDifferences), ExitDifferences},
		{fmt.Errorf("%w after 12 attempts: %w", cdc.ErrRetriesExhausted, errors.New("reset")), ExitRetriesExhausted},
		{wrap(cdc.ErrSlotLost), ExitSlotLost},
		{wrap(cdc.ErrSlotAhead), ExitSlotAhead},
		{wrap(cdc.ErrUpstreamMismatch), ExitUpstreamMismatch},
		{wrap(cdc.ErrCASBreaker), ExitCASBreaker},
		{wrap(cdc.ErrSinkUnsafe), ExitSinkUnsafe},
		{wrap(cdc.ErrSinkLocked), ExitSinkLocked},
		{wrap(cdc.ErrSchemaChanged), ExitSchemaChanged},
		{wrap(cdc.ErrData), ExitData},
		{wrap(cdc.ErrNotInitialized), ExitNotInitialized},
		// The read path's classes are usage errors.
		{fmt.Errorf("resolve: %w", &manifest.OutsideRetentionError{}), ExitUsage},
		{&query.RefusedError{Rule: query.RuleOnlyQueries}, ExitUsage},
		{fmt.Errorf("query: %w", query.ErrInvalid), ExitUsage},
		{&query.LimitError{Limit: query.LimitTimeout}, ExitUsage},
		{fmt.Errorf("promote: %w", query.ErrBreaking), ExitUsage},
		{&query.CollectedError{Version: 3, File: "f", Err: errors.New("IO Error")}, ExitRetriesExhausted},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRunUsage(t *testing.T) {
	if code := run([]string{"no-such-command"}); code != ExitUsage {
		t.Errorf("unknown command: exit %d", code)
	}
	if code := run([]string{"status", "--no-such-flag"}); code != ExitUsage {
		t.Errorf("unknown flag: exit %d", code)
	}
	if code := run([]string{"-c", "/nonexistent/pg-cdc.yml", "status"}); code != ExitUsage {
		t.Errorf("missing config file: exit %d", code)
	}
	if code := run([]string{"start", "extra"}); code != ExitUsage {
		t.Errorf("an argument a command does not take: exit %d", code)
	}
	if code := run([]string{"config", "print", "--redacted=maybe"}); code != ExitUsage {
		t.Errorf("a flag value that does not parse: exit %d", code)
	}
	if code := run([]string{"version"}); code != ExitOK {
		t.Errorf("version: exit %d", code)
	}
}

// A --format outside a command's choices is refused as the flags parse.
func TestFormatChoice(t *testing.T) {
	for _, args := range [][]string{{"refs", "--format", "xml"}, {"query", "--format", "text", "SELECT 1"}, {"catalog", "status", "--format", "yaml"}} {
		if code := run(args); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	var format string
	c := choice{&format, []string{"text", "json"}}
	if err := c.Set("json"); err != nil || format != "json" {
		t.Errorf("Set(json): %v, format %q", err, format)
	}
	if err := c.Set("xml"); err == nil || err.Error() != "want text, json" || format != "json" {
		t.Errorf("Set(xml): %v, format %q", err, format)
	}
}
