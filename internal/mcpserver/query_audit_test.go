//go:build !nodb

package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestQueryAuditRecord: the query tool's audit record carries its SQL
// and outcome: the rule of a refusal, or none for an answered query.
func TestQueryAuditRecord(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, HTTPOptions{})
	ctx := context.Background()
	cs := hs.connect(t)
	const ok, refused = `SELECT count(*) AS n FROM "public"."orders"`, "SELECT 1; INSTALL httpfs"
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query", Arguments: map[string]any{"sql": ok}}); err != nil || res.IsError {
		t.Fatalf("query: %v %+v", err, res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query", Arguments: map[string]any{"sql": refused}}); err != nil || !res.IsError {
		t.Fatalf("refused query: %v %+v", err, res)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.audits) != 2 {
		t.Fatalf("audit = %+v", hs.audits)
	}
	if a := hs.audits[0]; a.SQL != ok || a.Rule != "" || a.Outcome() != "ok" || a.Principal.Name != "alice" {
		t.Errorf("the answered query's record: %+v", a)
	}
	if a := hs.audits[1]; a.SQL != refused || a.Rule == "" || a.Outcome() != "refused" || a.Principal.Name != "alice" {
		t.Errorf("the refused query's record: %+v", a)
	}
}
