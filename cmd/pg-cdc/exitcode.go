package main

import (
	"errors"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// Exit codes are an interface for systemd and Kubernetes (design.md §9,
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

// exitCodes maps each error class to its code, terminal classes first.
var exitCodes = []struct {
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
	// A query whose version's files were collected while it ran: asking
	// again may answer it (a newer point, or the same one if still kept).
	{query.ErrCollected, ExitRetriesExhausted},
	{cdc.ErrUsage, ExitUsage},
	{postgres.ErrPreflight, ExitUsage},
	// The read path: what was asked cannot be answered as asked (a point
	// the history does not hold, SQL the sandbox refuses or DuckDB rejects,
	// a limit, a breaking promotion without --force, a build without the
	// engine); asking again the same way fails the same way.
	{manifest.ErrOutsideRetention, ExitUsage},
	{manifest.ErrNoVersion, ExitUsage},
	{query.ErrPoint, ExitUsage},
	{query.ErrRefused, ExitUsage},
	{query.ErrInvalid, ExitUsage},
	{query.ErrLimit, ExitUsage},
	{query.ErrBreaking, ExitUsage},
	{query.ErrNoEngine, ExitUsage},
}

// exitCode is err's code, from its class alone: an error of no class is
// unexpected (1).
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	for _, c := range exitCodes {
		if errors.Is(err, c.class) {
			return c.code
		}
	}
	return ExitUnexpected
}
