// Package iceberg adapts github.com/apache/iceberg-go to the publisher's
// port (catalog.Catalog): any of its catalogs (the embedded SQL catalog on
// SQLite, REST, Glue), tables whose data files are the sink's own files,
// addressed under the warehouse, the sink's root (file://, s3:// or gs://:
// Warehouse). The Iceberg metadata (metadata JSON, manifest lists,
// manifests) and the state tables' position delete files live under the
// sink's _pgcdc/iceberg/ prefix, which pg-cdc's garbage collection never
// touches (expiry deletes them: expire.go). iceberg-go's IO writes and
// reads the metadata, with the sink's endpoint and credentials; pg-cdc
// writes the position delete files through the sink's own store.
package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
	_ "modernc.org/sqlite" // the SQL catalog's driver: pure Go

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// MetadataPrefix is where the tables' Iceberg metadata lives in the sink.
const MetadataPrefix = "_pgcdc/iceberg"

// Adapter is an Iceberg catalog as the publisher's port.
type Adapter struct {
	cat icecat.Catalog
	// warehouse is the sink's root as a location ("file:///srv/sink",
	// "s3://bucket/prefix"), without a trailing slash.
	warehouse string
	// store is the sink, which position delete files are written to
	// (nil: a filesystem warehouse's, opened at its first use).
	store     blob.Store
	storeOnce sync.Once
	storeErr  error

	// held caches what each table's current snapshot holds, by table and
	// snapshot id: the publisher loads every table at every version, and
	// reading a snapshot's manifests grows with its files. A snapshot never
	// changes, so a new one (by any writer) is read afresh.
	mu   sync.Mutex
	held map[string]heldFiles
	// manifests caches the file paths each Iceberg manifest names, by its
	// path (manifestPaths): a manifest is never rewritten.
	manifests map[string][]string
	// lists caches the manifests each manifest list names, by its path
	// (listed): a manifest list is never rewritten either.
	lists map[string][]unique.Handle[string]
	// retry holds, by table, the files an expiry failed to delete (its
	// metadata files, its position delete files), which its next expiry
	// deletes again (expire.go).
	retry map[string][]string
	// swept is when each table's metadata and deletes directories were
	// last swept.
	swept map[string]time.Time
	now   func() time.Time
	// noTxn: the catalog turned out to have no multi-table transactions
	// (CommitTables).
	noTxn atomic.Bool
}

// heldFiles are the data files of one snapshot of a table.
type heldFiles struct {
	snapshot int64
	files    map[string]bool
}

// New adapts cat, whose tables' files are under the location warehouse;
// position delete files are written there through a filesystem store, so
// an object store's warehouse needs NewIn.
func New(cat icecat.Catalog, warehouse string) *Adapter {
	return NewIn(cat, Warehouse{Location: warehouse})
}

// NewIn adapts cat, whose tables' files are in the warehouse wh.
func NewIn(cat icecat.Catalog, wh Warehouse) *Adapter {
	return &Adapter{cat: cat, warehouse: strings.TrimSuffix(wh.Location, "/"), store: wh.Store, held: map[string]heldFiles{}, manifests: map[string][]string{},
		lists: map[string][]unique.Handle[string]{}, retry: map[string][]string{}, swept: map[string]time.Time{}, now: time.Now}
}

// sink is the store the warehouse is: the one given, or a filesystem
// warehouse's own.
func (a *Adapter) sink() (blob.Store, error) {
	a.storeOnce.Do(func() {
		if a.store != nil {
			return
		}
		root, ok := strings.CutPrefix(a.warehouse, "file://")
		if !ok {
			a.storeErr = fmt.Errorf("iceberg warehouse %s: no store to write it with", a.warehouse)
			return
		}
		a.store, a.storeErr = fs.New(filepath.FromSlash(root))
	})
	return a.store, a.storeErr
}

// Location is a sink key's location in the warehouse.
func (a *Adapter) Location(key string) string { return a.warehouse + "/" + key }

// key is the sink key of a location, or "" when it is outside the
// warehouse.
func (a *Adapter) key(location string) string {
	k, ok := strings.CutPrefix(location, a.warehouse+"/")
	if !ok {
		return ""
	}
	return k
}

func ident(id catalog.Ident) table.Identifier {
	return append(append(table.Identifier{}, id.Namespace...), id.Name)
}

