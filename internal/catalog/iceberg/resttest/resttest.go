// Package resttest is an Iceberg REST catalog server for tests: the REST
// spec's routes that iceberg-go's client (catalog/rest) calls, answered by
// iceberg-go's own SQL catalog on a SQLite file in the test's temporary directory, on a
// loopback httptest server. The tables' files live under the warehouse
// given to New, which the client and the server share (a filesystem).
//
// It speaks the spec's wire forms (open-api/rest-catalog-open-api.yaml in
// apache/iceberg): multi-level namespaces in a path segment joined by the
// unit separator 0x1F, errors as the ErrorModel ({"error": {"message",
// "type", "code"}}), 404 NoSuchTableException / NoSuchNamespaceException,
// 409 AlreadyExistsException / CommitFailedException. A commit's
// requirements and updates are decoded by iceberg-go's table.Requirements
// and table.Updates, validated against the table's current metadata, and
// applied by the SQL catalog's CommitTable.
//
// Faults can be armed for the next table commit (LoseNextCommit,
// RefuseNextCommit, StallNextCommit), so tests see what a publisher does
// when a real catalog's answer is lost, refused or late.
//
// POST /v1/transactions/commit (the spec's commitTransaction) is
// all-or-nothing: every table's requirements are validated first, then
// the changes are applied one table after another, and when one fails
// (or FailNextTransaction's fault strikes between two tables) the tables
// already changed are put back to the metadata they held. Commits and
// loads are serialised by the server, so no client of it ever sees a
// transaction half applied. NoTransactions stops advertising the
// endpoint.
package resttest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // the SQL catalog's driver: pure Go
)

// sep joins a namespace's levels in a path segment and in the parent
// query parameter (the spec's default namespace-separator, %1F).
const sep = "\x1f"

// catalogName is the SQL catalog's name, its rows' catalog_name.
const catalogName = "resttest"

// maxStall bounds how long a stalled answer waits for its client to go
// away, so a test whose client has no timeout still ends.
const maxStall = 10 * time.Second

// fault is what happens to the next table commit.
type fault int

const (
	faultNone fault = iota
	// faultLose applies the commit, then answers 503: the answer is lost.
	faultLose
	// faultRefuse answers 409 CommitFailedException without applying.
	faultRefuse
	// faultStallApplied applies the commit, then holds the answer until
	// the client gives up.
	faultStallApplied
	// faultStallDropped holds the request until the client gives up, then
	// drops it unapplied.
	faultStallDropped
)

// Server is an Iceberg REST catalog over a SQL catalog.
type Server struct {
	// URL is the catalog's base URI (rest.NewCatalog's uri; the routes are
	// under URL/v1).
	URL string

	cat *sqlcat.Catalog
	db  *sql.DB
	srv *httptest.Server

	// tx serialises table commits and transactions (write) against
	// table loads (read), so a transaction is seen whole or not at all.
	tx sync.RWMutex

	mu         sync.Mutex
	faults     []fault
	token      string // the bearer token every request must carry ("" for none)
	credential string // the client credential /v1/oauth/tokens exchanges for token
	requests   []string
	commits    int
	txns       int  // transactions applied
	txFail     int  // transactions to fail after their first table change
	noTxn      bool // the transactions endpoint is not advertised
}

// New starts a server whose tables' locations default to under warehouse
// (a location: "file:///…"); it is closed when t's test ends.
func New(t testing.TB, warehouse string) *Server { return NewWithIO(t, warehouse, nil) }

// NewWithIO is New with the properties the server's own IO reaches the
// warehouse with (s3.endpoint, …): the server writes the tables' metadata
// files.
func NewWithIO(t testing.TB, warehouse string, io map[string]string) *Server {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "catalog.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	props := iceberg.Properties{"warehouse": warehouse}
	for k, v := range io {
		props[k] = v
	}
	cat, err := sqlcat.NewCatalog(catalogName, db, sqlcat.SQLite, props)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	s := &Server{cat: cat, db: db}
	s.srv = httptest.NewServer(s.routes())
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.srv.Close()
		db.Close()
	})
	return s
}

