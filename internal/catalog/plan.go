package catalog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Snapshot summary keys and table properties pg-cdc records (design.md §12).
const (
	SummaryManifestVersion = "pgcdc.manifest-version"
	SummaryLSN             = "pgcdc.lsn"
	SummaryCommitTS        = "pgcdc.commit-ts"
	SummaryEpoch           = "pgcdc.epoch"

	PropertyTable      = "pgcdc.table"       // the captured table, schema.name
	PropertyKind       = "pgcdc.kind"        // changelog
	PropertyPrimaryKey = "pgcdc.primary-key" // its key columns, comma-separated
	// PropertySchemaVersion is the pg-cdc schema version of the current
	// Iceberg schema.
	PropertySchemaVersion = "pgcdc.schema-version"
)

// Kind is what an Iceberg table holds of a captured table.
type Kind string

// Kinds of Iceberg tables.
const (
	// KindChangelog holds every change row as written.
	KindChangelog Kind = "changelog"
	// KindState holds the table's state as of its base (copy-on-write at
	// each compaction), its tombstones masked.
	KindState Kind = "state"
)

// DefaultPrefix is the first namespace level of every table pg-cdc
// publishes (catalog.iceberg.namespace).
const DefaultPrefix = "pgcdc"

// Ident names an Iceberg table: a namespace of one or more levels and a
// name.
type Ident struct {
	Namespace []string
	Name      string
}

func (id Ident) String() string {
	return strings.Join(append(slices.Clone(id.Namespace), id.Name), ".")
}

// ChangelogIdent is the changelog table of the captured table schema.name:
// namespace [prefix_changelog, schema], name table. The PostgreSQL names are
// kept as they are, each in a level of its own, so two captured tables can
// never map to one Iceberg table.
func ChangelogIdent(prefix, schema, table string) Ident {
	return Ident{Namespace: []string{prefix + "_changelog", schema}, Name: table}
}

// StateIdent is the current-state table of schema.name: namespace [prefix,
// schema], name table.
func StateIdent(prefix, schema, table string) Ident {
	return Ident{Namespace: []string{prefix, schema}, Name: table}
}

// StateCommit replaces everything a state table holds with Files, the rows
// at Masked[path] of each file hidden by position deletes, as one atomic
// commit.
type StateCommit struct {
	Ident   Ident
	Schema  *icebergschema.Schema
	Files   []manifest.File
	Masked  map[string][]int64
	Summary map[string]string
}

// StateFiles are the files of mt's state as of its base: the base itself
// (a snapshot base is every row inserted; a compacted base keeps each key's
// newest version, deletes as tombstones to mask), nil without a base.
func StateFiles(mt *manifest.Table) []manifest.File {
	if mt.Base == nil {
		return nil
	}
	return mt.Base.Files
}

// stateSummary records manifest version m and the LSN the state is as of:
// the base's.
func stateSummary(m *manifest.Manifest, mt *manifest.Table) map[string]string {
	s := summary(m)
	s[SummaryLSN] = mt.Base.MaxLSN.String()
	return s
}

// Published is what an Iceberg table holds, as pg-cdc last committed it.
type Published struct {
	// ManifestVersion is the version its current snapshot was published
	// from (0: no snapshot yet).
	ManifestVersion uint64
	// Files are the sink keys of its current snapshot's data files.
	Files map[string]bool
	// SchemaID is the pg-cdc schema version its current schema is
	// (PropertySchemaVersion; 0 when none was pushed).
	SchemaID int
}

// Commit is one Iceberg commit: the schema first (when set), then the files
// added and removed, as one snapshot whose summary is Summary.
type Commit struct {
	Ident   Ident
	Schema  *icebergschema.Schema
	Add     []manifest.File
	Remove  []string
	Summary map[string]string
}

// Empty reports whether c changes nothing.
func (c Commit) Empty() bool { return c.Schema == nil && len(c.Add) == 0 && len(c.Remove) == 0 }

// ChangeFiles are the files of mt whose rows are its change rows as
// written: a snapshot base (a compacted base holds the state it folded,
// not changes) and every delta. A resnapshot's files are not the table's
// until its switch.
func ChangeFiles(mt *manifest.Table) []manifest.File {
	var out []manifest.File
	if b := mt.Base; b != nil && b.CompactedAt == nil && len(b.SortedBy) == 0 {
		out = append(out, b.Files...)
	}
	for _, d := range mt.Deltas {
		out = append(out, d.Files...)
	}
	return out
}

