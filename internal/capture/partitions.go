package capture

import (
	"context"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// PartitionLeaves returns the leaf partitions of those of ids that are
// partitioned (replicate.TableSource).
func (f *Finder) PartitionLeaves(ctx context.Context, ids []cdc.TableID) (map[cdc.TableID][]uint32, error) {
	return f.db.PartitionLeaves(ctx, ids)
}

// PartitionHasRows reports whether partition oid holds rows of its own.
func (f *Finder) PartitionHasRows(ctx context.Context, oid uint32) (bool, error) {
	return f.db.PartitionHasRows(ctx, oid)
}
