package main

import (
	"errors"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// Exit codes are an interface for systemd and Kubernetes (DESIGN §9,
// docs/exit-codes.md). Codes 10 and above are terminal: restarting cannot
// fix them, and the shipped systemd unit lists them in
// RestartPreventExitStatus=. ExitRetriesExhausted may be restarted.
const (
	ExitOK               = 0
	ExitUnexpected       = 1
	ExitUsage            = 2
	ExitRetriesExhausted = 3
	ExitSlotLost         = 10
	ExitSlotAhead        = 11
	ExitUpstreamMismatch = 12
	ExitCASBreaker       = 13
	ExitSinkUnsafe       = 14
	ExitSinkLocked       = 15
	ExitSchemaChanged    = 16
	ExitData             = 17
	ExitNotInitialized   = 18
	ExitDifferences      = 19
)

// usageError marks configuration and command-line errors.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error) int {
	classes := []struct {
		class error
		code  int
	}{
		{cdc.ErrSlotLost, ExitSlotLost},
		{cdc.ErrSlotAhead, ExitSlotAhead},
		{cdc.ErrUpstreamMismatch, ExitUpstreamMismatch},
		{cdc.ErrCASBreaker, ExitCASBreaker},
		{cdc.ErrSinkUnsafe, ExitSinkUnsafe},
		{cdc.ErrSinkLocked, ExitSinkLocked},
		{cdc.ErrSchemaChanged, ExitSchemaChanged},
		{cdc.ErrData, ExitData},
		{cdc.ErrNotInitialized, ExitNotInitialized},
		{cdc.ErrDifferences, ExitDifferences},
		{cdc.ErrRetriesExhausted, ExitRetriesExhausted},
	}
	for _, c := range classes {
		if errors.Is(err, c.class) {
			return c.code
		}
	}
	if errors.As(err, new(usageError)) || errors.Is(err, postgres.ErrPreflight) {
		return ExitUsage
	}
	// Cobra reports unknown commands and flags as plain errors.
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "accepts ") {
		return ExitUsage
	}
	return ExitUnexpected
}
