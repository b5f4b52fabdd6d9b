package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pg-cdc/pg-cdc/bench"
	blobfs "github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// The catalog publisher's cost (issue 17), in two parts:
//
//   - the stream's drain with the publisher beside it: one backlog of
//     --catalog-rows inserts drained by pg-cdc start with catalog.type
//     none and with catalog.type iceberg (the embedded SQL catalog),
//     alternating, each until durable in the manifest; the ratio is the
//     cost to the durability path (goal ≥ 0.95×);
//   - the publisher alone, in process: --catalog-versions manifest
//     versions of a filesystem sink, one delta file of 1,000 rows each,
//     a compaction every 60, each published by catalog.Publisher on the
//     SQL catalog as pg-cdc start does, back to back, with
//     catalog.iceberg.snapshot_max_age 10 s and snapshot_min_keep 10:
//     the time each publication takes and the metadata the catalog keeps
//     after them all.
type catalogResult struct {
	rows     int
	off, on  []float64 // rows/s per repetition
	versions int
	publish  bench.Summary // seconds per version, flushes only
	compact  bench.Summary // seconds per version, compactions
	p99, max float64       // flushes
	// metaBytes is everything under _pgcdc/iceberg/ (metadata JSON,
	// manifest lists, manifests) after the last version, metaFiles its
	// files, metaJSON the current metadata file's size; catalogDB the
	// SQLite catalog's; atHalf the metadata bytes half-way.
	metaBytes, metaJSON, catalogDB, atHalf int64
	metaFiles                              int
	snapshots                              int // retained in the changelog table
	loadStart, loadEnd                     string
}

func (h *harness) catalogCost(ctx context.Context) (*catalogResult, error) {
	res := &catalogResult{rows: h.o.catalogRows, loadStart: loadAvg()}
	if err := h.catalogDrain(ctx, res); err != nil {
		return nil, err
	}
	if err := h.catalogPublisher(ctx, res); err != nil {
		return nil, err
	}
	res.loadEnd = loadAvg()
	return res, nil
}

func (h *harness) catalogDrain(ctx context.Context, res *catalogResult) error {
	const db = "catalog"
	c, err := h.database(ctx, db)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	reps := max(h.o.reps, 3)
	type pair struct{ off, on pgcdcRun }
	runs := make([]pair, reps)
	for i := range runs {
		for j, extra := range []string{"", "catalog:\n  type: iceberg\n  iceberg:\n    commit_interval: 0s\n"} {
			r, err := h.pgcdcConfig(db, fmt.Sprintf("%s_%d_%d", db, i+1, j))
			if err != nil {
				return err
			}
			if extra != "" {
				if err := appendFile(r.config, extra); err != nil {
					return err
				}
			}
			if _, _, err := h.initPGCDC(r); err != nil {
				return fmt.Errorf("pg-cdc init: %w", err)
			}
			r.tables = []string{"public.bench"}
			if j == 0 {
				runs[i].off = r
			} else {
				runs[i].on = r
			}
		}
	}
	h.logf("catalog: writing a backlog of %s rows", count(res.rows))
	if err := insertBatches(ctx, c, 1, res.rows, h.o.txnRows); err != nil {
		return fmt.Errorf("backlog: %w", err)
	}
	for i, p := range runs {
		order := []pgcdcRun{p.off, p.on}
		if i%2 == 1 {
			order = []pgcdcRun{p.on, p.off}
		}
		for _, r := range order {
			run, err := h.drainPGCDC(ctx, h.bin, r, res.rows, nil)
			if err != nil {
				return fmt.Errorf("catalog drain %s: %w", r.slot, err)
			}
			rate := float64(res.rows) / run.usage.Wall.Seconds()
			on := r.slot == p.on.slot
			if on {
				res.on = append(res.on, rate)
			} else {
				res.off = append(res.off, rate)
			}
			h.logf("catalog: rep %d publisher %-5v %6.2fs %9.0f rows/s", i+1, on, run.usage.Wall.Seconds(), rate)
		}
	}
	c.Close(context.Background())
	return h.dropDatabase(ctx, db)
}

// catalogPublisher publishes res.versions synthetic versions in process.
// catalogMaxAge is snapshot_max_age of the in-process publisher.
const catalogMaxAge = 10 * time.Second

