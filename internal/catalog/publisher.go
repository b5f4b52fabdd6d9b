package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Catalog is an Iceberg catalog as the publisher uses it. Paths in it are
// sink keys; the adapter turns them into the warehouse's locations.
type Catalog interface {
	// Load returns what the table holds; found is false when it does not
	// exist.
	Load(ctx context.Context, id Ident) (pub Published, found bool, err error)
	// Create makes the table, and its namespace when missing, with exactly
	// schema (its field ids too) and props, holding no snapshot.
	Create(ctx context.Context, id Ident, schema icebergschema.Schema, props map[string]string) error
	// Commit applies c as one Iceberg commit.
	Commit(ctx context.Context, c Commit) error
	// ReplaceState makes a state table hold exactly c.Files, c.Masked's
	// rows hidden, in one atomic commit.
	ReplaceState(ctx context.Context, c StateCommit) error
	// Expire removes the snapshots older than maxAge, keeping at least
	// the keep newest, and deletes the Iceberg metadata files (manifest
	// lists, manifests) only the removed snapshots named, never a data
	// file: it returns how many it deleted. An error may come after the
	// expiry committed; the next expiry deletes what this one left.
	Expire(ctx context.Context, id Ident, maxAge time.Duration, keep int) (deleted int, err error)
	// MetadataLocation is the table's current metadata file, for readers
	// that take a path.
	MetadataLocation(ctx context.Context, id Ident) (string, error)
}

// Transactional is a Catalog that can commit a captured table's changelog
// and state table as one atomic multi-table commit (catalog/iceberg's
// Adapter over a REST catalog that advertises POST
// /v1/{prefix}/transactions/commit): the publisher then commits both
// tables of one manifest version at once, and a reader never sees one
// advanced without the other.
type Transactional interface {
	// CommitTables applies c (as Commit does) and s (as ReplaceState
	// does) as one commit: both tables advance, or neither. It returns
	// an error wrapping ErrNoTransactions, having committed nothing,
	// when the catalog has no multi-table commits; the publisher then
	// commits one table at a time.
	CommitTables(ctx context.Context, c Commit, s StateCommit) error
}

// ErrNoTransactions: the catalog cannot commit several tables as one.
var ErrNoTransactions = errors.New("the catalog has no multi-table transactions")

// Referencer is a Catalog that says which sink keys the snapshots a table
// retains name (catalog/iceberg's Adapter): Publisher.Referenced.
type Referencer interface {
	Referenced(ctx context.Context, id Ident) (map[string]bool, error)
}

// Observer is told what the publisher did (internal/metrics implements it).
type Observer interface {
	// Published: table's Iceberg tables hold manifest version version,
	// whose newest commit is lag old; committed says whether it took a
	// commit (a version that changed none of its files takes none).
	Published(table string, version uint64, lag time.Duration, committed bool)
	Failed(table string)
	// Behind is how far the catalog is behind the newest version after
	// an attempt: versions not yet published, and the age of the newest
	// commit the catalog holds.
	Behind(versions uint64, age time.Duration)
}

// SetObserver sets the instruments the publisher updates; call it before
// Follow or Publish.
func (p *Publisher) SetObserver(o Observer) { p.o.Observer = o }

// Options configure a Publisher.
type Options struct {
	Catalog Catalog
	// Prefix is the namespace's first level (DefaultPrefix when empty).
	Prefix string
	// Retention is history.retention: how long the changelog keeps a
	// retired file.
	Retention time.Duration
	// SnapshotMaxAge and SnapshotMinKeep expire the Iceberg snapshots
	// (0: Retention and 1).
	SnapshotMaxAge  time.Duration
	SnapshotMinKeep int
	// Positions reads the positions of a data file's rows whose __op is D
	// (parquetfile.OpPositions over the sink): a compacted base's
	// tombstones, which the state table masks.
	Positions func(ctx context.Context, key string) ([]int64, error)
	// CommitInterval is catalog.iceberg.commit_interval: Follow publishes
	// at most once per interval, always the newest version, so the
	// versions committed within one interval become one Iceberg snapshot
	// (0: every version as it lands).
	CommitInterval time.Duration
	// History reads the manifest versions a changelog that fell behind
	// across a major compaction needs (folded): the sink's history log.
	History *manifest.History
	// After is the timer Follow waits the commit interval on (nil:
	// time.After).
	After    func(time.Duration) <-chan time.Time
	Observer Observer
	Now      func() time.Time
	Log      *slog.Logger
}

