package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mcpserver"
	"github.com/pg-cdc/pg-cdc/internal/mcpserver/inspectortest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

// TestServeMCPInspector: the official MCP inspector's CLI lists the tools
// of pg-cdc's MCP server and calls every one, over stdio (the inspector
// spawns pg-cdc mcp itself) and over streamable HTTP at pg-cdc serve's
// /mcp with a bearer token (refused without one), on a sink the daemon fed
// from PostgreSQL: a snapshot, then inserts, updates, deletes and an added
// column. Every answer is checked against the source read with pgx — row
// counts, columns and keys from the catalog, sampled rows value by value,
// aggregates now and at the version before the workload, the change feed
// replayed into the table, the diff across the workload key by key — and
// against the sink's files; --strict finds no schema problem.
func TestServeMCPInspector(t *testing.T) {
	waitBound(t)
	bin := inspectortest.Ensure(t)

	token, hash := serveToken(t, "alice")
	addr := freeAddr(t)
	e := newEnv(t, envOptions{extraYAML: fmt.Sprintf("serve:\n  listen: %s\n  tokens:\n    alice: %q\n", addr, hash)})
	// Integers beyond ±2^53 (big of ids 1 and 2), NULLs, text that needs
	// quoting, a composite key and a table name with a space and capitals.
	e.exec(`CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2),
		active boolean, opened timestamptz, big bigint)`)
	e.exec(`INSERT INTO accounts
		SELECT g, 'owner ' || g || CASE WHEN g % 50 = 0 THEN ' "q", ''a'' é' ELSE '' END,
			CASE WHEN g % 17 = 0 THEN NULL ELSE (g * 7.25)::numeric(12,2) END,
			CASE WHEN g % 11 = 0 THEN NULL ELSE g % 3 <> 0 END,
			CASE WHEN g % 19 = 0 THEN NULL ELSE timestamptz '2026-01-01 00:00:00+00' + g * interval '1 hour 1.234567 second' END,
			CASE g WHEN 1 THEN 9007199254740993 WHEN 2 THEN -9007199254740995 ELSE CASE WHEN g % 13 = 0 THEN NULL ELSE g * 1000003 END END
		FROM generate_series(1, 300) g`)
	e.exec(`CREATE TABLE "Order Lines" (order_id bigint, line int, sku text NOT NULL, qty int NOT NULL,
		price numeric(10,2), note text, PRIMARY KEY (order_id, line))`)
	e.exec(`INSERT INTO "Order Lines"
		SELECT o, l, 'sku-' || (o * 10 + l), o + l, CASE WHEN l = 3 THEN NULL ELSE o * 1.5 + l END,
			CASE WHEN o % 4 = 0 THEN 'gift' END
		FROM generate_series(1, 20) o, generate_series(1, 3) l`)
	e.mustRun("init")
	d := e.start()
	e.waitCaughtUp(90 * time.Second)
	v1 := e.manifest().Version // the snapshot, before any change
	aggV1 := sourceRows(t, e, aggSQL)

	// The workload: on accounts 20 inserts, 30 balances changed, 10 deletes,
	// a column added and 10 keys given a value in it; on Order Lines,
	// in one transaction, 10 inserts, 3 updates and 3 deletes, in that
	// order in its change feed.
	e.exec(`INSERT INTO accounts SELECT g, 'new ' || g, g, true, now(), g FROM generate_series(301, 320) g`)
	e.exec(`UPDATE accounts SET balance = coalesce(balance, 0) + 0.01 WHERE id <= 30`)
	e.exec(`DELETE FROM accounts WHERE id > 290 AND id <= 300`)
	e.exec(`ALTER TABLE accounts ADD COLUMN tier text`)
	e.exec(`UPDATE accounts SET tier = 'gold' WHERE id BETWEEN 31 AND 40`)
	var lastCommit time.Time
	if err := pgx.BeginFunc(context.Background(), e.conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			`INSERT INTO "Order Lines" SELECT o, l, 'sku-' || (o * 10 + l), 1, 9.99, NULL FROM generate_series(21, 25) o, generate_series(1, 2) l`,
			`UPDATE "Order Lines" SET qty = qty + 100, note = 'changed' WHERE order_id = 1`,
			`DELETE FROM "Order Lines" WHERE order_id = 2`,
		} {
			if _, err := tx.Exec(context.Background(), q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return tx.QueryRow(context.Background(), `SELECT now()`).Scan(&lastCommit)
	}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(90 * time.Second)
	v2 := e.manifest().Version
	// The source and the sink hold still from here.
	d.stop()
	w := e.mcpWant(v1, v2, aggV1, lastCommit)

	srv := startServe(t, e, "http://"+addr)
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		checkMCP(t, inspectortest.New(t, bin, []string{binary, "mcp", "-c", e.config}), w)
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		url := "http://" + addr + "/mcp"
		checkMCP(t, inspectortest.New(t, bin, []string{url}, "--transport", "http", "--header", "Authorization: Bearer "+token), w)
		// Without the token: the inspector is refused, and /mcp says 401.
		noToken := inspectortest.New(t, bin, []string{url}, "--transport", "http")
		if stdout, stderr, code := noToken.Run("--method", "tools/list"); code == 0 {
			t.Errorf("tools/list without a token: exit 0\n%s\n%s", stdout, stderr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /mcp without a token: %d, want 401", resp.StatusCode)
		}
	})
	t.Cleanup(srv.stop) // after the subtests
}

