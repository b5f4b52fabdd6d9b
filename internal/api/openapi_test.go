//go:build !nodb

package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/api"
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

// TestOpenAPIMatchesRoutes: every route the mux serves is in the document,
// and every operation the document names is served by that route (not the
// catch-all 404/405).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t)
	doc := e.openapiDoc()
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi %v", doc["openapi"])
	}
	mux, ok := api.New(api.Options{}).(*http.ServeMux)
	if !ok {
		t.Fatal("api.New is not a ServeMux")
	}
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
			req := httptest.NewRequest(strings.ToUpper(m), strings.ReplaceAll(path, "{table}", "public.orders"), nil)
			if _, got := mux.Handler(req); got != pattern {
				t.Errorf("the document names %s; the mux routes it to %q", pattern, got)
			}
		}
	}
	for _, p := range api.Patterns() {
		if !documented[p] {
			t.Errorf("route %s is missing from openapi.json", p)
		}
		req := httptest.NewRequest(strings.Fields(p)[0], strings.ReplaceAll(strings.Fields(p)[1], "{table}", "x"), nil)
		if _, got := mux.Handler(req); got != p {
			t.Errorf("route %s: the mux answers it with %q", p, got)
		}
	}
	if len(documented) != len(api.Patterns()) {
		t.Errorf("the document has %d operations, the mux %d routes", len(documented), len(api.Patterns()))
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