// Publisher publishes manifest versions to a catalog. It is safe for
// concurrent use; Publish calls are serialised.
type Publisher struct {
	o  Options
	mu sync.Mutex // one publication at a time

	smu    sync.Mutex
	status Status

	// walks is each table's last history walk (folded): versions never
	// change, so the same range gives the same files. A changelog a
	// major compaction left with nothing to commit (every file it folded
	// was published) keeps its version, and asks for the same range at
	// every publication until its table changes.
	wmu   sync.Mutex
	walks map[string]walk
}

// walk is what folded found for a table between two versions.
type walk struct {
	from, to uint64
	files    []manifest.RetiredFile
}

// Status is what the publisher last did.
type Status struct {
	// Version is the newest manifest version every table was published
	// at, and At when that happened.
	Version uint64
	At      time.Time
	// Tables lists each Iceberg table's state at the last attempt.
	Tables []TableStatus
	// Err is the last attempt's failure, if any.
	Err string
}

// TableStatus is one Iceberg table as the last publication left it.
type TableStatus struct {
	Table     string `json:"table"` // schema.name
	Kind      Kind   `json:"kind"`
	Iceberg   string `json:"iceberg"` // its identifier
	Version   uint64 `json:"published_version"`
	Files     int    `json:"files"`
	Added     int    `json:"added"`
	Removed   int    `json:"removed"`
	Committed bool   `json:"committed"`
	// Drift is what a publication of the manifest version would still
	// change (Inspect): files to add and to remove, a schema to push.
	Drift *Drift `json:"drift,omitempty"`
	// Metadata is the table's current metadata location (Inspect).
	Metadata string `json:"metadata_location,omitempty"`
	Err      string `json:"error,omitempty"`
}

// Drift is what an Iceberg table lacks against a manifest version.
type Drift struct {
	Add    int  `json:"add"`
	Remove int  `json:"remove"`
	Schema bool `json:"schema"`
	// Missing: the table does not exist yet.
	Missing bool `json:"missing"`
}

// InSync reports whether the table holds the manifest version.
func (d *Drift) InSync() bool {
	return d != nil && !d.Missing && d.Add == 0 && d.Remove == 0 && !d.Schema
}

// Inspect compares every table's changelog with manifest version m, and
// changes nothing: what pg-cdc catalog status shows.
func (p *Publisher) Inspect(ctx context.Context, m *manifest.Manifest) ([]TableStatus, error) {
	var out []TableStatus
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		id := ChangelogIdent(p.o.Prefix, mt.Schema, mt.Name)
		ts := TableStatus{Table: key, Kind: KindChangelog, Iceberg: id.String()}
		pub, found, err := p.o.Catalog.Load(ctx, id)
		switch {
		case err != nil:
			err = fmt.Errorf("changelog of %s (%s): load: %w", key, id, err)
		case !found:
			ts.Drift = &Drift{Missing: true, Add: len(ChangeFiles(mt)), Schema: true}
		default:
			ts.Version, ts.Files = pub.ManifestVersion, len(pub.Files)
			ts.Drift, ts.Metadata, err = p.drift(ctx, id, key, m, pub)
		}
		if err != nil {
			ts.Err = err.Error()
			errs = append(errs, err)
		}
		out = append(out, ts)
		if len(StateFiles(mt)) > 0 {
			sts, err := p.inspectState(ctx, key, m)
			if err != nil {
				sts.Err = err.Error()
				errs = append(errs, err)
			}
			out = append(out, sts)
		}
	}
	return out, errors.Join(errs...)
}

// drift is what publishing m would change in a changelog holding pub, and
// its metadata location.
func (p *Publisher) drift(ctx context.Context, id Ident, key string, m *manifest.Manifest, pub Published) (*Drift, string, error) {
	folded, err := p.folded(ctx, key, m, pub)
	if err != nil {
		return nil, "", err
	}
	c, err := PlanChangelog(id, key, m, pub, p.o.Now(), p.o.Retention, folded)
	if err != nil {
		return nil, "", err
	}
	loc, err := p.o.Catalog.MetadataLocation(ctx, id)
	return &Drift{Add: len(c.Add), Remove: len(c.Remove), Schema: c.Schema != nil}, loc, err
}