// aggSQL reads the same in PostgreSQL and in the sink's views.
const aggSQL = `SELECT (SELECT count(*) FROM "public"."accounts") AS accounts,
	(SELECT sum(balance) FROM "public"."accounts") AS balance,
	(SELECT sum(big) FROM "public"."accounts") AS big,
	(SELECT count(*) FROM "public"."accounts" WHERE active) AS active,
	(SELECT max(opened) FROM "public"."accounts") AS opened,
	(SELECT count(*) FROM "public"."Order Lines") AS lines,
	(SELECT sum(qty * price) FROM "public"."Order Lines") AS value`

// mcpWant is what the tools must answer, read from the source and the
// sink's manifest once both hold still.
type mcpWant struct {
	v1, v2     uint64 // before and after the workload
	newest     *manifest.Manifest
	aggV1      [][]any // aggSQL on the source at v1
	aggNow     [][]any
	lastCommit time.Time // the workload's last transaction began then
	sink       string
	slot       string
	tables     map[string]*wantTable // by manifest key
}

type wantTable struct {
	columns []sourceColumn
	key     []string
	rows    [][]any // every row, in key order (sinktest.SourceRows)
}

type sourceColumn struct {
	name, pgType string
	nullable     bool
}

func (t *wantTable) names() []string {
	var out []string
	for _, c := range t.columns {
		out = append(out, c.name)
	}
	return out
}

func (e *env) mcpWant(v1, v2 uint64, aggV1 [][]any, lastCommit time.Time) *mcpWant {
	e.t.Helper()
	w := &mcpWant{v1: v1, v2: v2, newest: e.manifest(), aggV1: aggV1, aggNow: sourceRows(e.t, e, aggSQL),
		lastCommit: lastCommit, sink: e.sink, slot: e.slot, tables: map[string]*wantTable{}}
	ctx := context.Background()
	for _, name := range []string{"accounts", "Order Lines"} {
		wt := &wantTable{}
		rows, err := e.conn.Query(ctx, `SELECT c.column_name::text, format_type(a.atttypid, a.atttypmod), c.is_nullable = 'YES'
			FROM information_schema.columns c
			JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass AND a.attname = c.column_name
			WHERE c.table_schema = 'public' AND c.table_name = $1 ORDER BY c.ordinal_position`, name)
		if err != nil {
			e.t.Fatal(err)
		}
		var c sourceColumn
		if _, err := pgx.ForEachRow(rows, []any{&c.name, &c.pgType, &c.nullable}, func() error {
			wt.columns = append(wt.columns, c)
			return nil
		}); err != nil {
			e.t.Fatal(err)
		}
		rows, err = e.conn.Query(ctx, `SELECT k.column_name::text
			FROM information_schema.table_constraints tc
			JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name)
			WHERE tc.table_schema = 'public' AND tc.table_name = $1 AND tc.constraint_type = 'PRIMARY KEY'
			ORDER BY k.ordinal_position`, name)
		if err != nil {
			e.t.Fatal(err)
		}
		var k string
		if _, err := pgx.ForEachRow(rows, []any{&k}, func() error { wt.key = append(wt.key, k); return nil }); err != nil {
			e.t.Fatal(err)
		}
		wt.rows = sinktest.SourceRows(e.t, e.url, "public."+name, wt.names(), wt.key)
		w.tables["public."+name] = wt
	}
	return w
}