// Catalog is the SQL catalog behind the server, for reading what a test
// published without the REST layer.
func (s *Server) Catalog() *sqlcat.Catalog { return s.cat }

// RequireToken makes every request but the token exchange carry
// "Authorization: Bearer token"; with credential set, POST
// /v1/oauth/tokens exchanges the client credential (client_id:secret)
// for it.
func (s *Server) RequireToken(token, credential string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.credential = token, credential
}

// LoseNextCommit makes the next table commit apply and then answer 503
// ServiceUnavailableException, as when the answer is lost on the way back.
func (s *Server) LoseNextCommit() { s.arm(faultLose) }

// RefuseNextCommit makes the next table commit answer 409
// CommitFailedException without applying it, as a concurrent writer would.
func (s *Server) RefuseNextCommit() { s.arm(faultRefuse) }

// StallNextCommit holds the next table commit's answer until the client
// gives up (its timeout): applied says whether the commit is applied first
// (the server finished, the answer came too late) or dropped.
func (s *Server) StallNextCommit(applied bool) {
	if applied {
		s.arm(faultStallApplied)
	} else {
		s.arm(faultStallDropped)
	}
}

// FailNextTransaction makes the next transaction fail inside: its first
// table change is applied, then the server fails (500) before the next
// one, and the change applied is undone, as the spec's all-or-nothing
// asks.
func (s *Server) FailNextTransaction() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txFail++
}

// NoTransactions makes GET /v1/config stop advertising POST
// /v1/{prefix}/transactions/commit, as a catalog without multi-table
// commits: a client that honours the list never calls it.
func (s *Server) NoTransactions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noTxn = true
}

// Transactions is the number of transactions applied.
func (s *Server) Transactions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txns
}

func (s *Server) arm(f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

func (s *Server) nextFault() fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return faultNone
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f
}

// Requests are the requests served so far, "METHOD /path?query" each, the
// path as sent (escaped).
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Commits is the number of table commits applied.
func (s *Server) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// endpoints are the routes served, advertised by GET /v1/config in the
// spec's "METHOD /v1/{prefix}/…" form (so the client uses the HEAD
// existence checks, and never an endpoint missing here).
var endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/transactions/commit",
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/oauth/tokens", s.oauthToken)
	mux.HandleFunc("GET /v1/config", s.config)
	mux.HandleFunc("GET /v1/namespaces", s.listNamespaces)
	mux.HandleFunc("POST /v1/namespaces", s.createNamespace)
	mux.HandleFunc("GET /v1/namespaces/{ns}", s.loadNamespace) // and HEAD
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables", s.listTables)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", s.createTable)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", s.loadTable) // and HEAD
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{table}", s.commitTable)
	mux.HandleFunc("POST /v1/transactions/commit", s.commitTransaction)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		line := r.Method + " " + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		s.requests = append(s.requests, line)
		token := s.token
		s.mu.Unlock()
		if token != "" && r.URL.Path != "/v1/oauth/tokens" && r.Header.Get("Authorization") != "Bearer "+token {
			writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "a bearer token is required")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// errorModel is the spec's ErrorModel inside its IcebergErrorResponse.
type errorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]errorModel{"error": {Message: msg, Type: typ, Code: code}})
}

// writeCatalogError answers err as the spec's status and exception type.
func writeCatalogError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, icecat.ErrNoSuchTable):
		writeError(w, http.StatusNotFound, "NoSuchTableException", err.Error())
	case errors.Is(err, icecat.ErrNoSuchNamespace):
		writeError(w, http.StatusNotFound, "NoSuchNamespaceException", err.Error())
	case errors.Is(err, icecat.ErrTableAlreadyExists), errors.Is(err, icecat.ErrNamespaceAlreadyExists):
		writeError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
	case errors.Is(err, table.ErrCommitFailed):
		writeError(w, http.StatusConflict, "CommitFailedException", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, fmt.Appendf(nil, `{"error":{"message":%q,"type":"InternalServerError","code":500}}`, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", "request body: "+err.Error())
		return false
	}
	return true
}