// inspectState compares a state table with m's base (files and schema; a
// masked position is not read back).
func (p *Publisher) inspectState(ctx context.Context, key string, m *manifest.Manifest) (TableStatus, error) {
	mt := m.Tables[key]
	id := StateIdent(p.o.Prefix, mt.Schema, mt.Name)
	ts := TableStatus{Table: key, Kind: KindState, Iceberg: id.String()}
	pub, found, err := p.o.Catalog.Load(ctx, id)
	if err != nil {
		return ts, fmt.Errorf("state of %s (%s): load: %w", key, id, err)
	}
	if !found {
		ts.Drift = &Drift{Missing: true, Add: len(StateFiles(mt)), Schema: true}
		return ts, nil
	}
	ts.Version, ts.Files = pub.ManifestVersion, len(pub.Files)
	d := &Drift{Schema: pub.SchemaID != mt.SchemaVersion}
	want := map[string]bool{}
	for _, f := range StateFiles(mt) {
		want[f.Path] = true
		if !pub.Files[f.Path] {
			d.Add++
		}
	}
	for path := range pub.Files {
		if !want[path] {
			d.Remove++
		}
	}
	ts.Drift = d
	ts.Metadata, err = p.o.Catalog.MetadataLocation(ctx, id)
	return ts, err
}

// New returns a publisher.
func New(o Options) *Publisher {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.SnapshotMaxAge <= 0 {
		o.SnapshotMaxAge = o.Retention
	}
	if o.SnapshotMinKeep <= 0 {
		o.SnapshotMinKeep = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{o: o}
}

// Status returns what the publisher last did.
func (p *Publisher) Status() Status {
	p.smu.Lock()
	defer p.smu.Unlock()
	return p.status
}

// Publish brings every captured table's Iceberg tables to manifest version
// m. Tables are independent: one failing does not stop the others, and the
// error joins every failure, each naming its table.
func (p *Publisher) Publish(ctx context.Context, m *manifest.Manifest) (Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		tables, err := p.publishTable(ctx, key, m)
		if err != nil {
			errs = append(errs, err)
			if p.o.Observer != nil {
				p.o.Observer.Failed(key)
			}
		}
		for _, ts := range tables {
			if ts.Iceberg != "" {
				st.Tables = append(st.Tables, ts)
			}
		}
	}
	err := errors.Join(errs...)
	p.smu.Lock()
	defer p.smu.Unlock()
	if err == nil {
		st.Version, st.At = m.Version, p.o.Now()
	} else {
		st.Version, st.At, st.Err = p.status.Version, p.status.At, err.Error()
	}
	p.status = st
	return st, err
}

// publishTable publishes one captured table's changelog and state table
// (the order of effects in the package comment): both are planned, then
// committed, as one transaction when the catalog has them and both
// tables change (Transactional), else one after the other, each failing on
// its own. The statuses are the changelog's and the state table's (its
// Iceberg empty when the table has no base yet), each with its error.
func (p *Publisher) publishTable(ctx context.Context, key string, m *manifest.Manifest) ([2]TableStatus, error) {
	cts, cplan, cerr := p.planChangelog(ctx, key, m)
	sts, splan, serr := p.planStateTable(ctx, key, m)
	if tx, ok := p.o.Catalog.(Transactional); ok && cerr == nil && serr == nil && cplan.commit != nil && splan != nil {
		err := tx.CommitTables(ctx, *cplan.commit, *splan)
		if err == nil {
			p.changelogCommitted(ctx, key, m, &cts, cplan)
			p.stateCommitted(ctx, key, m, &sts, splan)
			return [2]TableStatus{cts, sts}, nil
		}
		if !errors.Is(err, ErrNoTransactions) {
			// Neither advanced: the next attempt plans both again and
			// retries the transaction whole.
			err = fmt.Errorf("changelog and state of %s (%s, %s): commit manifest version %d as one transaction: %w",
				key, cplan.commit.Ident, splan.Ident, m.Version, err)
			cts.Err, sts.Err = err.Error(), err.Error()
			return [2]TableStatus{cts, sts}, err
		}
	}
	if cerr == nil {
		cerr = p.commitChangelog(ctx, key, m, &cts, cplan)
	}
	if serr == nil {
		serr = p.commitState(ctx, key, m, &sts, splan)
	}
	if cerr != nil {
		cts.Err = cerr.Error()
	}
	if serr != nil {
		sts.Err = serr.Error()
	}
	return [2]TableStatus{cts, sts}, errors.Join(cerr, serr)
}

