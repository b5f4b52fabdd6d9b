package mcpserver

// addTools registers the tools. Descriptions are for the model that
// calls them: what each answers and how it relates to the others.
func (s *Server) addTools() {
	addTool(s, "list_tables", "List tables",
		"The captured tables at a point: their SQL views (current state and change rows), live row counts, primary keys, snapshot state and freshness.",
		s.listTables)
	addTool(s, "describe_table", "Describe a table",
		"One table at a point: its columns (PostgreSQL and Parquet types, field ids) in every schema version, primary key, live row count, snapshot state, freshness, and the metadata columns of its change rows.",
		s.describeTable)
	addTool(s, "get_schema_history", "Schema history of a table",
		"A table's schema versions, oldest first, each with the epoch it applies from and what changed (columns added, dropped, renamed, retyped).",
		s.schemaHistory)
	addTool(s, "sample_rows", "Sample rows",
		"The first n rows of a table's current state at a point, in primary-key order: a quick look at the data.",
		s.sampleRows)
	addTool(s, "query", "Run SQL",
		"Runs one SELECT (DuckDB's SQL) over the sink at a point, in a sandbox. Each table is \"schema\".\"table\" (its current state) and changes.\"schema\".\"table\" (its change rows with __op, __lsn, __seq, __xid, __op_ts). The result is capped at max_rows; a truncated result has next_cursor for the next rows at the same version.",
		s.query)
	if s.o.Changes != nil {
		addTool(s, "get_changes", "Change feed",
			"A table's change rows in commit order ((__lsn, __seq)) after a cursor: pass next_cursor back as after to follow the feed. An empty after starts at the oldest change the history holds.",
			s.changes)
	}
	addTool(s, "get_manifest", "Manifest summary",
		"A summary of a manifest version: source, per-table files, rows and bytes, the newest epochs, branches, and the window of versions the history holds.",
		s.manifestSummary)
	addTool(s, "get_freshness", "Freshness",
		"How fresh the sink is: it holds every transaction the source committed up to fresh_as_of (right on an idle source too), and how far that is behind now.",
		s.freshness)
	addTool(s, "get_snapshot", "Snapshot files",
		"The Parquet files (object keys, kinds, rows and sizes) of a version, per table: what a reader outside pg-cdc reads to get the same state.",
		s.snapshot)
	addTool(s, "get_diff", "Diff two points",
		"What changed from one point to another, per table: keys inserted, deleted and changed, schema changes, and the promotion verdict (no_change, safe, schema_change, breaking).",
		s.diff)
}