// namespace is the {ns} path segment's levels: the client escapes each
// level and joins them with %1F; the mux unescapes the segment.
func namespace(r *http.Request) table.Identifier {
	return strings.Split(r.PathValue("ns"), sep)
}

func (s *Server) oauthToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	token, credential := s.token, s.credential
	s.mu.Unlock()
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": err.Error()})
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if credential == "" || r.PostForm.Get("grant_type") != "client_credentials" || id+":"+secret != credential {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client credential"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": token, "token_type": "bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	eps := endpoints
	if s.noTxn {
		eps = slices.DeleteFunc(slices.Clone(endpoints), func(e string) bool { return strings.HasSuffix(e, "/transactions/commit") })
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"defaults":  map[string]string{},
		"overrides": map[string]string{},
		"endpoints": eps,
	})
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	var parent table.Identifier
	if p := r.URL.Query().Get("parent"); p != "" {
		parent = strings.Split(p, sep)
	}
	nss, err := s.cat.ListNamespaces(r.Context(), parent)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	if nss == nil {
		nss = []table.Identifier{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  table.Identifier   `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if !decode(w, r, &req) {
		return
	}
	if err := s.cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
		writeCatalogError(w, err)
		return
	}
	props, err := s.cat.LoadNamespaceProperties(r.Context(), req.Namespace)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": props})
}

// loadNamespace answers GET with the namespace and its properties, HEAD
// with 204 (the spec's namespaceExists).
func (s *Server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns := namespace(r)
	props, err := s.cat.LoadNamespaceProperties(r.Context(), ns)
	if err != nil {
		if r.Method == http.MethodHead && errors.Is(err, icecat.ErrNoSuchNamespace) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		writeCatalogError(w, err)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": props})
}

// tableIdent is the spec's TableIdentifier.
type tableIdent struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (s *Server) listTables(w http.ResponseWriter, r *http.Request) {
	out := []tableIdent{}
	for id, err := range s.cat.ListTables(r.Context(), namespace(r)) {
		if err != nil {
			writeCatalogError(w, err)
			return
		}
		out = append(out, tableIdent{Namespace: id[:len(id)-1], Name: id[len(id)-1]})
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": out})
}

// tableResult is the spec's LoadTableResult (and CommitTableResponse, its
// first two fields).
type tableResult struct {
	MetadataLocation string            `json:"metadata-location"`
	Metadata         table.Metadata    `json:"metadata"`
	Config           map[string]string `json:"config,omitempty"`
}

func (s *Server) createTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name          string                 `json:"name"`
		Location      string                 `json:"location"`
		Schema        *iceberg.Schema        `json:"schema"`
		PartitionSpec *iceberg.PartitionSpec `json:"partition-spec"`
		WriteOrder    *table.SortOrder       `json:"write-order"`
		StageCreate   bool                   `json:"stage-create"`
		Properties    iceberg.Properties     `json:"properties"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.StageCreate {
		writeError(w, http.StatusNotAcceptable, "UnsupportedOperationException", "staged creation is not supported")
		return
	}
	if req.Name == "" || req.Schema == nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", "a table needs a name and a schema")
		return
	}
	opts := []icecat.CreateTableOpt{icecat.WithProperties(req.Properties)}
	if req.Location != "" {
		opts = append(opts, icecat.WithLocation(req.Location))
	}
	if req.PartitionSpec != nil {
		opts = append(opts, icecat.WithPartitionSpec(req.PartitionSpec))
	}
	if req.WriteOrder != nil {
		opts = append(opts, icecat.WithSortOrder(*req.WriteOrder))
	}
	tbl, err := s.cat.CreateTable(r.Context(), append(namespace(r), req.Name), req.Schema, opts...)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tableResult{MetadataLocation: tbl.MetadataLocation(), Metadata: tbl.Metadata(), Config: map[string]string{}})
}

