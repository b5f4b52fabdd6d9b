package mcpserver

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// VersionHeader names one manifest version.
type VersionHeader struct {
	Version       uint64 `json:"version"`
	Epoch         uint64 `json:"epoch"`
	EndLSN        string `json:"end_lsn"`
	CommittedAt   string `json:"committed_at,omitempty"`
	MaxCommitTime string `json:"max_commit_time,omitempty" jsonschema:"the newest source commit the version holds"`
}

func header(h manifest.Header) VersionHeader {
	return VersionHeader{Version: h.Version, Epoch: h.Epoch, EndLSN: h.EndLSN.String(), CommittedAt: timeText(h.CommittedAt), MaxCommitTime: timeText(h.MaxCommitTime)}
}

// BranchInfo is where a branch points.
type BranchInfo struct {
	Name          string `json:"name"`
	Version       uint64 `json:"version"`
	Epoch         uint64 `json:"epoch"`
	EndLSN        string `json:"end_lsn"`
	MaxCommitTime string `json:"max_commit_time,omitempty"`
	UpdatedAt     string `json:"updated_at,omitempty"`
	By            string `json:"by" jsonschema:"what moved it last: follow (the daemon) or promote (an operator)"`
}

// EpochInfo is one entry of the manifest's recent history.
type EpochInfo struct {
	Epoch         uint64 `json:"epoch"`
	EndLSN        string `json:"end_lsn"`
	MaxCommitTime string `json:"max_commit_time,omitempty"`
	FlushedAt     string `json:"flushed_at,omitempty"`
}

// ManifestTable is one table in the manifest summary.
type ManifestTable struct {
	Name          string `json:"name"`
	Generation    string `json:"generation"`
	SchemaVersion int    `json:"schema_version"`
	Snapshot      string `json:"snapshot"`
	BaseFiles     int    `json:"base_files"`
	BaseRows      int64  `json:"base_rows" jsonschema:"rows in the base files (delete markers included)"`
	Deltas        int    `json:"deltas" jsonschema:"delta epochs not yet compacted"`
	DeltaFiles    int    `json:"delta_files"`
	DeltaRows     int64  `json:"delta_rows" jsonschema:"change rows in the deltas"`
	Bytes         int64  `json:"bytes" jsonschema:"the size of all its files"`
}

type ManifestOutput struct {
	At          AtOutput        `json:"at"`
	CommittedAt string          `json:"committed_at,omitempty"`
	FreshAsOf   string          `json:"fresh_as_of,omitempty" jsonschema:"the sink holds every transaction the source committed up to this time"`
	Source      ManifestSource  `json:"source"`
	Tables      []ManifestTable `json:"tables"`
	History     []EpochInfo     `json:"history" jsonschema:"the newest epochs, newest last (at most 10)"`
	Branches    []BranchInfo    `json:"branches"`
	Oldest      VersionHeader   `json:"oldest" jsonschema:"the oldest version the history still holds: the window's start"`
	Newest      VersionHeader   `json:"newest" jsonschema:"the newest version"`
}

type ManifestSource struct {
	SystemIdentifier string `json:"system_identifier"`
	Timeline         int32  `json:"timeline"`
	Database         string `json:"database"`
	Slot             string `json:"slot"`
	Publication      string `json:"publication"`
}

func tableFiles(mt *manifest.Table) (base, delta []manifest.File) {
	if mt.Base != nil {
		base = mt.Base.Files
	}
	for _, d := range mt.Deltas {
		delta = append(delta, d.Files...)
	}
	return base, delta
}

func manifestSummary(m *manifest.Manifest) []ManifestTable {
	out := []ManifestTable{}
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		state := mt.Snapshot.State
		if state == "" {
			state = manifest.SnapshotComplete
		}
		t := ManifestTable{Name: key, Generation: mt.Generation, SchemaVersion: mt.SchemaVersion, Snapshot: state, Deltas: len(mt.Deltas)}
		base, delta := tableFiles(mt)
		t.BaseFiles, t.DeltaFiles = len(base), len(delta)
		for _, f := range base {
			t.BaseRows += f.Rows
			t.Bytes += f.Bytes
		}
		for _, f := range delta {
			t.DeltaRows += f.Rows
			t.Bytes += f.Bytes
		}
		out = append(out, t)
	}
	return out
}