// sourceRows runs a query on the source.
func sourceRows(t *testing.T, e *env, sql string) [][]any {
	t.Helper()
	rows, err := e.conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// rowsOutput is a tool's rows as sent: sample_rows, query.
type rowsOutput struct {
	At        mcpserver.AtOutput       `json:"at"`
	Columns   []mcpserver.ResultColumn `json:"columns"`
	Rows      [][]json.RawMessage      `json:"rows"`
	Truncated bool                     `json:"truncated"`
}

// changesOutput is get_changes' answer as sent.
type changesOutput struct {
	Table   string                   `json:"table"`
	Columns []mcpserver.ResultColumn `json:"columns"`
	Changes []struct {
		Cursor     string            `json:"cursor"`
		Op         string            `json:"op"`
		CommitTime string            `json:"commit_time"`
		Values     []json.RawMessage `json:"values"`
	} `json:"changes"`
	NextCursor string `json:"next_cursor"`
	More       bool   `json:"more"`
	Version    uint64 `json:"version"`
}

// checkMCP lists and calls every tool through the inspector and checks the
// answers against w.
func checkMCP(t *testing.T, in *inspectortest.Inspector, w *mcpWant) {
	newest := w.newest.Version
	var names []string
	for _, tool := range in.ListTools() {
		names = append(names, tool["name"].(string))
	}
	slices.Sort(names)
	if want := []string{"describe_table", "get_changes", "get_diff", "get_freshness", "get_manifest", "get_schema_history",
		"get_snapshot", "list_tables", "query", "sample_rows"}; !slices.Equal(names, want) {
		t.Fatalf("the inspector lists %v, want %v", names, want)
	}

	var lt mcpserver.ListTablesOutput
	in.Call("list_tables", nil, &lt)
	if lt.At.Version != newest || len(lt.Tables) != len(w.tables) {
		t.Errorf("list_tables at version %d, %d tables; want %d, %d", lt.At.Version, len(lt.Tables), newest, len(w.tables))
	}
	for _, tb := range lt.Tables {
		wt := w.tables[tb.Name]
		if wt == nil {
			t.Errorf("list_tables lists %s, not captured", tb.Name)
			continue
		}
		if tb.Rows != int64(len(wt.rows)) || !slices.Equal(tb.PrimaryKey, wt.key) || tb.Snapshot != "complete" ||
			tb.View != (pgx.Identifier{tb.Schema, tb.Table}).Sanitize() {
			t.Errorf("list_tables %s: %d rows, key %v, snapshot %s, view %s; the source has %d rows, key %v",
				tb.Name, tb.Rows, tb.PrimaryKey, tb.Snapshot, tb.View, len(wt.rows), wt.key)
		}
	}

	// describe_table by the full name and by the bare one.
	for table, ask := range map[string]string{"public.accounts": "public.accounts", "public.Order Lines": "Order Lines"} {
		wt := w.tables[table]
		var dt mcpserver.DescribeTableOutput
		in.Call("describe_table", map[string]any{"table": ask}, &dt)
		var got []sourceColumn
		for _, c := range dt.Columns {
			got = append(got, sourceColumn{c.Name, c.PGType, c.Nullable})
		}
		if dt.Name != table || dt.Rows != int64(len(wt.rows)) || !slices.Equal(dt.PrimaryKey, wt.key) || !slices.Equal(got, wt.columns) {
			t.Errorf("describe_table %s: %s, %d rows, key %v, columns %v; the source has %d rows, key %v, columns %v",
				ask, dt.Name, dt.Rows, dt.PrimaryKey, got, len(wt.rows), wt.key, wt.columns)
		}
	}

	var sh mcpserver.SchemaHistoryOutput
	in.Call("get_schema_history", map[string]any{"table": "public.accounts"}, &sh)
	if len(sh.Versions) != 2 || sh.Current != 2 || len(sh.Versions[0].Columns) != 6 ||
		!slices.Equal(sh.Versions[1].Changes, []string{"column tier text added"}) {
		t.Errorf("get_schema_history = %+v, want 2 versions, the second adding tier", sh)
	}

	// sample_rows: the first n rows in key order, value by value.
	for table, n := range map[string]int{"public.accounts": 25, "public.Order Lines": 20} {
		wt := w.tables[table]
		var sr rowsOutput
		in.Call("sample_rows", map[string]any{"table": table, "n": n}, &sr)
		cols, rows := sinkRows(t, sr.Columns, sr.Rows)
		if sr.Truncated || !slices.Equal(cols, wt.names()) || len(rows) != n {
			t.Fatalf("sample_rows %s: columns %v, %d rows, truncated %v; want %v, %d", table, cols, len(rows), sr.Truncated, wt.names(), n)
		}
		for i := range rows {
			for j := range wt.key {
				if gk, wk := sinktest.Canonical(rows[i][j]), sinktest.Canonical(wt.rows[i][j]); gk != wk {
					t.Errorf("sample_rows %s row %d: key %s is %s, the source's row %d has %s", table, i, wt.key[j], gk, i, wk)
				}
			}
		}
		if !sinktest.AssertSameRows(t, wt.rows[:n], rows, cols) {
			t.Errorf("sample_rows %s differs from the source (above)", table)
		}
	}

	// query: the aggregates now and at the version before the workload.
	for _, c := range []struct {
		asOf string
		want [][]any
	}{{"", w.aggNow}, {strconv.FormatUint(w.v1, 10), w.aggV1}} {
		var q rowsOutput
		in.Call("query", map[string]any{"sql": aggSQL, "as_of": c.asOf}, &q)
		cols, rows := sinkRows(t, q.Columns, q.Rows)
		if want := map[bool]uint64{true: newest, false: w.v1}[c.asOf == ""]; q.At.Version != want {
			t.Errorf("query as of %q read version %d, want %d", c.asOf, q.At.Version, want)
		}
		if !sinktest.AssertSameRows(t, c.want, rows, cols) {
			t.Errorf("query as of %q: the aggregates differ from the source's (above)", c.asOf)
		}
	}

	checkChanges(t, in, w)

	var mo mcpserver.ManifestOutput
	in.Call("get_manifest", nil, &mo)
	var tableNames []string
	for _, tb := range mo.Tables {
		tableNames = append(tableNames, tb.Name)
		mt := w.newest.Tables[tb.Name]
		if mt == nil || tb.Snapshot != "complete" || tb.Deltas != len(mt.Deltas) || tb.Generation != mt.Generation {
			t.Errorf("get_manifest table %+v; the manifest has %+v", tb, mt)
		}
	}
	if mo.At.Version != newest || mo.Newest.Version != newest || mo.Oldest.Version > w.v1 || mo.At.EndLSN != w.newest.EndLSN.String() ||
		mo.Source.Slot != w.slot || mo.Source.Publication != "pub_"+w.slot || mo.Source.SystemIdentifier == "" || len(mo.History) == 0 ||
		!slices.Equal(tableNames, []string{"public.Order Lines", "public.accounts"}) {
		t.Errorf("get_manifest = %+v; want version %d (end %s), the oldest at most %d, slot %s", mo, newest, w.newest.EndLSN, w.v1, w.slot)
	}

	var fr mcpserver.FreshnessOutput
	in.Call("get_freshness", nil, &fr)
	fresh, err := time.Parse(time.RFC3339Nano, fr.FreshAsOf)
	now, err2 := time.Parse(time.RFC3339Nano, fr.Now)
	if err != nil || err2 != nil || fresh.Before(w.lastCommit) || fr.BehindSeconds < 0 || fr.BehindSeconds > 600 ||
		fr.EndLSN != w.newest.EndLSN.String() || fr.At.Version != newest ||
		now.Sub(fresh).Seconds()-fr.BehindSeconds > 0.001 || fr.BehindSeconds-now.Sub(fresh).Seconds() > 0.001 {
		t.Errorf("get_freshness = %+v; want fresh as of the last commit %s or later, end %s", fr, w.lastCommit, w.newest.EndLSN)
	}

	// get_snapshot: the manifest's files, each in the sink with its size.
	var sn mcpserver.SnapshotOutput
	in.Call("get_snapshot", nil, &sn)
	if sn.At.Version != newest || len(sn.Tables) != len(w.tables) {
		t.Errorf("get_snapshot at %d: %d tables", sn.At.Version, len(sn.Tables))
	}
	for _, tb := range sn.Tables {
		mt := w.newest.Tables[tb.Name]
		if mt == nil {
			t.Errorf("get_snapshot lists %s", tb.Name)
			continue
		}
		var want []string
		if mt.Base != nil {
			for _, f := range mt.Base.Files {
				want = append(want, fmt.Sprintf("base %d %s %d %d", mt.Base.Epoch, f.Path, f.Rows, f.Bytes))
			}
		}
		for _, dl := range mt.Deltas {
			for _, f := range dl.Files {
				want = append(want, fmt.Sprintf("delta %d %s %d %d", dl.Epoch, f.Path, f.Rows, f.Bytes))
			}
		}
		var got []string
		var rows, bytes int64
		for _, f := range tb.Files {
			got = append(got, fmt.Sprintf("%s %d %s %d %d", f.Kind, f.Epoch, f.Key, f.Rows, f.Bytes))
			rows, bytes = rows+f.Rows, bytes+f.Bytes
			if fi, err := os.Stat(filepath.Join(w.sink, filepath.FromSlash(f.Key))); err != nil || fi.Size() != f.Bytes {
				t.Errorf("get_snapshot %s: file %s of %d bytes: %v", tb.Name, f.Key, f.Bytes, err)
			}
		}
		if !slices.Equal(got, want) || rows != tb.Rows || bytes != tb.Bytes || tb.Generation != mt.Generation || len(got) < 2 {
			t.Errorf("get_snapshot %s: files\n%s\nrows %d bytes %d; the manifest has\n%s", tb.Name,
				strings.Join(got, "\n"), tb.Rows, tb.Bytes, strings.Join(want, "\n"))
		}
	}

	// get_diff across the workload: its keys, exactly. Changed counts the
	// keys that differ on the columns both points have (query.Diff): the
	// 30 balances, not the 10 tiers set in the column added, which the
	// schema change reports.
	var df mcpserver.DiffOutput
	in.Call("get_diff", map[string]any{"from": strconv.FormatUint(w.v1, 10), "to": strconv.FormatUint(w.v2, 10)}, &df)
	got := map[string]string{}
	for _, tb := range df.Tables {
		got[tb.Table] = fmt.Sprintf("+%d -%d ~%d %v %v", tb.Inserted, tb.Deleted, tb.Changed, tb.SchemaChanges, tb.Breaking)
	}
	want := map[string]string{
		"public.accounts":    `+20 -10 ~30 [column "tier" added (text)] []`,
		"public.Order Lines": "+10 -3 ~3 [] []",
	}
	if df.From.Version != w.v1 || df.To.Version != w.v2 || df.Verdict != "schema_change" || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("get_diff %d..%d: %d..%d %s %v, want schema_change %v", w.v1, w.v2, df.From.Version, df.To.Version, df.Verdict, got, want)
	}

	// A tool error reaches the client as one, worded to fix the call.
	if msg := in.WantError("describe_table", map[string]any{"table": "public.acounts"}); !strings.Contains(msg, "did you mean public.accounts") {
		t.Errorf("describe_table public.acounts: %q, want a suggestion", msg)
	}
}