// changelogPlan is what publishing a changelog at a manifest version takes.
type changelogPlan struct {
	// commit is nil when there is nothing to commit.
	commit *Commit
	// observe: the version is the observer's to hear of (not when the
	// table held it already).
	observe bool
	now     time.Time
}

// planChangelog loads (or creates) table key's changelog and plans its
// commit to manifest version m.
func (p *Publisher) planChangelog(ctx context.Context, key string, m *manifest.Manifest) (TableStatus, changelogPlan, error) {
	mt := m.Tables[key]
	id := ChangelogIdent(p.o.Prefix, mt.Schema, mt.Name)
	ts := TableStatus{Table: key, Kind: KindChangelog, Iceberg: id.String()}
	pub, err := p.ensure(ctx, key, KindChangelog, id, mt, m)
	if err != nil {
		return ts, changelogPlan{}, err
	}
	ts.Version, ts.Files = pub.ManifestVersion, len(pub.Files)
	if pub.ManifestVersion >= m.Version {
		return ts, changelogPlan{}, nil // published already (by this process, another, or a commit whose answer was lost)
	}
	folded, err := p.folded(ctx, key, m, pub)
	if err != nil {
		return ts, changelogPlan{}, err
	}
	plan := changelogPlan{observe: true, now: p.o.Now()}
	c, err := PlanChangelog(id, key, m, pub, plan.now, p.o.Retention, folded)
	if err != nil {
		return ts, changelogPlan{}, err
	}
	if !c.Empty() {
		plan.commit = &c
	}
	return ts, plan, nil
}

// commitChangelog commits a changelog's plan on its own.
func (p *Publisher) commitChangelog(ctx context.Context, key string, m *manifest.Manifest, ts *TableStatus, plan changelogPlan) error {
	if c := plan.commit; c != nil {
		if err := p.o.Catalog.Commit(ctx, *c); err != nil {
			return fmt.Errorf("changelog of %s (%s): commit manifest version %d: %w", key, c.Ident, m.Version, err)
		}
	}
	p.changelogCommitted(ctx, key, m, ts, plan)
	return nil
}

// changelogCommitted records a changelog's plan as committed, then
// expires its snapshots.
func (p *Publisher) changelogCommitted(ctx context.Context, key string, m *manifest.Manifest, ts *TableStatus, plan changelogPlan) {
	if c := plan.commit; c != nil {
		ts.Committed, ts.Added, ts.Removed = true, len(c.Add), len(c.Remove)
		ts.Version, ts.Files = m.Version, ts.Files+len(c.Add)-len(c.Remove)
		p.o.Log.Debug("published", "table", key, "iceberg", c.Ident.String(), "version", m.Version, "added", len(c.Add), "removed", len(c.Remove))
		// The commit stands whatever the expiry does; the next one
		// expires again.
		p.expire(ctx, key, c.Ident)
	}
	if plan.observe && p.o.Observer != nil {
		p.o.Observer.Published(key, m.Version, plan.now.Sub(m.Freshness()), ts.Committed)
	}
}

