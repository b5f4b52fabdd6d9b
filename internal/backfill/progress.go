package backfill

import (
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// ChunkResult is what one placed chunk tells the manifest.
type ChunkResult struct {
	Rows    int      // rows the chunk copied
	Limit   int      // rows it asked for
	LastKey []string // key of its last row in text form; nil when Rows is 0
	Marker  cdc.LSN  // where the stream delivered its marker
}

// Advance returns the table's snapshot record after the chunk r. A chunk
// shorter than it asked for reached the end of the table: the snapshot is
// complete, at the marker's LSN. It is applied inside the manifest write of
// the epoch holding the chunk; a write re-applied after a conflict applies it
// to the re-read manifest, which does not hold this chunk yet.
func Advance(s manifest.Snapshot, r ChunkResult, now time.Time) manifest.Snapshot {
	out := s
	out.State = manifest.SnapshotBackfilling
	if out.StartedAt == nil {
		t := now.UTC()
		out.StartedAt = &t
	}
	if out.Chunks == 0 && out.LastKey == nil {
		// The first chunk: a count left by an interrupted init's copy of
		// this table counts rows that are not in the sink.
		out.RowsCopied = 0
	}
	out.RowsCopied += int64(r.Rows)
	out.Chunks++
	if r.Rows > 0 {
		out.LastKey = append([]string(nil), r.LastKey...)
	}
	if r.Rows < r.Limit {
		out.State = manifest.SnapshotComplete
		out.LSN = r.Marker
		t := now.UTC()
		out.CompletedAt = &t
	}
	return out
}
