// Package gluetest is an AWS Glue Data Catalog for tests: a loopback
// httptest server speaking Glue's wire protocol (AWS JSON 1.1: every call
// a POST / whose X-Amz-Target header is AWSGlue.<Operation>, bodies
// application/x-amz-json-1.1) over an in-memory store of databases and
// tables, for the operations iceberg-go's Glue catalog (catalog/glue)
// calls: GetDatabase, GetDatabases, CreateDatabase, UpdateDatabase,
// DeleteDatabase, GetTable, GetTables, CreateTable, UpdateTable,
// DeleteTable. Any other operation is answered 400
// UnknownOperationException naming it, so a call the fake lacks shows.
//
// It keeps what Glue guarantees and nothing more: names are folded to
// lower case, each table has a VersionId that every UpdateTable advances,
// and an UpdateTable carrying another VersionId than the table's is
// refused with a ConcurrentModificationException (optimistic locking, one
// table at a time; Glue has no multi-table transaction). Errors are
// answered as Glue does: {"__type": "<Exception>", "message": "…"}, HTTP
// 400 (500 for InternalServiceException).
//
// Every request is recorded (Requests) with its decoded body, and faults
// can be armed for the next UpdateTable calls (ConflictNextUpdates,
// LoseNextUpdate).
package gluetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// contentType is AWS JSON 1.1's.
const contentType = "application/x-amz-json-1.1"

// Request is one call the server received.
type Request struct {
	// Op is the operation (the X-Amz-Target after "AWSGlue.").
	Op string
	// Body is the request's JSON body, decoded.
	Body map[string]any
	// AccessKey is the access key id the request was signed with (from
	// its SigV4 Authorization header), "" when unsigned.
	AccessKey string
}

// Server is an in-memory Glue Data Catalog.
type Server struct {
	// URL is the endpoint (glue.endpoint).
	URL string

	srv *httptest.Server

	mu        sync.Mutex
	dbs       map[string]*database
	requests  []Request
	conflicts int // UpdateTable calls to refuse with a conflict, unapplied
	lose      int // UpdateTable calls to apply and answer 500
}

type database struct {
	input   map[string]any // the DatabaseInput as last written
	created time.Time
	tables  map[string]*glueTable
}

type glueTable struct {
	input            map[string]any // the TableInput as last written
	version          int
	created, updated time.Time
}

// New starts a server; it is closed when t's test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{dbs: map[string]*database{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Close stops the server: Glue is down.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the calls received so far, in order; with ops given,
// only the calls of those operations.
func (s *Server) Requests(ops ...string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if len(ops) == 0 || slices.Contains(ops, r.Op) {
			out = append(out, r)
		}
	}
	return out
}

// ConflictNextUpdates makes the next n UpdateTable calls fail with a
// ConcurrentModificationException, unapplied: as if another writer had
// updated the table between the caller's GetTable and its UpdateTable.
func (s *Server) ConflictNextUpdates(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = n
}

// LoseNextUpdate makes the next UpdateTable be applied and then answered
// 500 InternalServiceException: the answer is lost on the way back.
func (s *Server) LoseNextUpdate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = 1
}

// VersionID is the table's current VersionId ("" when it does not exist).
func (s *Server) VersionID(database, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	db := s.dbs[strings.ToLower(database)]
	if db == nil || db.tables[strings.ToLower(name)] == nil {
		return ""
	}
	return strconv.Itoa(db.tables[strings.ToLower(name)].version)
}

// Databases are the databases' names, sorted.
func (s *Server) Databases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.dbs))
}

// glueError is an error answer.
type glueError struct {
	status int
	kind   string
	msg    string
}

