// Package snapshot takes the initial snapshot (DESIGN §5): every table is
// copied under the slot's exported snapshot, in parallel, into base Parquet
// files stamped with the slot's consistent point, so streaming can start at
// exactly that LSN with no gap and no overlap.
//
// Snapshot rows carry __op 'I', __lsn = the consistent point, __xid 0 and a
// negative __seq, unique within the table, so that they order before any
// change committed at the consistent point itself.
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/spool"
)

// Source copies one table under an exported snapshot.
type Source interface {
	// CopyTable calls fn for every row; values are valid only during the call.
	CopyTable(ctx context.Context, snapshot string, t *cdc.Table, fn func(values []cdc.Datum) error) (int64, error)
}

// Options describe one snapshot.
type Options struct {
	// Snapshot is the exported snapshot name ("" reads the current state;
	// only tests do that).
	Snapshot string
	// LSN is the slot's consistent point.
	LSN cdc.LSN
	// Time stamps __op_ts of snapshot rows.
	Time       time.Time
	Workers    int
	Generation string
	// SpoolDir is local scratch space for files before upload.
	SpoolDir string
	// PartRows starts a new base file after this many rows (0: one file).
	PartRows int64
}

// Run copies tables and uploads their base files. It returns each table's
// base, keyed by "schema.table".
func Run(ctx context.Context, src Source, store blob.Store, tables []*cdc.Table, opts Options, log *slog.Logger) (map[string]*manifest.Base, error) {
	var (
		mu    sync.Mutex
		bases = map[string]*manifest.Base{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, opts.Workers))
	for _, t := range tables {
		g.Go(func() error {
			started := time.Now()
			b, err := copyTable(gctx, src, store, t, opts, log)
			if err != nil {
				return fmt.Errorf("snapshot table %s: %w", t.ID, err)
			}
			log.Info("snapshotted table", "table", t.ID.String(), "rows", b.RowCount, "files", len(b.Files),
				"duration_ms", time.Since(started).Milliseconds())
			mu.Lock()
			bases[t.ID.String()] = b
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return bases, nil
}

func copyTable(ctx context.Context, src Source, store blob.Store, t *cdc.Table, opts Options, log *slog.Logger) (*manifest.Base, error) {
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, err
	}
	schema.SetReporter(func(a parquetfile.Adjustment) {
		log.Warn("value written by a type rule", "table", a.Table.String(), "column", a.Column,
			"rule", string(a.Rule), "key", a.Key, "value", a.Value, "detail", a.String())
	})
	dir := filepath.Join(opts.SpoolDir, "snapshot")
	base := &manifest.Base{Epoch: 0, MaxLSN: opts.LSN, Files: []manifest.File{}}
	var part *spool.File
	defer func() {
		if part != nil {
			_ = part.Remove()
		}
	}()
	finish := func() error {
		size, err := part.Finish()
		if err != nil {
			return err
		}
		key := manifest.FileKey(t.ID, opts.Generation, manifest.KindBase, 0, len(base.Files))
		if err := part.Upload(ctx, store, key); err != nil {
			return err
		}
		base.Files = append(base.Files, manifest.File{Path: key, Rows: part.Rows(), Bytes: size})
		for col, n := range part.Adjusted() {
			if base.Adjusted == nil {
				base.Adjusted = map[string]int64{}
			}
			base.Adjusted[col] += n
		}
		err = part.Remove()
		part = nil
		return err
	}
	var n int64
	_, err = src.CopyTable(ctx, opts.Snapshot, t, func(values []cdc.Datum) error {
		if part == nil {
			if part, err = spool.Create(dir, schema); err != nil {
				return err
			}
		}
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: opts.LSN, Seq: math.MinInt64 + n, CommitTime: opts.Time}
		if err := part.Write(meta, values); err != nil {
			return err
		}
		n++
		if opts.PartRows > 0 && part.Rows() >= opts.PartRows {
			return finish()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if part != nil || len(base.Files) == 0 {
		// An empty table still gets one (empty) base file, so readers and
		// catalogs always find its schema.
		if part == nil {
			if part, err = spool.Create(dir, schema); err != nil {
				return nil, err
			}
		}
		if err := finish(); err != nil {
			return nil, err
		}
	}
	base.RowCount = n
	return base, nil
}