// tableLocation is where a table's metadata goes: one directory per
// namespace level and name, each escaped as sink keys escape identifiers.
func (a *Adapter) tableLocation(id catalog.Ident) string {
	parts := []string{MetadataPrefix}
	for _, p := range append(append([]string{}, id.Namespace...), id.Name) {
		parts = append(parts, manifest.EscapeKeyElement(p))
	}
	return a.Location(strings.Join(parts, "/"))
}

// Load returns what the table holds: its current snapshot's files and the
// manifest version its summary records. Published.Files is shared with the
// adapter's cache: the caller only reads it.
func (a *Adapter) Load(ctx context.Context, id catalog.Ident) (catalog.Published, bool, error) {
	tbl, err := a.cat.LoadTable(ctx, ident(id))
	if errors.Is(err, icecat.ErrNoSuchTable) {
		return catalog.Published{}, false, nil
	}
	if err != nil {
		return catalog.Published{}, false, err
	}
	pub := catalog.Published{Files: map[string]bool{}}
	pub.SchemaID, _ = strconv.Atoi(tbl.Properties()[catalog.PropertySchemaVersion])
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return pub, true, nil
	}
	if snap.Summary != nil {
		pub.ManifestVersion = catalog.VersionOf(snap.Summary.Properties)
	}
	a.mu.Lock()
	h, ok := a.held[id.String()]
	a.mu.Unlock()
	if ok && h.snapshot == snap.SnapshotID {
		pub.Files = h.files
		return pub, true, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return catalog.Published{}, false, err
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		return catalog.Published{}, false, fmt.Errorf("%s: manifests of snapshot %d: %w", id, snap.SnapshotID, err)
	}
	for _, mf := range mfs {
		if mf.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		paths, err := a.manifestPaths(fs, mf)
		if err != nil {
			return catalog.Published{}, false, fmt.Errorf("%s: %w", id, err)
		}
		for _, path := range paths {
			k := a.key(path)
			if k == "" {
				return catalog.Published{}, false, fmt.Errorf("%s: data file %s is outside the warehouse %s", id, path, a.warehouse)
			}
			pub.Files[k] = true
		}
	}
	a.mu.Lock()
	a.held[id.String()] = heldFiles{snapshot: snap.SnapshotID, files: pub.Files}
	a.mu.Unlock()
	return pub, true, nil
}

// load loads a table and, when s is set, first makes s its exact current
// schema (and loads it again).
func (a *Adapter) load(ctx context.Context, id catalog.Ident, s *icebergschema.Schema) (*table.Table, error) {
	tbl, err := a.cat.LoadTable(ctx, ident(id))
	if err == nil && tbl.Properties()[table.MetadataDeleteAfterCommitEnabledKey] != "true" {
		// A table created before the metadata bound: it adopts it once.
		if _, _, err = a.cat.CommitTable(ctx, tbl.Identifier(), nil, []table.Update{table.NewSetPropertiesUpdate(metadataBound)}); err == nil {
			tbl, err = a.cat.LoadTable(ctx, ident(id))
		}
	}
	if err != nil || s == nil {
		return tbl, err
	}
	sc, err := schema(*s)
	if err != nil {
		return nil, err
	}
	if err := a.setSchema(ctx, tbl, sc); err != nil {
		return nil, err
	}
	return a.cat.LoadTable(ctx, ident(id))
}

// schema is pg-cdc's schema as iceberg-go's.
func schema(s icebergschema.Schema) (*iceberg.Schema, error) {
	var out iceberg.Schema
	if err := json.Unmarshal(s.JSON(), &out); err != nil {
		return nil, fmt.Errorf("iceberg schema %d: %w", s.SchemaID, err)
	}
	return &out, nil
}

// metadataBound are the table properties that bound its metadata files:
// every commit writes a new metadata JSON, and without them a table
// published at one flush a second keeps 86,400 of them a day. iceberg-go
// deletes the metadata files beyond the newest 20 after each commit (the
// metadata log names those 20; readers of a table always start from the
// current one). Manifest lists and manifests are bounded by expiry, which
// deletes those only expired snapshots named (Expire): not iceberg-go's
// own post-commit deletion, which would delete pg-cdc's data files too.
var metadataBound = iceberg.Properties{
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MetadataPreviousVersionsMaxKey:      "20",
	table.ManifestMergeEnabledKey:             "true",
}