func notFound(format string, a ...any) *glueError {
	return &glueError{http.StatusBadRequest, "EntityNotFoundException", fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *glueError {
	return &glueError{http.StatusBadRequest, "InvalidInputException", fmt.Sprintf(format, a...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AWSGlue.")
	if r.Method != http.MethodPost || r.URL.Path != "/" || !ok {
		reply(w, nil, &glueError{http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("gluetest: %s %s with X-Amz-Target %q is no Glue call", r.Method, r.URL.Path, target)})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		reply(w, nil, &glueError{http.StatusBadRequest, "SerializationException", fmt.Sprintf("gluetest: content type %q, want %s", ct, contentType)})
		return
	}
	body := map[string]any{}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		reply(w, nil, &glueError{http.StatusBadRequest, "SerializationException", "gluetest: " + err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Op: op, Body: body, AccessKey: accessKey(r.Header.Get("Authorization"))})
	var out any
	var gerr *glueError
	switch op {
	case "GetDatabase":
		out, gerr = s.getDatabase(body)
	case "GetDatabases":
		out, gerr = s.getDatabases()
	case "CreateDatabase":
		out, gerr = s.createDatabase(body)
	case "UpdateDatabase":
		out, gerr = s.updateDatabase(body)
	case "DeleteDatabase":
		out, gerr = s.deleteDatabase(body)
	case "GetTable":
		out, gerr = s.getTable(body)
	case "GetTables":
		out, gerr = s.getTables(body)
	case "CreateTable":
		out, gerr = s.createTable(body)
	case "UpdateTable":
		out, gerr = s.updateTable(body)
	case "DeleteTable":
		out, gerr = s.deleteTable(body)
	default:
		gerr = &glueError{http.StatusBadRequest, "UnknownOperationException", "gluetest: operation AWSGlue." + op + " is not implemented"}
	}
	reply(w, out, gerr)
}

func reply(w http.ResponseWriter, out any, gerr *glueError) {
	w.Header().Set("Content-Type", contentType)
	if gerr != nil {
		w.Header().Set("X-Amzn-ErrorType", gerr.kind)
		w.WriteHeader(gerr.status)
		json.NewEncoder(w).Encode(map[string]string{"__type": gerr.kind, "message": gerr.msg})
		return
	}
	if out == nil {
		out = map[string]any{}
	}
	json.NewEncoder(w).Encode(out)
}

// accessKey is the access key id of a SigV4 Authorization header.
func accessKey(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

func obj(m map[string]any, k string) map[string]any {
	v, _ := m[k].(map[string]any)
	return v
}

// epoch is a time as AWS JSON 1.1 sends it: seconds since 1970.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func (s *Server) db(name string) (*database, *glueError) {
	db := s.dbs[strings.ToLower(name)]
	if db == nil {
		return nil, notFound("Database %s not found.", name)
	}
	return db, nil
}

func (s *Server) databaseOut(name string, db *database, catalogID string) map[string]any {
	out := maps.Clone(db.input)
	out["Name"] = name
	out["CreateTime"] = epoch(db.created)
	if catalogID != "" {
		out["CatalogId"] = catalogID
	}
	return out
}

func (s *Server) getDatabase(body map[string]any) (any, *glueError) {
	name := strings.ToLower(str(body, "Name"))
	db, gerr := s.db(name)
	if gerr != nil {
		return nil, gerr
	}
	return map[string]any{"Database": s.databaseOut(name, db, str(body, "CatalogId"))}, nil
}

func (s *Server) getDatabases() (any, *glueError) {
	list := []any{}
	for _, name := range slices.Sorted(maps.Keys(s.dbs)) {
		list = append(list, s.databaseOut(name, s.dbs[name], ""))
	}
	return map[string]any{"DatabaseList": list}, nil
}

func (s *Server) createDatabase(body map[string]any) (any, *glueError) {
	in := obj(body, "DatabaseInput")
	name := strings.ToLower(str(in, "Name"))
	if name == "" {
		return nil, invalid("DatabaseInput.Name is required")
	}
	if s.dbs[name] != nil {
		return nil, &glueError{http.StatusBadRequest, "AlreadyExistsException", "Database already exists."}
	}
	s.dbs[name] = &database{input: in, created: time.Now(), tables: map[string]*glueTable{}}
	return nil, nil
}

func (s *Server) updateDatabase(body map[string]any) (any, *glueError) {
	db, gerr := s.db(str(body, "Name"))
	if gerr != nil {
		return nil, gerr
	}
	db.input = obj(body, "DatabaseInput")
	return nil, nil
}

func (s *Server) deleteDatabase(body map[string]any) (any, *glueError) {
	name := strings.ToLower(str(body, "Name"))
	if _, gerr := s.db(name); gerr != nil {
		return nil, gerr
	}
	delete(s.dbs, name) // Glue deletes the tables with it
	return nil, nil
}

func (s *Server) table(dbName, name string) (*database, *glueTable, *glueError) {
	db, gerr := s.db(dbName)
	if gerr != nil {
		return nil, nil, gerr
	}
	t := db.tables[strings.ToLower(name)]
	if t == nil {
		return nil, nil, notFound("Table %s not found.", name)
	}
	return db, t, nil
}

func tableOut(dbName, name string, t *glueTable, catalogID string) map[string]any {
	out := maps.Clone(t.input)
	out["Name"] = strings.ToLower(name)
	out["DatabaseName"] = strings.ToLower(dbName)
	out["VersionId"] = strconv.Itoa(t.version)
	out["CreateTime"] = epoch(t.created)
	out["UpdateTime"] = epoch(t.updated)
	if catalogID != "" {
		out["CatalogId"] = catalogID
	}
	return out
}

func (s *Server) getTable(body map[string]any) (any, *glueError) {
	_, t, gerr := s.table(str(body, "DatabaseName"), str(body, "Name"))
	if gerr != nil {
		return nil, gerr
	}
	return map[string]any{"Table": tableOut(str(body, "DatabaseName"), str(body, "Name"), t, str(body, "CatalogId"))}, nil
}

func (s *Server) getTables(body map[string]any) (any, *glueError) {
	dbName := str(body, "DatabaseName")
	db, gerr := s.db(dbName)
	if gerr != nil {
		return nil, gerr
	}
	list := []any{}
	for _, name := range slices.Sorted(maps.Keys(db.tables)) {
		list = append(list, tableOut(dbName, name, db.tables[name], str(body, "CatalogId")))
	}
	if n, ok := body["MaxResults"].(float64); ok && int(n) < len(list) {
		list = list[:int(n)] // no NextToken: a caller asking for a page only wants to know whether there are any
	}
	return map[string]any{"TableList": list}, nil
}

func (s *Server) createTable(body map[string]any) (any, *glueError) {
	db, gerr := s.db(str(body, "DatabaseName"))
	if gerr != nil {
		return nil, gerr
	}
	in := obj(body, "TableInput")
	name := strings.ToLower(str(in, "Name"))
	if name == "" {
		return nil, invalid("TableInput.Name is required")
	}
	if db.tables[name] != nil {
		return nil, &glueError{http.StatusBadRequest, "AlreadyExistsException", "Table already exists."}
	}
	now := time.Now()
	db.tables[name] = &glueTable{input: in, version: 1, created: now, updated: now}
	return nil, nil
}

func (s *Server) updateTable(body map[string]any) (any, *glueError) {
	in := obj(body, "TableInput")
	_, t, gerr := s.table(str(body, "DatabaseName"), str(in, "Name"))
	if gerr != nil {
		return nil, gerr
	}
	if s.conflicts > 0 {
		s.conflicts--
		return nil, &glueError{http.StatusBadRequest, "ConcurrentModificationException", "gluetest: an injected conflict: the table was updated concurrently"}
	}
	if v, ok := body["VersionId"].(string); ok && v != strconv.Itoa(t.version) {
		return nil, &glueError{http.StatusBadRequest, "ConcurrentModificationException",
			fmt.Sprintf("Update table failed due to concurrent modifications: VersionId %s, the table's is %d", v, t.version)}
	}
	t.input, t.updated = in, time.Now()
	t.version++
	if s.lose > 0 {
		s.lose--
		return nil, &glueError{http.StatusInternalServerError, "InternalServiceException", "gluetest: an injected failure after the update was applied"}
	}
	return nil, nil
}

func (s *Server) deleteTable(body map[string]any) (any, *glueError) {
	db, _, gerr := s.table(str(body, "DatabaseName"), str(body, "Name"))
	if gerr != nil {
		return nil, gerr
	}
	delete(db.tables, strings.ToLower(str(body, "Name")))
	return nil, nil
}
