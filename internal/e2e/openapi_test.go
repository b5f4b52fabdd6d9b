package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	vderrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// apiContract holds pg-cdc serve's answers to the OpenAPI document the
// server itself serves (GET /v1/openapi.json), checked by an independent
// validator (pb33f/libopenapi-validator), not by internal/api's own
// schema check: status, content type and body against the operation's
// response, and, for a well-formed request, its parameters and body too.
type apiContract struct {
	model *v3.Document

	mu      sync.Mutex // the validator is not documented as safe for concurrent use
	v       validator.Validator
	schemas schema_validation.SchemaValidator
	seen    map[string]bool // "GET /v1/tables/{table}" → answered 2xx, for the walk
	spent   time.Duration   // validating, for the test's log
	checked int
}

// loadContract fetches and parses the document serve serves; the document
// must itself be valid OpenAPI.
func loadContract(t *testing.T, base, token string) *apiContract {
	t.Helper()
	status, _, body := serveGet(t, base, token, "/v1/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d:\n%s", status, body)
	}
	doc, err := libopenapi.NewDocument(body)
	if err != nil {
		t.Fatalf("/v1/openapi.json: %v", err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("/v1/openapi.json: the model: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("/v1/openapi.json: the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("/v1/openapi.json is not a valid OpenAPI document:\n%s", describe(verrs))
	}
	return &apiContract{model: &m.Model, v: v, schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions()), seen: map[string]bool{}}
}

// check validates one exchange. whole also validates the request (its
// parameters and body); a request made wrong on purpose is checked for its
// response only.
func (c *apiContract) check(req *http.Request, reqBody []byte, resp *http.Response, body []byte, whole bool) error {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	w := *resp
	w.Body = io.NopCloser(bytes.NewReader(body))
	w.Request = r
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	var ok bool
	var errs []*vderrors.ValidationError
	if whole {
		ok, errs = c.v.ValidateHttpRequestResponse(r, &w)
	} else {
		ok, errs = c.v.ValidateHttpResponse(r, &w)
	}
	c.spent += time.Since(start)
	c.checked++
	if !ok {
		return fmt.Errorf("%s %s → %d %s: the answer disagrees with /v1/openapi.json:\n%s\n%s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, resp.Header.Get("Content-Type"), describe(errs), trimBody(body))
	}
	if resp.StatusCode < 300 {
		if pi, _ := c.pathOf(req.URL.Path); pi != "" {
			c.seen[req.Method+" "+pi] = true
		}
	}
	return nil
}

// do sends a request (authorization "" sends none), validates the answer
// and returns it.
func (c *apiContract) do(t *testing.T, method, base, authorization, path, body string, whole bool) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if err := c.check(req, []byte(body), resp, data, whole); err != nil {
		t.Error(err)
	}
	return resp, data
}

// pathOf is the document's path template that path matches.
func (c *apiContract) pathOf(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for tmpl := range c.model.Paths.PathItems.KeysFromOldest() {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		match := true
		for i := range ts {
			if ts[i] != segs[i] && !strings.HasPrefix(ts[i], "{") {
				match = false
			}
		}
		if match {
			return tmpl, true
		}
	}
	return "", false
}