func (s *Server) manifestSummary(ctx context.Context, in AsOfInput) (ManifestOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return ManifestOutput{}, err
	}
	rl, err := s.o.Reader.Refs(ctx, 0)
	if err != nil {
		return ManifestOutput{}, callError(err)
	}
	m := at.Manifest
	out := ManifestOutput{
		At: atOutput(at), CommittedAt: timeText(m.CommittedAt), FreshAsOf: timeText(freshAsOf(m)),
		Source: ManifestSource{SystemIdentifier: m.Source.SystemIdentifier, Timeline: m.Source.Timeline, Database: m.Source.Database, Slot: m.Source.Slot, Publication: m.Source.Publication},
		Tables: manifestSummary(m), History: []EpochInfo{}, Branches: branches(rl.Branches),
		Oldest: header(rl.Oldest), Newest: header(rl.Newest),
	}
	for _, e := range m.History[max(0, len(m.History)-10):] {
		out.History = append(out.History, EpochInfo{Epoch: e.Epoch, EndLSN: e.EndLSN.String(), MaxCommitTime: timeText(e.MaxCommitTime), FlushedAt: timeText(e.FlushedAt)})
	}
	access.RecordFrom(ctx).Rows = int64(len(out.Tables))
	return out, nil
}

func branches(bs map[string]refs.Branch) []BranchInfo {
	out := []BranchInfo{}
	for _, name := range slices.Sorted(maps.Keys(bs)) {
		b := bs[name]
		out = append(out, BranchInfo{Name: name, Version: b.ManifestVersion, Epoch: b.Epoch, EndLSN: b.EndLSN.String(), MaxCommitTime: timeText(b.MaxCommitTime), UpdatedAt: timeText(b.UpdatedAt), By: b.By})
	}
	return out
}

type FreshnessOutput struct {
	At AtOutput `json:"at"`
	// FreshAsOf is the contract: every transaction the source committed
	// up to it is in the sink.
	FreshAsOf string `json:"fresh_as_of,omitempty" jsonschema:"the sink holds every transaction the source committed up to this time (absent before the first flush)"`
	// BehindSeconds is how far the contract is behind the server's clock:
	// on an idle source it stays small, as the daemon's idle advance moves
	// the time forward without writes.
	BehindSeconds float64 `json:"behind_seconds" jsonschema:"seconds from fresh_as_of to now, by the server's clock (-1 before the first flush)"`
	Now           string  `json:"now" jsonschema:"the server's clock"`
	EndLSN        string  `json:"end_lsn" jsonschema:"every transaction with commit LSN up to this one is in the sink"`
	CommittedAt   string  `json:"committed_at,omitempty" jsonschema:"when the version read was written"`
}

func (s *Server) freshness(ctx context.Context, in AsOfInput) (FreshnessOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return FreshnessOutput{}, err
	}
	now := s.o.Now()
	fresh := boundedFreshness(at)
	out := FreshnessOutput{At: atOutput(at), FreshAsOf: timeText(fresh), BehindSeconds: -1, Now: timeText(now), EndLSN: at.Manifest.EndLSN.String(), CommittedAt: timeText(at.Manifest.CommittedAt)}
	if at.Bound.LSN != 0 && at.Bound.LSN < at.Manifest.EndLSN {
		out.EndLSN = at.Bound.LSN.String()
	}
	if !fresh.IsZero() {
		out.BehindSeconds = now.Sub(fresh).Seconds()
	}
	return out, nil
}

// boundedFreshness is the freshness of a point: its version's, or for a
// point inside a version what the bound guarantees — the bound's time, or
// for an LSN bound the newest epoch it holds whole (commits are in LSN
// order, so every transaction committed up to that epoch's newest commit
// is at or below the bound).
func boundedFreshness(at readpath.At) time.Time {
	fresh := freshAsOf(at.Manifest)
	switch {
	case !at.Bound.Time.IsZero():
		if at.Bound.Time.Before(fresh) {
			fresh = at.Bound.Time
		}
	case at.Bound.LSN != 0 && at.Bound.LSN < at.Manifest.EndLSN:
		fresh = time.Time{}
		for _, e := range at.Manifest.History {
			if e.EndLSN <= at.Bound.LSN && e.MaxCommitTime.After(fresh) {
				fresh = e.MaxCommitTime
			}
		}
	}
	return fresh
}

type SnapshotInput struct {
	Table string `json:"table,omitempty" jsonschema:"one table (schema.table, or its bare name); empty for all"`
	AsOf  string `json:"as_of,omitempty" jsonschema:"the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"`
}