// Create makes the table (and each level of its namespace) and pushes the
// exact schema: CreateTable assigns fresh field ids, so the schema it
// holds is replaced by pg-cdc's, ids included, at once.
func (a *Adapter) Create(ctx context.Context, id catalog.Ident, s icebergschema.Schema, props map[string]string) error {
	for i := range id.Namespace {
		ns := table.Identifier(id.Namespace[:i+1])
		exists, err := a.cat.CheckNamespaceExists(ctx, ns)
		if err != nil {
			return fmt.Errorf("namespace %s: %w", strings.Join(ns, "."), err)
		}
		if exists {
			continue
		}
		if err := a.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, icecat.ErrNamespaceAlreadyExists) {
			return fmt.Errorf("create namespace %s: %w", strings.Join(ns, "."), err)
		}
	}
	sc, err := schema(s)
	if err != nil {
		return err
	}
	p := iceberg.Properties{"format-version": "2"}
	maps.Copy(p, metadataBound)
	for k, v := range props {
		p[k] = v
	}
	tbl, err := a.cat.CreateTable(ctx, ident(id), sc, icecat.WithLocation(a.tableLocation(id)), icecat.WithProperties(p))
	if err != nil {
		return err
	}
	return a.setSchema(ctx, tbl, sc)
}

// setSchema makes sc, exactly, tbl's current schema, and records its
// pg-cdc schema version in the table property catalog.PropertySchemaVersion
// (the catalog may number its schemas otherwise).
func (a *Adapter) setSchema(ctx context.Context, tbl *table.Table, sc *iceberg.Schema) error {
	cur := tbl.Schema()
	version := strconv.Itoa(sc.ID)
	if cur.Equals(sc) && tbl.Properties()[catalog.PropertySchemaVersion] == version {
		return nil
	}
	_, _, err := a.cat.CommitTable(ctx, tbl.Identifier(),
		[]table.Requirement{table.AssertCurrentSchemaID(cur.ID)},
		[]table.Update{table.NewAddSchemaUpdate(sc), table.NewSetCurrentSchemaUpdate(-1),
			table.NewSetPropertiesUpdate(iceberg.Properties{catalog.PropertySchemaVersion: version})})
	if err != nil {
		return fmt.Errorf("set schema version %d: %w", sc.ID, err)
	}
	return nil
}

// Commit applies c: the schema, then one snapshot adding and removing the
// files, its summary c.Summary.
func (a *Adapter) Commit(ctx context.Context, c catalog.Commit) error {
	tx, err := a.stageCommit(ctx, c)
	if err != nil || tx == nil {
		return err
	}
	_, err = tx.Commit(ctx)
	return err
}

// stageCommit pushes c's schema (a commit of its own), then stages c's
// files as one snapshot in a transaction on the table, uncommitted (nil
// when c has no files).
func (a *Adapter) stageCommit(ctx context.Context, c catalog.Commit) (*table.Transaction, error) {
	tbl, err := a.load(ctx, c.Ident, c.Schema)
	if err != nil {
		return nil, err
	}
	if len(c.Add) == 0 && len(c.Remove) == 0 {
		return nil, nil
	}
	add := make([]string, len(c.Add))
	for i, f := range c.Add {
		add[i] = a.Location(f.Path)
	}
	remove := make([]string, len(c.Remove))
	for i, k := range c.Remove {
		remove[i] = a.Location(k)
	}
	tx := tbl.NewTransaction()
	props := iceberg.Properties(c.Summary)
	bare, err := a.bareFiles(ctx, tbl, c.Add)
	switch {
	case err != nil:
		return nil, err
	case bare != nil:
		err = a.commitBare(ctx, tx, tbl, bare, remove, props)
	case len(remove) == 0:
		err = tx.AddFiles(ctx, add, props, false)
	default:
		err = tx.ReplaceDataFiles(ctx, remove, add, props)
	}
	if err != nil {
		return nil, err
	}
	return tx, nil
}

