//go:build !nodb

package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/api"
	sse "github.com/pg-cdc/pg-cdc/internal/events" // the package has a table named events
	"github.com/pg-cdc/pg-cdc/internal/serve"
)

// openapiDoc fetches the document the server serves.
func (e *env) openapiDoc() map[string]any {
	e.t.Helper()
	if e.doc != nil {
		return e.doc
	}
	resp, err := e.srv.Client().Get(e.srv.URL + "/v1/openapi.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &e.doc); err != nil {
		e.t.Fatalf("openapi.json: %v", err)
	}
	return e.doc
}

var methods = []string{"get", "post", "put", "patch", "delete", "head", "options"}

// TestOpenAPIMatchesRoutes: the document names exactly the /v1 surface the
// server serves — the REST routes (internal/api) and the event streams
// (internal/events), mounted as pg-cdc serve mounts them (internal/serve).
// Every route is in the document, and every operation the document names
// reaches the handler of its own pattern through the whole server, not a
// catch-all 404/405.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t)
	doc := e.openapiDoc()
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi %v", doc["openapi"])
	}
	// A route's handler writes its pattern into the audit record; the
	// server starts it as "METHOD /path", which probe clears, so that only
	// a route (never a catch-all) leaves a pattern behind.
	var endpoint string
	probe := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := access.RecordFrom(r.Context())
			rec.Endpoint = ""
			h.ServeHTTP(w, r)
			endpoint = rec.Endpoint
		})
	}
	srv, err := serve.New(serve.Options{Listen: "127.0.0.1:0", RatePerSecond: 1e6, Burst: 1 << 20,
		REST:   probe(api.New(api.Options{Reader: e.reader, Feed: e.feed})),
		Events: probe(sse.New(sse.Options{Reader: e.reader, Feed: e.feed})),
	})
	if err != nil {
		t.Fatal(err)
	}
	// served is the pattern whose handler answered method path ("" for a
	// catch-all). A stream lasts as long as its request: a cancelled one
	// answers at once.
	served := func(method, path string) string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if strings.HasPrefix(path, "/v1/stream/") {
			cancel()
		}
		endpoint = ""
		srv.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, method, path, nil))
		return endpoint
	}
	routes := append(api.Patterns(), sse.Patterns...)
	documented := map[string]bool{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		ops, _ := item.(map[string]any)
		for _, m := range methods {
			if _, ok := ops[m]; !ok {
				continue
			}
			pattern := strings.ToUpper(m) + " " + path
			documented[pattern] = true
			if got := served(strings.ToUpper(m), strings.ReplaceAll(path, "{table}", "public.orders")); got != pattern {
				t.Errorf("the document names %s; the server answers it with %q", pattern, got)
			}
		}
	}
	for _, p := range routes {
		if !documented[p] {
			t.Errorf("route %s is missing from openapi.json", p)
		}
		method, path, _ := strings.Cut(p, " ")
		if got := served(method, strings.ReplaceAll(path, "{table}", "x")); got != p {
			t.Errorf("route %s: the server answers it with %q", p, got)
		}
	}
	if len(documented) != len(routes) {
		t.Errorf("the document has %d operations, the server %d routes", len(documented), len(routes))
	}
}

// TestOpenAPIEvents: the streams' events are the document's: each event
// type its text/event-stream response lists (x-events), with data that
// matches the schema it names.
func TestOpenAPIEvents(t *testing.T) {
	e := newEnv(t)
	doc := e.openapiDoc()
	srv, err := serve.New(serve.Options{Listen: "127.0.0.1:0",
		Events: sse.New(sse.Options{Reader: e.reader, Feed: e.feed, Poll: 10 * time.Millisecond})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	for _, c := range []struct{ path, query string }{
		{"/v1/stream/status", ""},
		{"/v1/stream/changes", "?table=" + q(orders)},
	} {
		op := operation(doc, "GET", c.path)
		media := deref(doc, deref(doc, op["responses"].(map[string]any)["200"])["content"].(map[string]any)["text/event-stream"])
		types, _ := media["x-events"].(map[string]any)
		if len(types) == 0 {
			t.Errorf("GET %s: the document lists no events", c.path)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+c.path+c.query, nil)
		resp, err := hs.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("GET %s: %d %s", c.path, resp.StatusCode, ct)
		}
		// The first event (status: the newest version; changes: the
		// first of the table's change rows) is enough: every one is
		// marshalled from the same struct.
		sc := bufio.NewScanner(resp.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				event = name
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var v any
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Errorf("GET %s: event %s: %v: %s", c.path, event, err, data)
				} else if schema, ok := types[event]; !ok {
					t.Errorf("GET %s: event %q is not in the document's x-events", c.path, event)
				} else {
					for _, err := range check(doc, schema, v, "$") {
						t.Errorf("GET %s: event %s: %s", c.path, event, err)
					}
				}
				break
			}
		}
		if event == "" {
			t.Errorf("GET %s: no event (%v)", c.path, sc.Err())
		}
		cancel()
		resp.Body.Close()
	}
}