// retiredChangeFile reports whether path, a file m retired, was one of
// mt's change files in its current generation, by the key layout
// manifest.FileKey fixes (<schema>/<table>/<gen>/<kind>/<epoch>/part-<n>
// .parquet): a delta, or a snapshot base, whose epoch is 0 (a compacted
// base takes the epoch of the newest delta it folded, and deltas start at
// 1). Another generation's files are not: a re-snapshot's that a rebuild
// superseded never were the table's, and those of the generation a switch
// replaced stay only if they were published.
func retiredChangeFile(mt *manifest.Table, path string) bool {
	prefix := strings.Join([]string{manifest.EscapeKeyElement(mt.Schema), manifest.EscapeKeyElement(mt.Name),
		manifest.EscapeKeyElement(mt.Generation)}, "/") + "/"
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/") // kind, epoch, part
	if len(parts) != 3 {
		return false
	}
	switch manifest.Kind(parts[0]) {
	case manifest.KindDelta:
		return true
	case manifest.KindBase:
		return parts[1] != "" && strings.Trim(parts[1], "0") == ""
	}
	return false
}

// PlanChangelog is the commit that brings table key's changelog from pub to
// manifest version m: the change files m has that pub lacks, and those
// retired inside retention that pub lacks (a publisher that fell behind
// across a compaction still publishes the deltas it folded): the ones m
// lists in Garbage, and folded, the files the major compactions after
// pub's version folded (Publisher.folded reads them from the history:
// m's folds name ranges, not files); the files pub has that m retired
// longer ago than retention (or that m no longer lists at all: a minor
// compaction's inputs, whose merged file is added in the same commit, so
// the changelog's rows stay the same); and m's schema when pub's is
// another. It is a pure function of its inputs, so a commit whose answer
// was lost plans to nothing the next time: its files are published.
func PlanChangelog(id Ident, key string, m *manifest.Manifest, pub Published, now time.Time, retention time.Duration, folded []manifest.RetiredFile) (Commit, error) {
	mt := m.Tables[key]
	if mt == nil {
		return Commit{}, fmt.Errorf("changelog of %s: no such table in manifest version %d", key, m.Version)
	}
	c := Commit{Ident: id, Summary: summary(m)}
	if pub.ManifestVersion == 0 || pub.SchemaID != mt.SchemaVersion {
		sv := mt.CurrentSchema()
		if sv == nil {
			return Commit{}, fmt.Errorf("changelog of %s: no schema version %d in manifest version %d", key, mt.SchemaVersion, m.Version)
		}
		s, err := icebergschema.Of(sv.Version, sv.Columns)
		if err != nil {
			return Commit{}, fmt.Errorf("changelog of %s: %w", key, err)
		}
		c.Schema = &s
	}
	live := map[string]bool{}
	for _, f := range ChangeFiles(mt) {
		live[f.Path] = true
		if !pub.Files[f.Path] {
			c.Add = append(c.Add, f)
		}
	}
	retired := make(map[string]time.Time, len(m.Garbage))
	cutoff := now.Add(-retention)
	for _, g := range slices.Concat(m.Garbage, folded) {
		retired[g.Path] = g.RetiredAt
		if !live[g.Path] && !pub.Files[g.Path] && g.RetiredAt.After(cutoff) && retiredChangeFile(mt, g.Path) {
			// Folded before it was published: its changes belong to the
			// changelog as long as the history's retention holds them.
			live[g.Path] = true
			c.Add = append(c.Add, manifest.File{Path: g.Path})
		}
	}
	for path := range pub.Files {
		if live[path] {
			continue
		}
		at, ok := retired[path]
		if !ok {
			at, ok = m.FoldedAt(path)
		}
		if ok && at.After(cutoff) {
			continue // still inside the history's retention: its changes stay readable
		}
		c.Remove = append(c.Remove, path)
	}
	slices.Sort(c.Remove)
	return c, nil
}

// summary is the snapshot summary recording manifest version m.
func summary(m *manifest.Manifest) map[string]string {
	return map[string]string{
		SummaryManifestVersion: strconv.FormatUint(m.Version, 10),
		SummaryLSN:             m.EndLSN.String(),
		SummaryCommitTS:        m.Freshness().UTC().Format(time.RFC3339Nano),
		SummaryEpoch:           strconv.FormatUint(m.Epoch, 10),
	}
}

// Retention is how long garbage collection must keep a retired file when a
// catalog is published (compact.CollectOptions.Retention): the history's
// retention, during which the changelog keeps the file, plus the age up to
// which an Iceberg snapshot that still names it is kept.
func Retention(history, snapshotMaxAge time.Duration) time.Duration { return history + snapshotMaxAge }