// bareFiles are files as Iceberg data files with their row count and size
// only, when one of them holds a column tbl's current schema lacks (nil
// otherwise): a file written before a DROP COLUMN and published after it
// (the publisher was behind, or the file was folded first). iceberg-go
// registers a file from its footer's column statistics, and refuses a
// field id the schema lacks; such a commit goes without statistics (a
// reader prunes none of its files, and reads them all correctly, the
// dropped column unprojected). The footers are read through the table's
// IO, as iceberg-go reads them, whatever the store.
func (a *Adapter) bareFiles(ctx context.Context, tbl *table.Table, files []manifest.File) ([]iceberg.DataFile, error) {
	fio, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	known := map[int]bool{}
	for _, f := range tbl.Schema().Fields() {
		known[f.ID] = true
	}
	type footer struct {
		rows, size int64
	}
	footers := make([]footer, len(files))
	lacking := false
	for i, mf := range files {
		f, err := fio.Open(a.Location(mf.Path))
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", mf.Path, err)
		}
		st, err := f.Stat()
		if err == nil {
			var pf *parquet.File
			if pf, err = parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true)); err == nil {
				footers[i] = footer{pf.NumRows(), st.Size()}
				for _, fld := range pf.Schema().Fields() {
					lacking = lacking || !known[fld.ID()]
				}
			}
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", mf.Path, err)
		}
	}
	if !lacking {
		return nil, nil
	}
	out := make([]iceberg.DataFile, len(files))
	for i, mf := range files {
		b, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, a.Location(mf.Path), iceberg.ParquetFile, nil, nil, nil, footers[i].rows, footers[i].size)
		if err != nil {
			return nil, err
		}
		out[i] = b.Build()
	}
	return out, nil
}

// commitBare adds files (bareFiles) and removes the data files at remove,
// as one snapshot.
func (a *Adapter) commitBare(ctx context.Context, tx *table.Transaction, tbl *table.Table, files []iceberg.DataFile, remove []string, props iceberg.Properties) error {
	if len(remove) == 0 {
		return tx.NewRowDelta(props).AddRows(files...).Commit(ctx)
	}
	data, _, err := a.entries(ctx, tbl)
	if err != nil {
		return err
	}
	gone := make(map[string]bool, len(remove))
	for _, r := range remove {
		gone[r] = true
	}
	var old []iceberg.DataFile
	for _, d := range data {
		if gone[d.FilePath()] {
			old = append(old, d)
		}
	}
	return tx.ReplaceFiles(ctx, old, files, nil, props)
}

// MetadataLocation is the table's current metadata file, for readers that
// take a path.
func (a *Adapter) MetadataLocation(ctx context.Context, id catalog.Ident) (string, error) {
	tbl, err := a.cat.LoadTable(ctx, ident(id))
	if err != nil {
		return "", err
	}
	return tbl.MetadataLocation(), nil
}

// OpenSQL opens the embedded SQL catalog on the SQLite file path (made when
// missing) over the warehouse wh, and returns the adapter and the function
// that closes the catalog. props are iceberg-go's IO properties set by hand
// (s3.*, gcs.*), over wh's. Several processes may share the file (start and
// pg-cdc catalog sync): SQLite serialises their writes, waiting up to 10 s
// for the lock. The catalog is local whatever the sink: the tables'
// metadata is in the sink.
func OpenSQL(path string, wh Warehouse, props map[string]string) (*Adapter, func() error, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("iceberg catalog %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg catalog %s: %w", path, err)
	}
	cprops := iceberg.Properties(wh.withIO(props))
	cprops["warehouse"] = wh.Location
	cat, err := sqlcat.NewCatalog("pgcdc", db, sqlcat.SQLite, cprops)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("iceberg catalog %s: %w", path, err)
	}
	return NewIn(cat, wh), db.Close, nil
}

// posDelete is one row of an Iceberg position delete file: the spec's
// reserved field ids.
type posDelete struct {
	FilePath string `parquet:"file_path,id(2147483546)"`
	Pos      int64  `parquet:"pos,id(2147483545)"`
}

// ReplaceState makes a state table hold exactly c.Files, with a position
// delete file hiding c.Masked's rows, in one commit: the old data and
// delete files are replaced by the new data files (one snapshot), then the
// position deletes are added (a second), both landing at once.
func (a *Adapter) ReplaceState(ctx context.Context, c catalog.StateCommit) error {
	tx, err := a.stageState(ctx, c)
	if err != nil || tx == nil {
		return err
	}
	_, err = tx.Commit(ctx)
	return err
}