// folded lists the change files that the major compactions of table key
// committed after pub's version folded, for the changelog to add those it
// lacks (PlanChangelog): m's folds name ranges of files, so the files are
// read from the history, walking the versions from pub's to the newest
// fold's and taking what the table held before each version that replaced
// its base. Nothing is walked while the changelog is up to date with the
// folds (a publisher keeping up walks a few versions a fold), or for a new
// changelog, which starts from the table's current files. Each table's
// last walk is remembered (walks). A walk the history cannot make (the
// versions are past its retention) is a warning and a failure counted
// once: those changes stay readable in pg-cdc's changes views, not in the
// changelog.
func (p *Publisher) folded(ctx context.Context, key string, m *manifest.Manifest, pub Published) ([]manifest.RetiredFile, error) {
	mt := m.Tables[key]
	if pub.ManifestVersion == 0 || mt == nil {
		return nil, nil
	}
	prefix := manifest.FoldPrefix(mt)
	var newest uint64
	for _, f := range m.Folds {
		if f.Prefix == prefix {
			newest = max(newest, f.Version)
		}
	}
	if newest <= pub.ManifestVersion {
		return nil, nil
	}
	if p.o.History == nil {
		return nil, fmt.Errorf("changelog of %s: manifest versions %d to %d folded files the changelog may lack, and the publisher has no history to read them from", key, pub.ManifestVersion, newest)
	}
	p.wmu.Lock()
	w, ok := p.walks[key]
	p.wmu.Unlock()
	if !ok || w.from != pub.ManifestVersion || w.to != newest {
		files, err := p.o.History.Folded(ctx, key, pub.ManifestVersion, newest)
		if errors.Is(err, manifest.ErrNotReadable) || errors.Is(err, manifest.ErrOutsideRetention) {
			// Published without them, counted as a failure so an alert
			// on the catalog's failures sees it, once: the walk is
			// remembered like any other.
			p.o.Log.Warn("changelog: the history no longer holds the versions whose compactions folded files the changelog lacks; their changes are not published",
				"table", key, "published_version", pub.ManifestVersion, "newest_fold_version", newest, "error", err)
			if p.o.Observer != nil {
				p.o.Observer.Failed(key)
			}
			files, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("changelog of %s: the files compactions folded after manifest version %d: %w", key, pub.ManifestVersion, err)
		}
		w = walk{from: pub.ManifestVersion, to: newest, files: files}
		p.wmu.Lock()
		if p.walks == nil {
			p.walks = map[string]walk{}
		}
		p.walks[key] = w
		p.wmu.Unlock()
	}
	out := slices.Clone(w.files)
	for i, f := range out {
		// Stamped as the fold holds them, so adding and removing agree.
		if at, ok := m.FoldedAt(f.Path); ok {
			out[i].RetiredAt = at
		}
	}
	return out, nil
}

// ensure loads the Iceberg table id, creating it with mt's schema when
// missing.
func (p *Publisher) ensure(ctx context.Context, key string, kind Kind, id Ident, mt *manifest.Table, m *manifest.Manifest) (Published, error) {
	pub, found, err := p.o.Catalog.Load(ctx, id)
	if err != nil {
		return Published{}, fmt.Errorf("%s of %s (%s): load: %w", kind, key, id, err)
	}
	if found {
		return pub, nil
	}
	sv := mt.CurrentSchema()
	if sv == nil {
		return Published{}, fmt.Errorf("%s of %s: no schema version %d in manifest version %d", kind, key, mt.SchemaVersion, m.Version)
	}
	schema, err := icebergschema.Of(sv.Version, sv.Columns)
	if err != nil {
		return Published{}, fmt.Errorf("%s of %s: %w", kind, key, err)
	}
	props := map[string]string{PropertyTable: key, PropertyKind: string(kind), PropertyPrimaryKey: strings.Join(mt.PrimaryKey, ",")}
	if err := p.o.Catalog.Create(ctx, id, schema, props); err != nil {
		return Published{}, fmt.Errorf("%s of %s (%s): create: %w", kind, key, id, err)
	}
	p.o.Log.Info("created an Iceberg table", "table", key, "kind", string(kind), "iceberg", id.String())
	return Published{Files: map[string]bool{}, SchemaID: schema.SchemaID}, nil
}

// planStateTable plans table key's state table as of its base: when the
// base's files (or the schema) differ from the state table's, all of it is
// replaced, the base's tombstones masked (copy-on-write at compaction).
// The commit is nil when there is nothing to do, the status empty when
// the table has no base yet.
func (p *Publisher) planStateTable(ctx context.Context, key string, m *manifest.Manifest) (TableStatus, *StateCommit, error) {
	mt := m.Tables[key]
	if len(StateFiles(mt)) == 0 {
		return TableStatus{}, nil, nil // no base yet: nothing to publish
	}
	id := StateIdent(p.o.Prefix, mt.Schema, mt.Name)
	ts := TableStatus{Table: key, Kind: KindState, Iceberg: id.String()}
	pub, err := p.ensure(ctx, key, KindState, id, mt, m)
	if err != nil {
		return ts, nil, err
	}
	ts.Version, ts.Files = pub.ManifestVersion, len(pub.Files)
	c, err := p.planState(ctx, id, key, m, pub)
	return ts, c, err
}

