//go:build !nodb

package api_test

import (
	"testing"
)

// TestQueryAuditRecord: the audit record of POST /v1/query carries its
// SQL, its parameters' count (never their values) and its outcome: the
// rule of a refusal, the error of an invalid query.
func TestQueryAuditRecord(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/v1/query", `{"sql": "SELECT id FROM public.orders WHERE status = ?", "params": ["secret-value"]}`, 200)
	if rec := e.lastRecord(); rec.SQL != "SELECT id FROM public.orders WHERE status = ?" || rec.Params != 1 || rec.Rule != "" || rec.Outcome() != "ok" {
		t.Errorf("an answered query's record: %+v", rec)
	}
	e.do("POST", "/v1/query", `{"sql": "COPY (SELECT 1) TO '/tmp/x.csv'"}`, 400)
	if rec := e.lastRecord(); rec.SQL != "COPY (SELECT 1) TO '/tmp/x.csv'" || rec.Rule == "" || rec.Outcome() != "refused" {
		t.Errorf("a refused query's record: %+v", rec)
	}
	e.do("POST", "/v1/query", `{"sql": "SELEC 1"}`, 400)
	if rec := e.lastRecord(); rec.SQL != "SELEC 1" || rec.Rule != "" || rec.Error == "" {
		t.Errorf("an invalid query's record: %+v", rec)
	}
}