// loadTable answers GET with the table's metadata, HEAD with 204 (the
// spec's tableExists). The snapshots query parameter is ignored: every
// snapshot is sent, as "all" asks.
func (s *Server) loadTable(w http.ResponseWriter, r *http.Request) {
	s.tx.RLock()
	tbl, err := s.cat.LoadTable(r.Context(), append(namespace(r), r.PathValue("table")))
	s.tx.RUnlock()
	if err != nil {
		if r.Method == http.MethodHead && errors.Is(err, icecat.ErrNoSuchTable) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		writeCatalogError(w, err)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, tableResult{MetadataLocation: tbl.MetadataLocation(), Metadata: tbl.Metadata(), Config: map[string]string{}})
}

// commitRequest is the spec's CommitTableRequest.
type commitRequest struct {
	Identifier   *tableIdent        `json:"identifier"`
	Requirements table.Requirements `json:"requirements"`
	Updates      table.Updates      `json:"updates"`
}

func (s *Server) commitTable(w http.ResponseWriter, r *http.Request) {
	var req commitRequest
	if !decode(w, r, &req) {
		return
	}
	ident := append(namespace(r), r.PathValue("table"))
	if req.Identifier != nil && !slices.Equal(append(append([]string{}, req.Identifier.Namespace...), req.Identifier.Name), ident) {
		writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("identifier %v is not the path's %v", req.Identifier, ident))
		return
	}
	f := s.nextFault()
	switch f {
	case faultRefuse:
		writeError(w, http.StatusConflict, "CommitFailedException", "injected: a concurrent commit won")
		return
	case faultStallDropped:
		stall(r.Context())
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: the commit was dropped")
		return
	}
	// The server's own work is not cancelled when its client goes away:
	// a stalled or lost answer is for a commit that happened.
	s.tx.Lock()
	res, err := s.commit(context.WithoutCancel(r.Context()), ident, req.Requirements, req.Updates)
	s.tx.Unlock()
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	switch f {
	case faultLose:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: the commit was applied, its answer lost")
		return
	case faultStallApplied:
		stall(r.Context())
	}
	writeJSON(w, http.StatusOK, res)
}

// stall waits until the client has gone away (or maxStall).
func stall(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(maxStall):
	}
}