// SnapshotFile is one Parquet file of a version.
type SnapshotFile struct {
	Key   string `json:"key" jsonschema:"the object key, relative to the sink's root"`
	Kind  string `json:"kind" jsonschema:"base (compacted or snapshotted state) or delta (change rows of an epoch)"`
	Epoch uint64 `json:"epoch"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

type SnapshotTable struct {
	Name          string         `json:"name"`
	Generation    string         `json:"generation"`
	SchemaVersion int            `json:"schema_version"`
	Files         []SnapshotFile `json:"files"`
	Rows          int64          `json:"rows" jsonschema:"rows in the files (change rows and delete markers included)"`
	Bytes         int64          `json:"bytes"`
}

type SnapshotOutput struct {
	At     AtOutput        `json:"at"`
	Tables []SnapshotTable `json:"tables"`
	Note   string          `json:"note"`
}

func (s *Server) snapshot(ctx context.Context, in SnapshotInput) (SnapshotOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return SnapshotOutput{}, err
	}
	keys := slices.Sorted(maps.Keys(at.Manifest.Tables))
	rec := access.RecordFrom(ctx)
	if in.Table != "" {
		key, _, err := lookupTable(at.Manifest, in.Table)
		if err != nil {
			return SnapshotOutput{}, err
		}
		keys = []string{key}
		rec.Tables = keys
	}
	out := SnapshotOutput{At: atOutput(at), Tables: []SnapshotTable{},
		Note: "the files a reader merges into the state: the base, then the deltas in epoch order, newest (__lsn, __seq) per key; the bytes are not served here"}
	if !at.Bound.IsZero() {
		out.Note += "; as_of is inside this version, so a reader keeps only rows up to at.point"
	}
	for _, key := range keys {
		mt := at.Manifest.Tables[key]
		t := SnapshotTable{Name: key, Generation: mt.Generation, SchemaVersion: mt.SchemaVersion, Files: []SnapshotFile{}}
		if mt.Base != nil {
			for _, f := range mt.Base.Files {
				t.Files = append(t.Files, SnapshotFile{Key: f.Path, Kind: "base", Epoch: mt.Base.Epoch, Rows: f.Rows, Bytes: f.Bytes})
			}
		}
		for _, d := range mt.Deltas {
			for _, f := range d.Files {
				t.Files = append(t.Files, SnapshotFile{Key: f.Path, Kind: "delta", Epoch: d.Epoch, Rows: f.Rows, Bytes: f.Bytes})
			}
		}
		for _, f := range t.Files {
			t.Rows += f.Rows
			t.Bytes += f.Bytes
		}
		rec.Rows += int64(len(t.Files))
		out.Tables = append(out.Tables, t)
	}
	return out, nil
}

type DiffInput struct {
	From  string `json:"from" jsonschema:"the point to compare from (a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<time>)"`
	To    string `json:"to,omitempty" jsonschema:"the point to compare to; empty for the newest version"`
	Table string `json:"table,omitempty" jsonschema:"one table (schema.table, or its bare name); empty for all"`
}

// TableDiff is one table that changed between the points.
type TableDiff struct {
	Table         string   `json:"table"`
	Inserted      int64    `json:"inserted" jsonschema:"keys only the to point has (keyless: rows it has more of)"`
	Deleted       int64    `json:"deleted" jsonschema:"keys only the from point has"`
	Changed       int64    `json:"changed" jsonschema:"keys at both points with a different value in a column both points have (a value only in a column added or dropped between them is not counted: schema_changes lists the column)"`
	SchemaChanges []string `json:"schema_changes"`
	Breaking      []string `json:"breaking" jsonschema:"those schema changes that may break a reader's queries"`
}

type DiffOutput struct {
	From    AtOutput    `json:"from"`
	To      AtOutput    `json:"to"`
	Verdict string      `json:"verdict" jsonschema:"no_change, safe (rows only), schema_change (additive) or breaking"`
	Tables  []TableDiff `json:"tables" jsonschema:"the tables that changed"`
}

func (s *Server) diff(ctx context.Context, in DiffInput) (DiffOutput, error) {
	if in.From == "" {
		return DiffOutput{}, errors.New("from is required: the point to compare from, e.g. a version number get_manifest lists, epoch:N or main")
	}
	from, err := s.resolve(ctx, in.From)
	if err != nil {
		return DiffOutput{}, err
	}
	to, err := s.resolve(ctx, in.To)
	if err != nil {
		return DiffOutput{}, err
	}
	rec := access.RecordFrom(ctx)
	rec.Point = in.From + ".." + in.To
	var only []string
	if in.Table != "" {
		key, _, err := lookupTable(to.Manifest, in.Table)
		if err != nil {
			if key, _, err = lookupTable(from.Manifest, in.Table); err != nil {
				return DiffOutput{}, err
			}
		}
		only = []string{key}
		rec.Tables = only
	}
	verdict, changes, err := s.o.Reader.Compare(ctx, from, to, only)
	if err != nil {
		return DiffOutput{}, callError(err)
	}
	out := DiffOutput{From: atOutput(from), To: atOutput(to), Verdict: string(verdict), Tables: []TableDiff{}}
	for _, c := range changes {
		out.Tables = append(out.Tables, TableDiff{Table: c.Table, Inserted: c.Inserted, Deleted: c.Deleted, Changed: c.Changed, SchemaChanges: nonNil(c.Schema), Breaking: nonNil(c.Breaking)})
	}
	rec.Rows = int64(len(out.Tables))
	return out, nil
}