// operations are the document's operations ("GET /v1/status", …).
func (c *apiContract) operations() []string {
	var out []string
	for path, item := range c.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().KeysFromOldest() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// event validates an event's data against the named schema of the
// document's components.
func (c *apiContract) event(name string, data []byte) error {
	proxy := c.model.Components.Schemas.GetOrZero(name)
	if proxy == nil {
		return fmt.Errorf("/v1/openapi.json has no schema %s", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok, errs := c.schemas.ValidateSchemaBytes(proxy.Schema(), data); !ok {
		return fmt.Errorf("an event's data disagrees with the schema %s of /v1/openapi.json:\n%s\n%s", name, describe(errs), trimBody(data))
	}
	return nil
}

func describe(errs []*vderrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s: %s\n", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "    at %s: %s\n", f.FieldPath, f.Reason)
		}
	}
	return b.String()
}

func trimBody(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// walkAPI calls every operation of the document with valid arguments on
// table (which has rows, changes and compactions behind it) and a few
// wrong requests, validating each answer, and fails if an operation of the
// document was not answered 2xx by some call. Its points are the newest
// version, by number and as the branch main: TestServeChangeFeed runs it
// last, after shortening the history to seconds, so older versions may be
// gone. (Run before the shortening with reads as of an older version, it
// made the 410 check that follows fail: the cursor the 410 named as the
// oldest served was itself answered 410, naming an older one.)
func walkAPI(t *testing.T, c *apiContract, base, token, table string) {
	t.Helper()
	start := time.Now()
	auth := "Bearer " + token
	get := func(path string, want int) []byte {
		t.Helper()
		resp, body := c.do(t, http.MethodGet, base, auth, path, "", want < 300)
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d:\n%s", path, resp.StatusCode, want, trimBody(body))
		}
		return body
	}
	post := func(path, body string, want int) {
		t.Helper()
		resp, out := c.do(t, http.MethodPost, base, auth, path, body, want < 300)
		if resp.StatusCode != want {
			t.Errorf("POST %s %s: %d, want %d:\n%s", path, body, resp.StatusCode, want, trimBody(out))
		}
	}
	var refs struct {
		Newest struct{ Version uint64 } `json:"newest"`
	}
	if err := json.Unmarshal(get("/v1/refs", http.StatusOK), &refs); err != nil || refs.Newest.Version == 0 {
		t.Fatalf("GET /v1/refs: %v (%+v)", err, refs)
	}
	newest := fmt.Sprint(refs.Newest.Version)
	older := "main"
	name := table[strings.IndexByte(table, '.')+1:]
	tbl := "/v1/tables/" + url.PathEscape(table)

	get("/v1/refs?tags=2", http.StatusOK)
	get("/v1/tables", http.StatusOK)
	get("/v1/tables?as_of="+older, http.StatusOK)
	get(tbl, http.StatusOK)
	get("/v1/tables/"+name, http.StatusOK) // the bare name: one schema has it
	var page struct {
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(get(tbl+"/rows?limit=3", http.StatusOK), &page); err != nil || page.NextCursor == nil {
		t.Errorf("rows?limit=3: no next_cursor (%v)", err)
	} else {
		get(tbl+"/rows?limit=3&cursor="+url.QueryEscape(*page.NextCursor), http.StatusOK)
	}
	get(tbl+"/rows?columns=id,v&filter=id:lt:150&filter=v:not_null&limit=5", http.StatusOK)
	get(tbl+"/rows?filter=v:is_null&as_of="+older, http.StatusOK)
	get(tbl+"/rows?filter=id:in:1|2|3", http.StatusOK)
	var changes struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(get(tbl+"/changes?limit=3", http.StatusOK), &changes); err != nil || changes.NextCursor == "" {
		t.Errorf("changes?limit=3: no next_cursor (%v)", err)
	} else {
		get(tbl+"/changes?limit=3&after="+url.QueryEscape(changes.NextCursor), http.StatusOK)
	}
	post("/v1/query", `{"sql": "SELECT id, v, n FROM `+table+` WHERE id < ? ORDER BY id LIMIT 3", "params": [100]}`, http.StatusOK)
	post("/v1/query", `{"sql": "SELECT count(*) AS n, max(v) AS v FROM `+table+`", "as_of": "`+older+`"}`, http.StatusOK)
	get("/v1/manifest", http.StatusOK)
	get("/v1/manifest?as_of="+older, http.StatusOK)
	get("/v1/diff?from="+older+"&to="+newest, http.StatusOK)
	get("/v1/diff?from="+older+"&table="+url.QueryEscape(table), http.StatusOK)
	get("/v1/snapshot", http.StatusOK)
	get("/v1/snapshot?as_of="+older+"&table="+url.QueryEscape(table), http.StatusOK)
	get("/v1/status", http.StatusOK)
	get("/v1/openapi.json", http.StatusOK)

	// Wrong on purpose: the problems are in the document too.
	get("/v1/tables/public.no_such_table", http.StatusNotFound)
	get("/v1/tables/public.no_such_table/rows", http.StatusNotFound)
	get(tbl+"/rows?filter=id:zz:1", http.StatusBadRequest)
	get(tbl+"/rows?limit=0", http.StatusBadRequest)
	get("/v1/diff", http.StatusBadRequest)
	post("/v1/query", `{"sql": "SELECT 1"`, http.StatusBadRequest)
	get("/v1/stream/changes", http.StatusBadRequest)
	get("/v1/stream/changes?table=public.no_such_table", http.StatusNotFound)

	// The streams: 200 text/event-stream, and the first event's data
	// against its schema.
	c.firstEvent(t, base, auth, "/v1/stream/status", "status", "StatusEvent")
	c.firstEvent(t, base, auth, "/v1/stream/changes?table="+url.QueryEscape(table), "change", "ChangeEvent")

	for _, op := range c.operations() {
		if !c.seen[op] {
			t.Errorf("the walk did not call %s of /v1/openapi.json successfully", op)
		}
	}
	t.Logf("openapi walk: %d operations in %s", len(c.operations()), time.Since(start).Round(time.Millisecond))
}

// firstEvent opens a stream, validates its answer (status and content
// type) and the data of its first event, of type want, against schema.
func (c *apiContract) firstEvent(t *testing.T, base, auth, path, want, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := c.check(req, nil, resp, nil, true); err != nil {
		t.Error(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d", path, resp.StatusCode)
		return
	}
	var event string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if event != want {
				t.Errorf("GET %s: the first event is %q, want %q", path, event, want)
			}
			if err := c.event(schema, []byte(strings.TrimPrefix(line, "data: "))); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
			return
		}
	}
	t.Errorf("GET %s: the stream ended without an event (%v)", path, sc.Err())
}