// commit validates the requirements against the table's current metadata
// (a failed one is a conflict: 409, as the spec says) and applies the
// updates with the SQL catalog's CommitTable, whose compare-and-swap on
// the metadata location catches a writer in between.
func (s *Server) commit(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (tableResult, error) {
	cur, err := s.cat.LoadTable(ctx, ident)
	if err != nil {
		return tableResult{}, err
	}
	for _, rq := range reqs {
		if err := rq.Validate(cur.Metadata()); err != nil {
			return tableResult{}, fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
		}
	}
	meta, loc, err := s.cat.CommitTable(ctx, ident, reqs, updates)
	if err != nil {
		return tableResult{}, err
	}
	s.mu.Lock()
	s.commits++
	s.mu.Unlock()
	return tableResult{MetadataLocation: loc, Metadata: meta}, nil
}

// commitTransaction is the spec's commitTransaction, all-or-nothing: the
// SQL catalog has no multi-table transaction, so the changes are
// validated against every table first, then applied one table after
// another under the server's lock, and a failure part-way puts the tables
// already changed back to the metadata they held (undo). 204 when every
// change is applied.
func (s *Server) commitTransaction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TableChanges []commitRequest `json:"table-changes"`
	}
	if !decode(w, r, &req) {
		return
	}
	if len(req.TableChanges) == 0 {
		writeError(w, http.StatusBadRequest, "BadRequestException", "a transaction needs a table change")
		return
	}
	ctx := context.WithoutCancel(r.Context())
	s.tx.Lock()
	defer s.tx.Unlock()
	idents := make([]table.Identifier, len(req.TableChanges))
	for i, c := range req.TableChanges {
		if c.Identifier == nil {
			writeError(w, http.StatusBadRequest, "BadRequestException", "a table change needs its identifier")
			return
		}
		idents[i] = append(append(table.Identifier{}, c.Identifier.Namespace...), c.Identifier.Name)
		for _, earlier := range idents[:i] {
			if slices.Equal(earlier, idents[i]) {
				writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("table %v changed twice in one transaction", idents[i]))
				return
			}
		}
		cur, err := s.cat.LoadTable(ctx, idents[i])
		if err != nil {
			writeCatalogError(w, err)
			return
		}
		for _, rq := range c.Requirements {
			if err := rq.Validate(cur.Metadata()); err != nil {
				writeError(w, http.StatusConflict, "CommitFailedException", err.Error())
				return
			}
		}
	}
	f := s.nextFault()
	if f == faultRefuse {
		writeError(w, http.StatusConflict, "CommitFailedException", "injected: a concurrent commit won")
		return
	}
	if f == faultStallDropped {
		stall(r.Context())
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: the commit was dropped")
		return
	}
	var undo []undoEntry
	for i, c := range req.TableChanges {
		if i > 0 && s.takeTxFail() {
			err := s.undo(ctx, undo)
			writeError(w, http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("injected: failed inside the transaction, after %d of its %d tables (undone: %v)", i, len(req.TableChanges), err))
			return
		}
		before, err := s.cat.LoadTable(ctx, idents[i])
		var prev sql.NullString
		if err == nil {
			err = s.db.QueryRowContext(ctx, `SELECT previous_metadata_location FROM iceberg_tables WHERE catalog_name = ? AND metadata_location = ?`,
				catalogName, before.MetadataLocation()).Scan(&prev)
		}
		if err == nil {
			var res tableResult
			if res, err = s.commit(ctx, idents[i], c.Requirements, c.Updates); err == nil {
				undo = append(undo, undoEntry{from: res.MetadataLocation, to: before.MetadataLocation(), prev: prev})
			}
		}
		if err != nil {
			if uerr := s.undo(ctx, undo); uerr != nil {
				writeError(w, http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("table %v: %v; undoing the tables changed before it: %v", idents[i], err, uerr))
				return
			}
			writeCatalogError(w, fmt.Errorf("table %v: %w", idents[i], err))
			return
		}
	}
	s.mu.Lock()
	s.txns++
	s.mu.Unlock()
	switch f {
	case faultLose:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: the commit was applied, its answer lost")
		return
	case faultStallApplied:
		stall(r.Context())
	}
	w.WriteHeader(http.StatusNoContent)
}

// undoEntry puts a table changed inside a transaction back: its current
// metadata location from, the one it held before to, and the previous
// location the catalog's row held then.
type undoEntry struct {
	from, to string
	prev     sql.NullString
}

func (s *Server) takeTxFail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txFail == 0 {
		return false
	}
	s.txFail--
	return true
}

// undo puts the tables of a failed transaction back, newest first: the SQL
// catalog's row of each points at the metadata it held before again (its
// own compare-and-swap column; the row is found by the metadata location
// the transaction left). The metadata files the transaction wrote stay,
// named by no table.
func (s *Server) undo(ctx context.Context, entries []undoEntry) error {
	for _, e := range slices.Backward(entries) {
		res, err := s.db.ExecContext(ctx, `UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? WHERE catalog_name = ? AND metadata_location = ?`,
			e.to, e.prev, catalogName, e.from)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("undo %s: %d rows (%v)", e.from, n, err)
		}
	}
	return nil
}