func (h *harness) catalogPublisher(ctx context.Context, res *catalogResult) error {
	res.versions = h.o.catalogVersions
	dir := filepath.Join(h.dir, "catalog-publisher")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sink, err := newBenchSink(ctx, filepath.Join(dir, "sink"))
	if err != nil {
		return err
	}
	dbPath := filepath.Join(dir, "catalog.db")
	ad, closeCat, err := iceberg.Open(iceberg.OpenOptions{Kind: iceberg.KindSQL, URI: dbPath, Warehouse: sink.root})
	if err != nil {
		return err
	}
	defer closeCat()
	// Iceberg expires by the wall clock: the versions are published back
	// to back, so a short snapshot_max_age stands for a day at a flush a
	// second.
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: catalogMaxAge, SnapshotMinKeep: 10,
		Positions: iceberg.Tombstones(sink.root)})
	var flushes, compactions []float64
	for v := 1; v <= res.versions; v++ {
		var m *manifest.Manifest
		compaction := v%60 == 0
		if compaction {
			m, err = sink.compact(ctx)
		} else {
			m, err = sink.delta(ctx, 1000)
		}
		if err != nil {
			return err
		}
		began := time.Now()
		if _, err := p.Publish(ctx, m); err != nil {
			return fmt.Errorf("publish version %d: %w", m.Version, err)
		}
		took := time.Since(began).Seconds()
		if compaction {
			compactions = append(compactions, took)
		} else {
			flushes = append(flushes, took)
		}
		if v == res.versions/2 {
			res.atHalf, _ = dirSize(filepath.Join(sink.root, iceberg.MetadataPrefix))
		}
	}
	res.publish, res.compact = bench.Summarize(flushes), bench.Summarize(compactions)
	res.p99, res.max = percentile(flushes, 0.99), percentile(flushes, 1)
	if res.metaBytes, err = dirSize(filepath.Join(sink.root, iceberg.MetadataPrefix)); err != nil {
		return err
	}
	res.metaFiles, _ = dirFiles(filepath.Join(sink.root, iceberg.MetadataPrefix))
	if st, err := os.Stat(dbPath); err == nil {
		res.catalogDB = st.Size()
	}
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	loc, err := ad.(*iceberg.Adapter).MetadataLocation(ctx, id)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(trimFileURL(loc))
	if err != nil {
		return err
	}
	res.metaJSON = int64(len(data))
	var meta struct {
		Snapshots []json.RawMessage `json:"snapshots"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	res.snapshots = len(meta.Snapshots)
	h.logf("catalog: %d versions published, flush p50 %.1f ms, metadata %s", res.versions, res.publish.Median*1000, bytesIEC(res.metaBytes))
	return nil
}

func trimFileURL(s string) string {
	if len(s) > len("file://") && s[:len("file://")] == "file://" {
		return s[len("file://"):]
	}
	return s
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

func dirFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	return n, err
}

// benchSink is a filesystem sink of one table (id bigint, v text) whose
// versions are made by hand: deltas of inserts, and compactions folding
// them into a base.
type benchSink struct {
	root  string
	store *blobfs.Store
	mc    *manifest.Committer
	tbl   *cdc.Table
	ps    *parquetfile.Schema
	now   time.Time
	next  int // the next id to insert
	n     int // files written
}

func newBenchSink(ctx context.Context, root string) (*benchSink, error) {
	store, err := blobfs.New(root)
	if err != nil {
		return nil, err
	}
	s := &benchSink{root: store.Root(), store: store, now: time.Now().UTC(), next: 1}
	s.tbl = &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "t"}, OID: 100, ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1,
		PrimaryKey: []string{"id"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
			{Name: "v", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		}}
	if s.ps, err = parquetfile.NewSchema(s.tbl); err != nil {
		return nil, err
	}
	base, err := s.write(ctx, "base", 1000)
	if err != nil {
		return nil, err
	}
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "1"}, EndLSN: cdc.LSN(s.next), Tables: map[string]*manifest.Table{
		"public.t": {Schema: "public", Name: "t", OID: 100, Generation: "g0001", PrimaryKey: []string{"id"}, ReplicaIdentity: "default",
			SchemaVersion: 1, Schemas: []manifest.SchemaVersion{{Version: 1, Columns: s.ps.ManifestColumns(s.tbl)}},
			Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: cdc.LSN(s.next)},
			Base:     &manifest.Base{MaxLSN: cdc.LSN(s.next), RowCount: base.Rows, Files: []manifest.File{base}}},
	}}
	m.AppendHistory(manifest.EpochRecord{Epoch: 0, EndLSN: m.EndLSN, MaxCommitTime: s.now, FlushedAt: s.now})
	if s.mc, err = manifest.Create(ctx, store, m, s.now); err != nil {
		return nil, err
	}
	return s, nil
}

// write puts a file of rows new inserts (or, for a base written by a
// compaction, every row inserted so far).
func (s *benchSink) write(ctx context.Context, kind string, rows int) (manifest.File, error) {
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, s.ps)
	first := s.next
	if kind == "compacted" {
		first, rows = 1, s.next-1
	}
	for i := range rows {
		id := first + i
		vals := []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(id))}, {Kind: cdc.DatumText, Text: []byte("value " + strconv.Itoa(id))}}
		if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, LSN: cdc.LSN(id), Seq: int64(i), XID: cdc.XID(id), CommitTime: s.now}, vals); err != nil {
			return manifest.File{}, err
		}
	}
	if err := w.Close(); err != nil {
		return manifest.File{}, err
	}
	if kind != "compacted" {
		s.next += rows
	}
	s.n++
	path := fmt.Sprintf("public/t/g0001/%s/%d/part-00000.parquet", kind, s.n)
	if err := s.store.Put(ctx, path, bytes.NewReader(buf.Bytes())); err != nil {
		return manifest.File{}, err
	}
	return manifest.File{Path: path, Rows: int64(rows), Bytes: int64(buf.Len())}, nil
}

func (s *benchSink) commit(ctx context.Context, fn func(m *manifest.Manifest, mt *manifest.Table)) (*manifest.Manifest, error) {
	s.now = s.now.Add(time.Second)
	return s.mc.Commit(ctx, func(m *manifest.Manifest) error {
		fn(m, m.Tables["public.t"])
		m.Epoch++
		m.EndLSN = cdc.LSN(s.next)
		m.AppendHistory(manifest.EpochRecord{Epoch: m.Epoch, EndLSN: m.EndLSN, MaxCommitTime: s.now, FlushedAt: s.now})
		return nil
	})
}

func (s *benchSink) delta(ctx context.Context, rows int) (*manifest.Manifest, error) {
	f, err := s.write(ctx, "delta", rows)
	if err != nil {
		return nil, err
	}
	return s.commit(ctx, func(m *manifest.Manifest, mt *manifest.Table) {
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: m.Epoch + 1, SchemaVersion: 1, Rows: f.Rows, Files: []manifest.File{f}})
	})
}

// compact folds every delta into a new base of all rows; the files it
// replaces are retired.
func (s *benchSink) compact(ctx context.Context) (*manifest.Manifest, error) {
	f, err := s.write(ctx, "compacted", 0)
	if err != nil {
		return nil, err
	}
	return s.commit(ctx, func(m *manifest.Manifest, mt *manifest.Table) {
		at := s.now
		for _, g := range catalog.ChangeFiles(mt) {
			m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: g.Path, RetiredAt: s.now})
		}
		if mt.Base != nil && mt.Base.CompactedAt != nil {
			for _, g := range mt.Base.Files {
				m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: g.Path, RetiredAt: s.now})
			}
		}
		mt.Base = &manifest.Base{Epoch: m.Epoch, MaxLSN: cdc.LSN(s.next), RowCount: f.Rows, Files: []manifest.File{f},
			CompactedAt: &at, SortedBy: []string{"id", "__lsn", "__seq"}}
		mt.Deltas = nil
	})
}

func (r *report) renderCatalog(p func(string, ...any)) {
	c := r.catalog
	if c == nil {
		return
	}
	m := r.machine
	p("## Catalog publisher (issue 17)\n\n")
	p("Measured %s on %d CPUs (load average %s at the section's start, %s at its end). Reproduce: `make bench BENCH_FLAGS=\"--only catalog --out /tmp/catalog.md\"` (`--catalog-rows`, `--catalog-versions`, `--reps`).\n\n",
		r.started.UTC().Format("2006-01-02 15:04 UTC"), m.nproc, c.loadStart, c.loadEnd)
	dr := ratios(c.on, c.off)
	p("**The stream with the publisher beside it.** One backlog of %s inserts (%s-row transactions) drained by `pg-cdc start` until durable in the manifest, with `catalog.type: none` and with `catalog.type: iceberg` (the embedded SQL catalog, publishing every committed version beside the stream: `commit_interval: 0s`, the publisher's heaviest setting), alternating, %d repetitions each: %s rows/s without, %s rows/s with the publisher; **ratio %s** (goal ≥ 0.95×: %s).\n\n",
		count(c.rows), count(r.opts.txnRows), len(c.on), bench.Summarize(c.off).Range(f0), bench.Summarize(c.on).Range(f0), dr.Range(ratio), yes(dr.Median >= 0.95))
	p("**The publisher alone**, in process, as `pg-cdc start` runs it: %d manifest versions of a filesystem sink (each one delta file of 1,000 rows; a compaction every 60th version, which replaces the state table's files), published to the embedded SQL catalog back to back, with `snapshot_max_age` %s (Iceberg expires by the wall clock) and `snapshot_min_keep` 10. The time of a publication grows with the snapshots a table retains (each commit rewrites the metadata file that lists them all): at a flush a second, `snapshot_max_age` decides how large that file gets.\n\n", c.versions, catalogMaxAge)
	p("| | time per version |\n| --- | --- |\n")
	p("| a flush (one file added to the changelog) | median %.1f ms (%.1f–%.1f), p99 %.1f ms, max %.1f ms |\n", c.publish.Median*1000, c.publish.Min*1000, c.publish.Max*1000, c.p99*1000, c.max*1000)
	p("| a compaction (state table replaced, changelog unchanged) | median %.1f ms (%.1f–%.1f), %d of them |\n\n", c.compact.Median*1000, c.compact.Min*1000, c.compact.Max*1000, c.compact.N)
	p("After the %d versions: `_pgcdc/iceberg/` holds %s in %d files (%s half-way), the changelog's current metadata file is %s, the SQLite catalog %s; the changelog retains %d snapshots. ", c.versions, bytesIEC(c.metaBytes), c.metaFiles, bytesIEC(c.atHalf), bytesIEC(c.metaJSON), bytesIEC(c.catalogDB), c.snapshots)
	p("Expiry bounds the snapshots (and so the current metadata file); only the 20 newest metadata files are kept; manifests are merged (`commit.manifest-merge.enabled`), but the manifests and manifest lists of expired snapshots stay on disk, so the directory grows with the versions published.\n\n")
}