// checkChanges follows Order Lines' change feed from its start in two
// pages: every snapshot row and every change of the workload once, in
// (lsn, seq) order, and replayed by key they give the source table.
func checkChanges(t *testing.T, in *inspectortest.Inspector, w *mcpWant) {
	const table = "public.Order Lines"
	wt := w.tables[table]
	var all []string // ops
	var last changefeed.Cursor
	state := map[string][]any{}
	after := ""
	for page := 0; page < 2; page++ {
		var ch changesOutput
		in.Call("get_changes", map[string]any{"table": table, "after": after, "limit": 50}, &ch)
		if ch.Table != table || ch.Version != w.newest.Version || ch.More != (page == 0) {
			t.Fatalf("get_changes page %d: table %s, version %d, more %v", page, ch.Table, ch.Version, ch.More)
		}
		var values [][]json.RawMessage
		for _, c := range ch.Changes {
			cur, err := changefeed.ParseCursor(c.Cursor)
			if err != nil || !last.Less(cur) {
				t.Fatalf("get_changes page %d: cursor %s (%v) after %s: not in (lsn, seq) order", page, c.Cursor, err, last)
			}
			last = cur
			all = append(all, c.Op)
			values = append(values, c.Values)
		}
		if ch.NextCursor != last.String() {
			t.Errorf("get_changes page %d: next_cursor %s, the last change's is %s", page, ch.NextCursor, last)
		}
		cols, rows := sinkRows(t, ch.Columns, values)
		if !slices.Equal(cols, wt.names()) {
			t.Fatalf("get_changes columns %v, want %v", cols, wt.names())
		}
		for i, r := range rows {
			key := sinktest.Canonical(r[0]) + "," + sinktest.Canonical(r[1])
			switch op := ch.Changes[i].Op; op {
			case "I", "U":
				state[key] = r
			case "D":
				delete(state, key)
			default:
				t.Errorf("get_changes: op %s", op)
			}
		}
		after = ch.NextCursor
	}
	// 60 snapshot rows, then the workload's transaction in its order.
	wantOps := slices.Repeat([]string{"I"}, 70)
	wantOps = append(append(wantOps, "U", "U", "U"), "D", "D", "D")
	if !slices.Equal(all, wantOps) {
		t.Errorf("get_changes ops %v, want %v", all, wantOps)
	}
	var replayed [][]any
	for _, r := range state {
		replayed = append(replayed, r)
	}
	if !sinktest.AssertSameRows(t, wt.rows, replayed, wt.names()) {
		t.Errorf("get_changes replayed differs from the source (above)")
	}
}