// stageState pushes c's schema (a commit of its own), writes the position
// delete file, and stages the replacement in a transaction on the table,
// uncommitted (nil when the table holds c's files already).
func (a *Adapter) stageState(ctx context.Context, c catalog.StateCommit) (*table.Transaction, error) {
	tbl, err := a.load(ctx, c.Ident, c.Schema)
	if err != nil {
		return nil, err
	}
	oldData, oldDeletes, err := a.entries(ctx, tbl)
	if err != nil {
		return nil, err
	}
	if samePaths(oldData, c.Files, a) {
		return nil, nil // the same base (a new schema only, pushed above): its tombstones are masked already
	}
	spec := tbl.Spec()
	var add []iceberg.DataFile
	for _, f := range c.Files {
		b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, a.Location(f.Path), iceberg.ParquetFile, nil, nil, nil, f.Rows, f.Bytes)
		if err != nil {
			return nil, err
		}
		add = append(add, b.Build())
	}
	var deletes []iceberg.DataFile
	if len(c.Masked) > 0 {
		df, err := a.writePositionDeletes(ctx, c)
		if err != nil {
			return nil, err
		}
		deletes = append(deletes, df)
	}
	props := iceberg.Properties(c.Summary)
	tx := tbl.NewTransaction()
	if len(oldData)+len(oldDeletes) == 0 {
		if err := tx.NewRowDelta(props).AddRows(add...).AddDeletes(deletes...).Commit(ctx); err != nil {
			return nil, err
		}
	} else {
		if err := tx.ReplaceFiles(ctx, oldData, add, oldDeletes, props); err != nil {
			return nil, err
		}
		if len(deletes) > 0 {
			if err := tx.NewRowDelta(props).AddDeletes(deletes...).Commit(ctx); err != nil {
				return nil, err
			}
		}
	}
	return tx, nil
}

// CommitTables applies c and s as one commit through the catalog's
// multi-table transaction (iceberg-go's catalog.TransactionalCatalog: the
// REST catalog, when its server advertises POST
// /v1/{prefix}/transactions/commit): both tables' snapshots land, or
// neither. Their schemas, when they change, are pushed first, each in a
// commit of its own: a schema alone changes no snapshot, so no reader sees
// one table's version without the other's. Without transactions it
// returns catalog.ErrNoTransactions having committed nothing, and says so
// at once afterwards. A failed transaction is not replayed here (a 5xx may
// have applied it): the publisher plans both tables again.
func (a *Adapter) CommitTables(ctx context.Context, c catalog.Commit, s catalog.StateCommit) error {
	tc, ok := a.cat.(icecat.TransactionalCatalog)
	if !ok || a.noTxn.Load() {
		return fmt.Errorf("iceberg catalog %s: %w", a.cat.CatalogType(), catalog.ErrNoTransactions)
	}
	clTx, err := a.stageCommit(ctx, c)
	if err != nil {
		return err
	}
	stTx, err := a.stageState(ctx, s)
	if err != nil {
		return err
	}
	var txs []*table.Transaction
	for _, tx := range []*table.Transaction{clTx, stTx} {
		if tx != nil {
			txs = append(txs, tx)
		}
	}
	switch len(txs) {
	case 0:
		return nil
	case 1:
		_, err := txs[0].Commit(ctx)
		return err
	}
	commits := make([]table.TableCommit, len(txs))
	for i, tx := range txs {
		if commits[i], err = tx.TableCommit(); err != nil {
			return err
		}
	}
	err = tc.CommitTransaction(ctx, commits)
	if errors.Is(err, rest.ErrEndpointNotSupported) {
		// Checked by the client before any request: nothing was sent.
		// The position delete file staged is named by no snapshot; the
		// hourly sweep deletes it.
		a.noTxn.Store(true)
		return fmt.Errorf("iceberg REST catalog: %w: %w", catalog.ErrNoTransactions, err)
	}
	if err != nil {
		return err
	}
	for _, tx := range txs {
		tx.MarkCommitted()
	}
	return nil
}

// samePaths reports whether data are exactly files' locations.
func samePaths(data []iceberg.DataFile, files []manifest.File, a *Adapter) bool {
	if len(data) != len(files) {
		return false
	}
	have := make(map[string]bool, len(data))
	for _, d := range data {
		have[d.FilePath()] = true
	}
	for _, f := range files {
		if !have[a.Location(f.Path)] {
			return false
		}
	}
	return true
}