// validate checks a response against the document's schema for its
// operation and status.
func (e *env) validate(method, path string, status int, body any) {
	e.t.Helper()
	if strings.HasSuffix(path, "/openapi.json") {
		return
	}
	doc := e.openapiDoc()
	path, _, _ = strings.Cut(path, "?")
	op := operation(doc, method, path)
	if op == nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			e.t.Errorf("%s %s: no operation in the document", method, path)
		}
		return
	}
	responses, _ := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)]
	if !ok {
		resp = responses["default"]
	}
	r := deref(doc, resp)
	content, _ := r["content"].(map[string]any)
	var media map[string]any
	for _, ct := range []string{"application/json", "application/problem+json"} {
		if c, ok := content[ct].(map[string]any); ok {
			media = c
		}
	}
	if media == nil {
		e.t.Errorf("%s %s %d: the document has no schema for it", method, path, status)
		return
	}
	for _, err := range check(doc, media["schema"], body, "$") {
		e.t.Errorf("%s %s %d: %s", method, path, status, err)
	}
}

// operation finds the document's operation for a concrete path.
func operation(doc map[string]any, method, path string) map[string]any {
	paths, _ := doc["paths"].(map[string]any)
	segs := strings.Split(path, "/")
	for tmpl, item := range paths {
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
			ops, _ := item.(map[string]any)
			op, _ := ops[strings.ToLower(method)].(map[string]any)
			return op
		}
	}
	return nil
}

func deref(doc map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	for range 10 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// check is a minimal JSON Schema check: $ref, type (one or several),
// required, properties, additionalProperties, items, oneOf, enum.
func check(doc map[string]any, schema any, v any, at string) []string {
	s := deref(doc, schema)
	if s == nil {
		return nil
	}
	var errs []string
	if alts, ok := s["oneOf"].([]any); ok {
		for _, alt := range alts {
			if len(check(doc, alt, v, at)) == 0 {
				return nil
			}
		}
		return []string{at + ": matches no alternative"}
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch x := t.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, y := range x {
				types = append(types, y.(string))
			}
		}
		if !slices.Contains(types, jsonType(v)) && !(jsonType(v) == "integer" && slices.Contains(types, "number")) {
			return []string{fmt.Sprintf("%s: %s, want %v", at, jsonType(v), types)}
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", at, v, enum))
	}
	switch x := v.(type) {
	case map[string]any:
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: no required property %q", at, r))
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, pv := range x {
			if ps, ok := props[k]; ok {
				errs = append(errs, check(doc, ps, pv, at+"."+k)...)
			} else if ap, ok := s["additionalProperties"]; ok {
				if b, isBool := ap.(bool); isBool && !b {
					errs = append(errs, fmt.Sprintf("%s: property %q not in the schema", at, k))
				} else if !isBool {
					errs = append(errs, check(doc, ap, pv, at+"."+k)...)
				}
			}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, e := range x {
				errs = append(errs, check(doc, items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// TestSchemaCheck: the checker itself catches a missing property and a
// wrong type (so the validation above means something).
func TestSchemaCheck(t *testing.T) {
	doc := map[string]any{}
	schema := map[string]any{"type": "object", "required": []any{"a"}, "properties": map[string]any{"b": map[string]any{"type": "string"}}}
	if errs := check(doc, schema, map[string]any{"b": 1.0}, "$"); len(errs) != 2 {
		t.Errorf("check: %v", errs)
	}
	if errs := check(doc, schema, map[string]any{"a": nil, "b": "x"}, "$"); len(errs) != 0 {
		t.Errorf("check: %v", errs)
	}
}
