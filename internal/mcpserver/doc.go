// Package mcpserver is the read path's MCP server (design.md §11.7): typed,
// read-only tools over the sink — list_tables, describe_table,
// get_schema_history, sample_rows, query, get_changes, get_manifest,
// get_freshness, get_snapshot, get_diff — and the manifest and each table's
// schema as resources, served over stdio (pg-cdc mcp) or streamable HTTP
// (pg-cdc serve, at /mcp).
//
// Invariants:
//
//   - It imports no DuckDB and not internal/query: it reaches the engine
//     through Reader, a port over internal/readpath's types that
//     *query.Reader satisfies (checked in a test).
//   - Every tool is read-only (readOnlyHint) and declares an input and an
//     output schema with concrete types, portable under the MCP
//     inspector's --strict lint (no type unions, no schema that accepts
//     anything): a row is an array of cells, a cell one of the JSON types.
//     The SDK validates every output against its schema before sending it.
//   - Results are capped (Options.MaxRows and the engine's own row and
//     byte caps); a capped result says truncated and carries a cursor that
//     reads the next part at the same version.
//   - A tool error is an isError result that says how to fix the call: the
//     closest table names, the sandbox rule that refused the SQL, the
//     window of points the history holds.
//   - Every tool call writes one audit record (access.Record, surface mcp)
//     with the principal the transport put in the context — also a call
//     whose arguments the schema rejected.
//   - Over HTTP, a request whose Host is not allowed or whose Origin is not
//     in the allow list is refused before the SDK sees it (DNS rebinding,
//     cross-origin browsers); the SDK's own loopback Host check stays on.
//     Authentication is the caller's (internal/serve wraps Handler).
package mcpserver