// Referenced returns the sink keys that any snapshot the table retains
// names (data and delete files), for pg-cdc's garbage collection to keep:
// an expired snapshot's files are pg-cdc's to delete, a retained one's are
// not, whatever their age (an idle table's snapshots, those
// snapshot_min_keep keeps). A table that does not exist names none.
func (a *Adapter) Referenced(ctx context.Context, id catalog.Ident) (map[string]bool, error) {
	tbl, err := a.cat.LoadTable(ctx, ident(id))
	if errors.Is(err, icecat.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	read := map[string]bool{}
	for _, snap := range tbl.Metadata().Snapshots() {
		mfs, err := snap.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("%s: manifests of snapshot %d: %w", id, snap.SnapshotID, err)
		}
		for _, mf := range mfs {
			path := mf.FilePath()
			if read[path] {
				continue
			}
			read[path] = true
			paths, err := a.manifestPaths(fs, mf)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			for _, p := range paths {
				if k := a.key(p); k != "" {
					out[k] = true
				}
			}
		}
	}
	return out, nil
}

// manifestPaths are the file paths of mf's live entries, read once per
// manifest: a manifest is never rewritten, and a table's every snapshot
// lists all its manifests, so reading them afresh at each version grows
// with the table's history (the publisher loads every table at every
// version).
func (a *Adapter) manifestPaths(fs icebergio.IO, mf iceberg.ManifestFile) ([]string, error) {
	a.mu.Lock()
	paths, ok := a.manifests[mf.FilePath()]
	a.mu.Unlock()
	if ok {
		return paths, nil
	}
	entries, err := mf.FetchEntries(fs, true)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
	}
	paths = make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.DataFile().FilePath()
	}
	a.mu.Lock()
	a.manifests[mf.FilePath()] = paths
	a.mu.Unlock()
	return paths, nil
}

// entries are the data and delete files of tbl's current snapshot.
func (a *Adapter) entries(ctx context.Context, tbl *table.Table) (data, deletes []iceberg.DataFile, err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		return nil, nil, fmt.Errorf("manifests of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, mf := range mfs {
		entries, err := mf.FetchEntries(fs, true)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
		}
		for _, e := range entries {
			if mf.ManifestContent() == iceberg.ManifestContentData {
				data = append(data, e.DataFile())
			} else {
				deletes = append(deletes, e.DataFile())
			}
		}
	}
	return data, deletes, nil
}

// deletesSubdir is the directory of a state table's location that
// writePositionDeletes writes its position delete files in, and expiry
// deletes those no retained snapshot names from (expire.go).
const deletesSubdir = "deletes"

// writePositionDeletes writes c.Masked as one position delete file,
// <version>-<time>.parquet in the table's deletes directory (sorted by
// file and position, as the spec asks), through the sink's store, and
// returns its entry.
func (a *Adapter) writePositionDeletes(ctx context.Context, c catalog.StateCommit) (iceberg.DataFile, error) {
	var rows []posDelete
	for _, path := range slices.Sorted(maps.Keys(c.Masked)) {
		for _, p := range c.Masked[path] {
			rows = append(rows, posDelete{FilePath: a.Location(path), Pos: p})
		}
	}
	slices.SortFunc(rows, func(x, y posDelete) int {
		if x.FilePath != y.FilePath {
			return strings.Compare(x.FilePath, y.FilePath)
		}
		return cmp.Compare(x.Pos, y.Pos)
	})
	loc := a.tableLocation(c.Ident) + "/" + deletesSubdir + "/" + c.Summary[catalog.SummaryManifestVersion] + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ".parquet"
	store, err := a.sink()
	if err != nil {
		return nil, fmt.Errorf("position deletes: %w", err)
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[posDelete](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("position deletes: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("position deletes: %w", err)
	}
	size := int64(buf.Len())
	if err := putBytes(ctx, store, a.key(loc), buf.Bytes()); err != nil {
		return nil, fmt.Errorf("position deletes: %w", err)
	}
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes, loc, iceberg.ParquetFile, nil, nil, nil, int64(len(rows)), size)
	if err != nil {
		return nil, err
	}
	return b.Build(), nil
}

var (
	_ catalog.Transactional = (*Adapter)(nil)
	_ catalog.Transactional = (*Lazy)(nil)
)
