// Package capture is what pg-cdc captures and the rules every process
// keeps about it: one source database's tables flowing into one sink,
// checked to be the same upstream, slot and owner as the manifest records
// (design.md §1.2), and the operator actions that create or change a
// capture:
//
//   - Init: publication, then slot (with an exported snapshot), then the
//     manifest with every table pending, then each table's base as it is
//     copied (design.md §5.1); run again, it reports what an interrupted
//     init left (§5.3).
//   - Rebuild: a new slot and the next generation of every table, validated,
//     switched in one manifest write (§8.5).
//   - Resnapshot: a request, recorded in the manifest, for the stream to copy
//     one table into its next generation (§8.6).
//   - Reconcile: a request, written into the WAL under locks, for the stream
//     to record schema changes no row change announced yet (§8.3).
//   - Preflight: every check init and start depend on, with its fix.
//
// The daemon (internal/daemon) runs the stream of a capture and uses the
// same checks, table discovery and reconcile requests.
package capture

import (
	"log/slog"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// Capture names one capture. The commands build it from the
// configuration.
type Capture struct {
	// Source says how every connection to the source is opened.
	Source   postgres.ConnSpec
	Provider postgres.Provider
	// Slot and Publication are the replication slot and publication the
	// capture streams through.
	Slot, Publication string
	// Tables selects what is captured.
	Tables Selection
	// Sink is the storage; SinkName names it for messages (a directory, or
	// s3://bucket/prefix).
	Sink     Sink
	SinkName string
	// AcceptSingleWriterRisk runs on a sink whose probe shows it ignores
	// conditional writes (storage.accept_single_writer_risk).
	AcceptSingleWriterRisk bool
	// StateDir is local scratch space (spool files, rebuild's read-back).
	StateDir string
	// Workers is how many tables a snapshot copies at once.
	Workers int
	Log     *slog.Logger
}

// Selection is which tables a capture takes: every table of Schemas, or
// only Include, minus Exclude (exact names or path.Match globs); Types maps
// "schema.table.column" to a representation that replaces the column's
// default mapping (docs/types.md).
type Selection struct {
	Schemas []string
	Include []cdc.TableID
	Exclude []string
	Types   map[string]string
}

// Sink is what a capture needs of the storage: objects, and a conditional
// put for the manifest. A sink that can also hold a writer lock
// (blob.Locker: the filesystem) makes a second writer fail fast; on an
// object store the manifest's owner check and its compare-and-swap do that
// job (design.md §2.4).
type Sink interface {
	blob.Store
	blob.Conditional
}

// RebuildCommand is what the hints of the slot checks tell the operator
// to run.
const RebuildCommand = "pg-cdc rebuild"