// commitState commits a state table's plan on its own.
func (p *Publisher) commitState(ctx context.Context, key string, m *manifest.Manifest, ts *TableStatus, c *StateCommit) error {
	if c == nil {
		return nil
	}
	if err := p.o.Catalog.ReplaceState(ctx, *c); err != nil {
		return fmt.Errorf("state of %s (%s): replace with manifest version %d's base: %w", key, c.Ident, m.Version, err)
	}
	p.stateCommitted(ctx, key, m, ts, c)
	return nil
}

// stateCommitted records a state table's replacement as committed, then
// expires its snapshots.
func (p *Publisher) stateCommitted(ctx context.Context, key string, m *manifest.Manifest, ts *TableStatus, c *StateCommit) {
	ts.Committed, ts.Added, ts.Removed, ts.Version, ts.Files = true, len(c.Files), ts.Files, m.Version, len(c.Files)
	p.expire(ctx, key, c.Ident)
}

// expire expires table id's snapshots after a commit to it, and logs what
// it did: its failure is no failure of the publication (the commit
// stands), and the next expiry retries it.
func (p *Publisher) expire(ctx context.Context, key string, id Ident) {
	n, err := p.o.Catalog.Expire(ctx, id, p.o.SnapshotMaxAge, p.o.SnapshotMinKeep)
	if n > 0 {
		p.o.Log.Debug("deleted the metadata files of expired Iceberg snapshots", "table", key, "iceberg", id.String(), "files", n)
	}
	if err != nil {
		p.o.Log.Warn("expiring Iceberg snapshots", "table", key, "iceberg", id.String(), "err", err)
	}
}

// planState is the state table's commit, or nil when it holds m's base.
func (p *Publisher) planState(ctx context.Context, id Ident, key string, m *manifest.Manifest, pub Published) (*StateCommit, error) {
	mt := m.Tables[key]
	want := StateFiles(mt)
	same := len(pub.Files) == len(want) && pub.SchemaID == mt.SchemaVersion
	for _, f := range want {
		same = same && pub.Files[f.Path]
	}
	if same {
		return nil, nil
	}
	c := &StateCommit{Ident: id, Files: want, Summary: stateSummary(m, mt), Masked: map[string][]int64{}}
	if pub.SchemaID != mt.SchemaVersion {
		sv := mt.CurrentSchema()
		if sv == nil {
			return nil, fmt.Errorf("state of %s: no schema version %d", key, mt.SchemaVersion)
		}
		s, err := icebergschema.Of(sv.Version, sv.Columns)
		if err != nil {
			return nil, fmt.Errorf("state of %s: %w", key, err)
		}
		c.Schema = &s
	}
	if mt.Base.Tombstones > 0 || mt.Base.CompactedAt != nil {
		if p.o.Positions == nil {
			return nil, fmt.Errorf("state of %s: its base has tombstones and the publisher cannot read files", key)
		}
		for _, f := range want {
			pos, err := p.o.Positions(ctx, f.Path)
			if err != nil {
				return nil, fmt.Errorf("state of %s: tombstones of %s: %w", key, f.Path, err)
			}
			if len(pos) > 0 {
				c.Masked[f.Path] = pos
			}
		}
	}
	return c, nil
}

// Backoff bounds the wait between two failed publications.
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// finalPublishTimeout bounds the publication of the version a commit
// interval held when the daemon stops (under the daemon's 30 s for its
// background work to stop).
const finalPublishTimeout = 10 * time.Second

// Name is the publisher's name among the daemon's followers.
func (p *Publisher) Name() string { return "catalog publisher" }