// sinkRows turns rows as a tool sent them into the values MergedRows holds
// (sinktest.QueryJSON), which compare with the source through Canonical.
// An integer beyond ±2^53 comes as its decimal string (the server's
// contract, as clients read numbers as float64); any other integer must be
// a number.
func sinkRows(t *testing.T, columns []mcpserver.ResultColumn, rows [][]json.RawMessage) ([]string, [][]any) {
	t.Helper()
	limit := big.NewInt(1<<53 - 1)
	fixed := make([][]json.RawMessage, len(rows))
	for i, r := range rows {
		fixed[i] = slices.Clone(r)
		for j, c := range r {
			var s string
			if j >= len(columns) || !isInteger(columns[j].Type) || !strings.HasPrefix(string(c), `"`) || json.Unmarshal(c, &s) != nil {
				continue
			}
			n, ok := new(big.Int).SetString(s, 10)
			if !ok || new(big.Int).Abs(n).Cmp(limit) <= 0 {
				t.Errorf("column %s (%s): %s, want a number, or the decimal string of one beyond ±2^53", columns[j].Name, columns[j].Type, c)
				continue
			}
			fixed[i][j] = json.RawMessage(s)
		}
	}
	doc, err := json.Marshal(map[string]any{"columns": columns, "rows": fixed})
	if err != nil {
		t.Fatal(err)
	}
	cols, out, err := sinktest.QueryJSON(doc)
	if err != nil {
		t.Fatalf("rows %s: %v", doc, err)
	}
	return cols, out
}

func isInteger(duckType string) bool {
	switch duckType {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT":
		return true
	}
	return false
}
