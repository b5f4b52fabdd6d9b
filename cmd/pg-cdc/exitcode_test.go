package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func TestExitCode(t *testing.T) {
	wrap := func(class error) error {
		return fmt.Errorf("session: %w", &cdc.Error{Class: class, Msg: "m", Hint: "h"})
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{errors.New("boom"), ExitUnexpected},
		{usageError{errors.New("bad key")}, ExitUsage},
		{fmt.Errorf("preflight: %w", postgres.ErrPreflight), ExitUsage},
		{errors.New(`unknown command "x" for "pg-cdc"`), ExitUsage},
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
	if code := run([]string{"version"}); code != ExitOK {
		t.Errorf("version: exit %d", code)
	}
}
