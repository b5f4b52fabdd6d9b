package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

func (a *api) tables(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"as_of"})
	if err != nil {
		return err
	}
	at, err := a.resolve(r, ps["as_of"])
	if err != nil {
		return err
	}
	ts, err := a.o.Reader.Tables(r.Context(), at)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []readpath.Table{}
	}
	rec := access.RecordFrom(r.Context())
	for _, t := range ts {
		rec.Tables = append(rec.Tables, t.Name)
	}
	rec.Rows = int64(len(ts))
	return writeJSON(w, struct {
		Version uint64           `json:"version"`
		AsOf    string           `json:"as_of,omitempty"`
		Tables  []readpath.Table `json:"tables"`
	}{at.Version(), ps["as_of"], ts})
}

type columnDetail struct {
	Name     string `json:"name"`
	PGType   string `json:"pg_type"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
	FieldID  int    `json:"field_id"`
}

type schemaDetail struct {
	Version   int            `json:"version"`
	FromEpoch uint64         `json:"from_epoch"`
	Columns   []columnDetail `json:"columns"`
}

type tableDetail struct {
	Name            string            `json:"name"`
	Schema          string            `json:"schema"`
	Table           string            `json:"table"`
	Version         uint64            `json:"version"`
	Generation      string            `json:"generation"`
	PrimaryKey      []string          `json:"primary_key"`
	ReplicaIdentity string            `json:"replica_identity"`
	SchemaVersion   int               `json:"schema_version"`
	Schemas         []schemaDetail    `json:"schema_versions"`
	Snapshot        manifest.Snapshot `json:"snapshot"`
	Rows            int64             `json:"rows"`
	FreshAsOf       *time.Time        `json:"fresh_as_of"`
}

func (a *api) table(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"as_of"})
	if err != nil {
		return err
	}
	at, err := a.resolve(r, ps["as_of"])
	if err != nil {
		return err
	}
	key, mt, err := lookup(r, at.Manifest, r.PathValue("table"))
	if err != nil {
		return err
	}
	res, err := a.o.Reader.Query(r.Context(), at, "SELECT count(*) FROM "+a.view(at.Manifest, key))
	if err != nil {
		return fmt.Errorf("count %s: %w", key, err)
	}
	d := tableDetail{Name: key, Schema: mt.Schema, Table: mt.Name, Version: at.Version(), Generation: mt.Generation, PrimaryKey: mt.PrimaryKey,
		ReplicaIdentity: mt.ReplicaIdentity, SchemaVersion: mt.SchemaVersion, Snapshot: mt.Snapshot, Schemas: []schemaDetail{}}
	if d.PrimaryKey == nil {
		d.PrimaryKey = []string{}
	}
	if d.Snapshot.State == "" {
		d.Snapshot.State = manifest.SnapshotComplete
	}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
		d.Rows, _ = res.Rows[0][0].(int64)
	}
	for _, sv := range mt.Schemas {
		s := schemaDetail{Version: sv.Version, FromEpoch: sv.FromEpoch, Columns: []columnDetail{}}
		for _, c := range sv.Columns {
			t, err := mergesql.DuckType(c.ParquetType)
			if err != nil {
				t = c.ParquetType
			}
			s.Columns = append(s.Columns, columnDetail{Name: c.Name, PGType: c.PGType, Type: t, Nullable: c.Nullable, FieldID: c.FieldID})
		}
		d.Schemas = append(d.Schemas, s)
	}
	d.FreshAsOf = freshness(at)
	return writeJSON(w, d)
}

// freshness is the point's fresh_as_of: the sink holds every transaction
// the source committed up to it (nil before the first flush or idle
// advance); a point bounded by time holds no more than its bound.
func freshness(at readpath.At) *time.Time {
	t := at.Manifest.Freshness()
	if b := at.Bound.Time; !b.IsZero() && b.Before(t) {
		t = b
	}
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

type changeOut struct {
	Cursor     string         `json:"cursor"`
	Op         string         `json:"op"`
	LSN        cdc.LSN        `json:"lsn"`
	Seq        int64          `json:"seq"`
	XID        int64          `json:"xid"`
	CommitTime *time.Time     `json:"commit_time"`
	Unchanged  []string       `json:"unchanged,omitempty"`
	Row        map[string]any `json:"row"`
}

func (a *api) changes(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"after", "limit"})
	if err != nil {
		return err
	}
	limit, err := limitParam(ps["limit"], a.o.MaxRows)
	if err != nil {
		return err
	}
	c, err := changefeed.ParseCursor(ps["after"])
	if err != nil {
		return &apiError{P: problem{Status: http.StatusBadRequest, Code: "bad_cursor", Parameter: "after", Detail: err.Error()}, Err: err}
	}
	if a.o.Feed == nil {
		return &apiError{P: problem{Status: http.StatusNotImplemented, Code: "unavailable", Detail: "this server has no change feed"}}
	}
	newest, err := a.o.Reader.Resolve(r.Context(), "")
	if err != nil {
		return err
	}
	key, _, err := lookup(r, newest.Manifest, r.PathValue("table"))
	if err != nil {
		return err
	}
	p, err := a.o.Feed.Page(r.Context(), key, c, limit)
	if err != nil {
		if errors.Is(err, changefeed.ErrUnknownTable) {
			_, _, err = lookup(r, &manifest.Manifest{}, key)
		}
		return err
	}
	out := struct {
		Table      string      `json:"table"`
		Version    uint64      `json:"version"`
		Columns    []column    `json:"columns"`
		Changes    []changeOut `json:"changes"`
		NextCursor string      `json:"next_cursor"`
		More       bool        `json:"more"`
	}{Table: key, Version: p.Version, Columns: columnsOf(p.Columns), Changes: make([]changeOut, len(p.Changes)), NextCursor: p.Next.String(), More: p.More}
	for i, ch := range p.Changes {
		o := changeOut{Cursor: ch.Cursor.String(), Op: ch.Op, LSN: ch.Cursor.LSN, Seq: ch.Cursor.Seq, XID: ch.XID, Unchanged: ch.Unchanged, Row: object(p.Columns, ch.Values)}
		if !ch.CommitTime.IsZero() {
			t := ch.CommitTime.UTC()
			o.CommitTime = &t
		}
		out.Changes[i] = o
	}
	rec := access.RecordFrom(r.Context())
	if ps["after"] != "" {
		rec.Filters = append(rec.Filters, "after:"+ps["after"]) // a cursor, not an as-of point
	}
	rec.Rows, rec.Truncated = int64(len(p.Changes)), p.More
	return writeJSON(w, out)
}

type queryRequest struct {
	SQL    string            `json:"sql"`
	AsOf   string            `json:"as_of"`
	Params []json.RawMessage `json:"params"`
}

func (a *api) query(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r, nil); err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &apiError{P: problem{Status: http.StatusUnsupportedMediaType, Code: "bad_body", Detail: "the body must be application/json"}}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{P: problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Detail: fmt.Sprintf("the body is over %d bytes", MaxBody)}}
		}
		return &apiError{P: problem{Status: http.StatusBadRequest, Code: "bad_body", Detail: "reading the body failed"}, Err: err}
	}
	var req queryRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return bad("bad_body", "body", "the body is not a query: %s; want {\"sql\": \"SELECT …\", \"as_of\": \"…\", \"params\": […]}", jsonProblem(err))
	}
	if dec.More() {
		return bad("bad_body", "body", "the body holds more than one JSON value")
	}
	// The audit record holds the question before anything can refuse it:
	// a refused query is the one an auditor looks for.
	rec := access.RecordFrom(r.Context())
	rec.SQL, rec.Params = req.SQL, len(req.Params)
	if strings.TrimSpace(req.SQL) == "" {
		return bad("bad_body", "sql", "sql is missing or empty")
	}
	args := make([]any, len(req.Params))
	for i, raw := range req.Params {
		if args[i], err = param(raw); err != nil {
			return bad("bad_param", "params", "params[%d]: %v", i, err)
		}
	}
	at, err := a.resolve(r, req.AsOf)
	if err != nil {
		return err
	}
	res, err := a.o.Reader.Query(r.Context(), at, req.SQL, args...)
	if err != nil {
		return err
	}
	rows := make([][]any, len(res.Rows))
	for i, row := range res.Rows {
		rows[i] = make([]any, len(row))
		for j, v := range row {
			rows[i][j] = jsonValue(v, res.Columns[j].Type)
		}
	}
	rec.Rows, rec.Truncated = int64(len(rows)), res.Truncated
	return writeJSON(w, struct {
		Version   uint64   `json:"version"`
		AsOf      string   `json:"as_of,omitempty"`
		Columns   []column `json:"columns"`
		Rows      [][]any  `json:"rows"`
		Truncated bool     `json:"truncated"`
	}{at.Version(), req.AsOf, columnsOf(res.Columns), rows, res.Truncated})
}

// jsonProblem says where a body's JSON is wrong, without echoing it.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s", te.Field, te.Type)
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	return trimmed(err.Error())
}

// param is one query parameter: null, a boolean, a string, or a number
// (an integer as int64, else float64).
func param(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s is out of range", trimmed(x.String()))
		}
		return f, nil
	}
	return nil, errors.New("want null, a boolean, a number or a string")
}

func (a *api) manifest(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"as_of"})
	if err != nil {
		return err
	}
	at, err := a.resolve(r, ps["as_of"])
	if err != nil {
		return err
	}
	return writeJSON(w, struct {
		Version  uint64             `json:"version"`
		AsOf     string             `json:"as_of,omitempty"`
		Bound    *bound             `json:"bound"`
		Manifest *manifest.Manifest `json:"manifest"`
	}{at.Version(), ps["as_of"], boundOf(at), at.Manifest})
}

type bound struct {
	LSN  *cdc.LSN   `json:"lsn,omitempty"`
	Time *time.Time `json:"time,omitempty"`
}

// boundOf is the bound inside the version a point reads, nil for none.
func boundOf(at readpath.At) *bound {
	if at.Bound.IsZero() {
		return nil
	}
	var b bound
	if at.Bound.LSN != 0 {
		b.LSN = &at.Bound.LSN
	}
	if !at.Bound.Time.IsZero() {
		t := at.Bound.Time.UTC()
		b.Time = &t
	}
	return &b
}

func (a *api) refs(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"tags"})
	if err != nil {
		return err
	}
	tags := 20
	if s := ps["tags"]; s != "" {
		if tags, err = strconv.Atoi(s); err != nil || tags < 0 || tags > 1000 || strings.TrimLeft(s, "0123456789") != "" {
			return bad("bad_tags", "tags", "tags %q: want a whole number from 0 to 1000", trimmed(s))
		}
	}
	l, err := a.o.Reader.Refs(r.Context(), tags)
	if err != nil {
		return err
	}
	if l.Branches == nil {
		l.Branches = map[string]refs.Branch{}
	}
	if l.Tags == nil {
		l.Tags = []readpath.Tag{}
	}
	access.RecordFrom(r.Context()).Rows = int64(len(l.Branches) + len(l.Tags))
	return writeJSON(w, l)
}

func (a *api) diff(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"from", "to"}, "table")
	if err != nil {
		return err
	}
	if ps["from"] == "" {
		return bad("missing_parameter", "from", "from is required: the point to compare from (a version, epoch:N, lsn:X/Y, a time, main, staging, raw@<time>)")
	}
	rec := access.RecordFrom(r.Context())
	from, err := a.o.Reader.Resolve(r.Context(), ps["from"])
	if err != nil {
		return withParam(a.classify(r, err), "from", err)
	}
	to, err := a.o.Reader.Resolve(r.Context(), ps["to"])
	if err != nil {
		return withParam(a.classify(r, err), "to", err)
	}
	rec.Point = ps["from"] + ".." + ps["to"]
	var only []string
	for _, t := range r.URL.Query()["table"] {
		for _, name := range strings.Split(t, ",") {
			key, _, err := lookup(r, to.Manifest, name)
			if err != nil {
				if key, _, err = lookup(r, from.Manifest, name); err != nil {
					return err
				}
			}
			only = append(only, key)
		}
	}
	counts, err := a.o.Reader.Diff(r.Context(), from, to, only)
	if err != nil {
		return err
	}
	if counts == nil {
		counts = map[string]refs.Counts{}
	}
	rec.Tables = slices.Sorted(maps.Keys(counts))
	rec.Rows = int64(len(counts))
	return writeJSON(w, struct {
		From        uint64                 `json:"from_version"`
		To          uint64                 `json:"to_version"`
		FromPoint   string                 `json:"from"`
		ToPoint     string                 `json:"to"`
		Tables      map[string]refs.Counts `json:"tables"`
		Differences bool                   `json:"differences"`
	}{from.Version(), to.Version(), ps["from"], ps["to"], counts, anyCounts(counts)})
}

func anyCounts(m map[string]refs.Counts) bool {
	for _, c := range m {
		if c.Any() {
			return true
		}
	}
	return false
}

// withParam names the parameter a classified error is about.
func withParam(p problem, param string, err error) error {
	if p.Parameter != "" {
		p.Parameter = param
	}
	return &apiError{P: p, Err: err}
}

type fileOut struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

type partOut struct {
	Epoch  uint64    `json:"epoch"`
	MaxLSN cdc.LSN   `json:"max_lsn"`
	Files  []fileOut `json:"files"`
}

type snapshotTable struct {
	Generation string    `json:"generation"`
	Base       *partOut  `json:"base"`
	Deltas     []partOut `json:"deltas"`
	Bytes      int64     `json:"bytes"`
	Files      int       `json:"files"`
}

func files(fs []manifest.File) ([]fileOut, int64) {
	out := make([]fileOut, len(fs))
	var n int64
	for i, f := range fs {
		out[i] = fileOut{f.Path, f.Rows, f.Bytes}
		n += f.Bytes
	}
	return out, n
}

func (a *api) snapshot(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"as_of"}, "table")
	if err != nil {
		return err
	}
	at, err := a.resolve(r, ps["as_of"])
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(at.Manifest.Tables))
	if ts := r.URL.Query()["table"]; len(ts) > 0 {
		keys = nil
		for _, t := range ts {
			for _, name := range strings.Split(t, ",") {
				key, _, err := lookup(r, at.Manifest, name)
				if err != nil {
					return err
				}
				keys = append(keys, key)
			}
		}
	}
	out := map[string]snapshotTable{}
	for _, key := range keys {
		mt := at.Manifest.Tables[key]
		st := snapshotTable{Generation: mt.Generation, Deltas: []partOut{}}
		if b := mt.Base; b != nil {
			fs, n := files(b.Files)
			st.Base, st.Bytes, st.Files = &partOut{Epoch: b.Epoch, MaxLSN: b.MaxLSN, Files: fs}, n, len(fs)
		}
		for _, d := range mt.Deltas {
			fs, n := files(d.Files)
			st.Deltas = append(st.Deltas, partOut{Epoch: d.Epoch, MaxLSN: d.MaxLSN, Files: fs})
			st.Bytes, st.Files = st.Bytes+n, st.Files+len(fs)
		}
		out[key] = st
	}
	rec := access.RecordFrom(r.Context())
	rec.Tables, rec.Rows = keys, int64(len(keys))
	return writeJSON(w, struct {
		Version uint64                   `json:"version"`
		AsOf    string                   `json:"as_of,omitempty"`
		Bound   *bound                   `json:"bound"`
		Tables  map[string]snapshotTable `json:"tables"`
		// IcebergMetadataLocation is the Iceberg table metadata of the
		// version once catalogs are published (design.md §12); null now.
		IcebergMetadataLocation *string `json:"iceberg_metadata_location"`
	}{at.Version(), ps["as_of"], boundOf(at), out, nil})
}

func (a *api) status(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r, nil); err != nil {
		return err
	}
	at, err := a.o.Reader.Resolve(r.Context(), "")
	if err != nil {
		return err
	}
	m := at.Manifest
	now := a.o.Now().UTC()
	type st struct {
		Version       uint64     `json:"version"`
		Epoch         uint64     `json:"epoch"`
		EndLSN        cdc.LSN    `json:"end_lsn"`
		CommittedAt   time.Time  `json:"committed_at"`
		FreshAsOf     *time.Time `json:"fresh_as_of"`
		LagSeconds    *float64   `json:"lag_seconds"`
		IsStale       bool       `json:"is_stale"`
		StaleAfterSec float64    `json:"stale_after_seconds"`
		Tables        int        `json:"tables"`
		OldestVersion *uint64    `json:"oldest_version"`
		ServerVersion string     `json:"server_version"`
		Now           time.Time  `json:"now"`
	}
	s := st{Version: m.Version, Epoch: m.Epoch, EndLSN: m.EndLSN, CommittedAt: m.CommittedAt.UTC(), FreshAsOf: freshness(at), Tables: len(m.Tables),
		StaleAfterSec: a.o.StaleAfter.Seconds(), ServerVersion: a.o.Version, Now: now}
	if s.FreshAsOf != nil {
		lag := max(0, now.Sub(*s.FreshAsOf).Seconds())
		s.LagSeconds = &lag
		s.IsStale = a.o.StaleAfter > 0 && now.Sub(*s.FreshAsOf) > a.o.StaleAfter
	} else {
		s.IsStale = a.o.StaleAfter > 0 // nothing is known to be fresh yet
	}
	if l, err := a.o.Reader.Refs(r.Context(), 0); err == nil {
		s.OldestVersion = &l.Oldest.Version
	}
	return writeJSON(w, s)
}