// Follow publishes the newest committed version from feed until ctx is
// done: a failure is logged, counted and retried with a backoff (1 s
// doubling to a minute), and a version that lands meanwhile is published
// instead (the feed keeps only the newest: a publisher that falls behind
// coalesces versions, one Iceberg snapshot for several). With a commit
// interval, a version that lands within the interval after the last
// publication waits for its end, and the newest version then is
// published (the first one after a start never waits); when ctx ends
// during that wait, the newest version is published at once (bounded by
// finalPublishTimeout), so a stop neither waits the interval out nor
// leaves the catalog an interval behind. It never returns an error but
// ctx's: the catalog can never stop the stream.
func (p *Publisher) Follow(ctx context.Context, feed *manifest.Feed) error {
	var done *manifest.Manifest // the newest version published
	var doneAt time.Time        // when its publication began
	backoff := minBackoff
	for {
		m, err := feed.Next(ctx, done)
		if err != nil {
			return nil // ctx is done
		}
		if done != nil && p.o.CommitInterval > 0 {
			m = p.hold(ctx, feed, done, doneAt.Add(p.o.CommitInterval))
			if ctx.Err() != nil {
				p.publishFinal(ctx, feed, done)
				return nil
			}
		}
		at := p.o.Now()
		_, err = p.Publish(ctx, m)
		p.behind(m, done, err == nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.o.Log.Warn("publishing to the catalog failed; retrying", "version", m.Version, "retry_in", backoff.String(), "err", err)
			select {
			case <-p.o.After(backoff):
			case <-ctx.Done():
				return nil
			}
			backoff = min(2*backoff, maxBackoff)
			continue // the same or a newer version, from the start
		}
		backoff = minBackoff
		done, doneAt = m, at
	}
}

// hold waits until the commit interval ends (until) or ctx is done, and
// returns the newest version then. The lag it reports as each version
// lands stays true while versions wait: they are committed and not yet
// published.
func (p *Publisher) hold(ctx context.Context, feed *manifest.Feed, done *manifest.Manifest, until time.Time) *manifest.Manifest {
	var tick <-chan time.Time
	if wait := until.Sub(p.o.Now()); wait > 0 {
		tick = p.o.After(wait)
	}
	for {
		// The feed holds a version newer than done (Follow's Next said
		// so), and only ever moves to newer ones.
		m, wake := feed.Watch()
		if tick == nil {
			return m
		}
		p.behind(m, done, false)
		select {
		case <-tick:
			return m
		case <-ctx.Done():
			return m
		case <-wake:
		}
	}
}

// publishFinal publishes the newest version once when Follow stops during
// a commit interval (ctx is done: a context of its own, bounded).
func (p *Publisher) publishFinal(ctx context.Context, feed *manifest.Feed, done *manifest.Manifest) {
	m := feed.Latest()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalPublishTimeout)
	defer cancel()
	_, err := p.Publish(fctx, m)
	p.behind(m, done, err == nil)
	if err != nil {
		p.o.Log.Warn("publishing the newest version to the catalog on stop failed; the next start publishes it", "version", m.Version, "err", err)
	}
}

// behind tells the observer how far the catalog is behind m after an
// attempt to publish it (published: it succeeded), done being the newest
// version published before (nil: none since the start).
func (p *Publisher) behind(m, done *manifest.Manifest, published bool) {
	if p.o.Observer == nil {
		return
	}
	switch {
	case published:
		p.o.Observer.Behind(0, p.o.Now().Sub(m.Freshness()))
	case done != nil:
		p.o.Observer.Behind(m.Version-done.Version, p.o.Now().Sub(done.Freshness()))
	default:
		p.o.Observer.Behind(m.Version, p.o.Now().Sub(m.Freshness()))
	}
}

// VersionOf reads a snapshot summary's manifest version (0 when absent).
func VersionOf(summary map[string]string) uint64 {
	v, _ := strconv.ParseUint(summary[SummaryManifestVersion], 10, 64)
	return v
}

// Referenced returns the sink keys that any Iceberg snapshot retained for
// a table of m names: pg-cdc's garbage collection keeps them whatever
// their age (compact.CollectOptions.Referenced), so no retained snapshot
// ever names a deleted file — not an idle table's, whose snapshots expire
// only when it is next committed to, nor one snapshot_min_keep keeps past
// snapshot_max_age. A catalog that cannot say is an error: collecting
// without knowing could delete what a reader of the catalog needs.
func (p *Publisher) Referenced(ctx context.Context, m *manifest.Manifest) (map[string]bool, error) {
	r, ok := p.o.Catalog.(Referencer)
	if !ok {
		return nil, errors.New("the catalog cannot list the files its snapshots name")
	}
	out := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		for _, id := range []Ident{ChangelogIdent(p.o.Prefix, mt.Schema, mt.Name), StateIdent(p.o.Prefix, mt.Schema, mt.Name)} {
			keys, err := r.Referenced(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("files named by %s: %w", id, err)
			}
			maps.Copy(out, keys)
		}
	}
	return out, nil
}
