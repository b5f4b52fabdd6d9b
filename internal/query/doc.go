// Package query is the read path's engine: a sandboxed, in-memory DuckDB
// that answers SQL over the sink's files (design.md §11). It is the one
// package of the product that imports DuckDB (arch_test.go); the CLI, REST
// and MCP are transports over it, and its results hold standard Go types
// only, so they need no DuckDB either.
//
// # The contract
//
// Open builds the sandbox, proves it, runs the caller's setup statements
// (the table views), reads back what setup made (the allowlist below) and
// only then serves. Query runs one request:
//
//   - One statement, a query, checked before anything runs, three times:
//     DuckDB's parser alone (json_serialize_sql) counts the statements and
//     refuses any that is not a SELECT, before anything is bound (binding
//     EXPORT DATABASE creates its directory); the driver's prepare refuses
//     several statements without executing any; the prepared statement must
//     be typed SELECT. prepareQuery says which statements pass and why
//     EXPLAIN is not one. Values come as parameters.
//   - Only what a request may name (the next section), checked on the
//     whole parse tree the parser gave, before anything is bound.
//   - Reads only inside the data directories, enforced by DuckDB itself with
//     settings that are database-global and locked, so a request that gets
//     past the statement checks (or a view) still cannot leave them.
//   - Limits: a timeout that interrupts the running query, memory, spill and
//     thread limits for the database, and a row and byte cap on each result
//     that sets Truncated instead of cutting silently.
//   - Nothing a request does outlives it: it can create nothing (CREATE is
//     not a query), change no setting (the configuration is locked) and
//     write no file; the next request sees the catalog setup made.
//
// Errors: *RefusedError (ErrRefused) names the rule a request broke,
// *LimitError (ErrLimit) the limit it ran into, ErrInvalid marks SQL that
// DuckDB rejected; a transport maps the first and the last to 400.
//
// # What a request may name
//
// A statement both checks above call a SELECT can still hold a COPY:
// WITH x AS (COPY … TO '<sink>/…') SELECT 1 writes the file, since DuckDB
// allows writes inside the data directories. It can also read files around
// the views or disclose paths. So the allowlist (allowlist.go) walks every
// node of json_serialize_sql's tree — every CTE, subquery, set operation,
// join, lateral, macro argument, window, VALUES list — looks at each by its
// class or type, and refuses one it does not know (a node a later DuckDB
// adds is refused until the check knows it). A request may name:
//
//   - Tables: the views and tables setup made (a captured table as
//     schema.table, and as table where that is unambiguous; its change rows
//     as changes.schema.table), and the names its own WITH clauses define,
//     where they are in scope: a CTE hides a catalog name only inside the
//     query that defines it, and only for the CTEs after it (or itself, when
//     recursive). DuckDB's own views (duckdb_views, information_schema,
//     pg_catalog, sqlite_master: view definitions hold absolute paths) and a
//     string or name read as a file (FROM 'x.parquet', FROM 'dir/*.csv', a
//     name holding '.', '/', '*' …) are refused; a name of nothing is
//     ErrInvalid, as DuckDB would have answered, but is not bound either.
//   - Table functions: range, generate_series and unnest, which make rows
//     from their arguments, and setup's table macros. Every other one is
//     refused: the file readers (read_*, parquet_*, glob, sniff_csv), the
//     catalog and settings (duckdb_*, pragma_*), SQL in a string (query,
//     query_table, json_execute_serialized_sql), logging.
//   - Functions: every built-in scalar, aggregate and window function, by
//     its plain name, except deniedFunctions and deniedPrefixes:
//     current_setting, getenv, setseed, write_log, json_serialize_plan, the
//     pg_catalog macros over view definitions (pg_get_viewdef …), and the
//     families read_*, parquet_*, duckdb_*, pragma_* and other databases'
//     scanners. A qualified function name must be a macro setup made.
//   - SHOW, DESCRIBE and SUMMARIZE over a query or a view; SHOW TABLES and
//     SHOW ALL TABLES. Not SHOW <setting>, nor SHOW DATABASES.
//
// COPY, INSERT, UPDATE and DELETE are refused wherever the tree holds them
// (DuckDB v2.0 parses them inside WITH); ATTACH, INSTALL, LOAD, SET, RESET
// and PRAGMA cannot appear below the top, where the statement checks refuse
// them. The refusal is a *RefusedError with RuleNotAllowed whose Detail
// names what was refused ("COPY", "the table function read_parquet", "the
// function current_setting"). Open proves the check on the running DuckDB
// (a COPY inside WITH, a file reader, a file as a table) before it serves.
//
// # What each setting defends against
//
// In the order they are applied (sandboxStatements explains the order):
//
//   - autoinstall_known_extensions=false, autoload_known_extensions=false,
//     allow_community_extensions=false, allow_unsigned_extensions=false
//     (in the DSN, before any statement): a query naming an httpfs or
//     postgres function would otherwise download and load an extension,
//     code from the network that reads URLs, S3 or databases. The extensions
//     needed (parquet, json, icu, core_functions) are linked in.
//   - allow_persistent_secrets=false (DSN): no secret is read from or
//     written to ~/.duckdb/stored_secrets.
//   - temp_directory=<TempDir>/engine-*/spill: spills go to a private
//     directory outside the data, not to ./.tmp under the working
//     directory. DuckDB adds it to allowed_directories; it holds only this
//     engine's spill files.
//   - allowed_directories=[data dirs]: the only places files may be read
//     (read_parquet, read_csv, read_text, read_blob, glob, replacement scans
//     such as FROM 'x.parquet': the views' reads, since a request may name
//     none of these). Each entry ends in "/" so a sibling sharing the
//     prefix stays out, and DuckDB normalises "../" before it checks. It
//     allows writes there too: the allowlist is what refuses a COPY.
//   - max_temp_directory_size, memory_limit, threads: one request cannot
//     take the host's disk, memory or CPUs (threads are a pool the
//     database's requests share).
//   - TimeZone=UTC: timestamps render the same on every host.
//   - enable_external_access=false: turns the allowed list on, and removes
//     every other way out: files elsewhere, http:// and s3:// paths, ATTACH
//     and COPY outside the list, INSTALL and LOAD, getenv().
//   - lock_configuration=true: no SET, RESET or PRAGMA can undo any of the
//     above, on any connection.
//
// Every setting is read back on a fresh connection, and Open fails with a
// *SandboxError naming the first one not in force.
//
// # Symlinks
//
// DuckDB v2.0 resolves symlinks before it checks a path against
// allowed_directories: a link inside a data dir to a file or directory
// outside is refused (a glob that meets one fails whole; glob() lists
// around it), a link to a file inside is read. The engine resolves the data
// dirs' own paths at Open (so a data dir reached through a symlink is
// allowed as what it is), and before serving it checks canaries: it makes a
// file outside every allowed directory and, in its spill directory, a
// symlink to that file and one to its directory, and refuses to serve
// unless DuckDB refuses all three. A DuckDB that followed symlinks would
// fail Open, not serve.
//
// What the sandbox does not defend against: files placed in a data dir.
// Whoever can write there decides what is readable (a copy, or a hard link,
// which is the same file as its target and which no path check can tell
// apart), and could swap a file for a link between DuckDB's check and its
// open. The data dirs are the sink's and the cache's, written by pg-cdc
// alone.
//
// # Builds
//
// DuckDB needs cgo. With -tags nodb (and CGO_ENABLED=0) the package builds
// without it: the same API, and an Open that returns ErrNoEngine.
package query
