package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// readBack is the demo's last step: the data read back through pg-cdc
// query, which needs only the sink — the tables with their live rows
// (checked against the source), a current-state query, and the moment the
// workload noted, as of its time (checked against what the source held
// then).
func (d *demo) readBack(ctx context.Context, stats *workStats) error {
	if err := d.runPGCDC(ctx, "query", "--tables"); err != nil {
		return err
	}
	var problems []string
	tables, err := d.queryJSON(ctx, "--tables")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return fmt.Errorf("connect to shop: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, t := range tables.Tables {
		schema, name, _ := strings.Cut(t.Name, ".")
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, name}.Sanitize()).Scan(&n); err != nil {
			return fmt.Errorf("count %s at the source: %w", t.Name, err)
		}
		if t.Rows != n {
			problems = append(problems, fmt.Sprintf("pg-cdc query --tables says %s has %d rows, the source %d", t.Name, t.Rows, n))
		}
	}
	if len(tables.Tables) == 0 {
		problems = append(problems, "pg-cdc query --tables lists no table")
	}

	if err := d.runPGCDC(ctx, "query", "SELECT id, name, balance FROM customers ORDER BY balance DESC, id LIMIT 5"); err != nil {
		return err
	}

	mark := stats.mark
	if mark.at.IsZero() {
		return fmt.Errorf("the workload noted no moment to travel back to (a run shorter than its steps?)")
	}
	at := mark.at.UTC().Format(time.RFC3339Nano)
	const asOf = "SELECT (SELECT count(*) FROM orders) AS orders, (SELECT sum(balance) FROM customers) AS balances"
	if err := d.runPGCDC(ctx, "query", "--as-of", at, asOf); err != nil {
		return err
	}
	res, err := d.queryJSON(ctx, "--as-of", at, "--format", "json", "SELECT (SELECT count(*) FROM orders)::VARCHAR, (SELECT coalesce(sum(balance), 0) FROM customers)::VARCHAR")
	if err != nil {
		return err
	}
	var orders, balances string
	if len(res.Rows) == 1 && len(res.Rows[0]) == 2 {
		orders, _ = res.Rows[0][0].(string)
		balances, _ = res.Rows[0][1].(string)
	}
	if orders != fmt.Sprint(mark.orders) || balances != mark.customerTotals {
		problems = append(problems, fmt.Sprintf("as of %s pg-cdc query says %s orders and balances summing to %s; the source had %d and %s",
			at, orders, balances, mark.orders, mark.customerTotals))
	}

	d.printf("\nChecks:\n")
	if len(problems) == 0 {
		d.printf("  ✓ pg-cdc query --tables counts the rows the source has, for every table\n")
		d.printf("  ✓ as of %s (the moment the workload noted) the sink holds what the source held then: %d orders, balances summing to %s\n",
			at, mark.orders, mark.customerTotals)
	}
	for _, p := range problems {
		d.printf("  ✗ %s\n", p)
	}
	q := fmt.Sprintf("%s -c %s", d.rel(d.bin), d.rel(d.config))
	d.printf("\nTry:\n")
	d.printf("  %s query \"SELECT __op, count(*) AS n FROM changes.public.orders GROUP BY __op ORDER BY __op\"   (the change rows)\n", q)
	d.printf("  %s refs                          (the branches, the tags of the newest flushes, the history's window)\n", q)
	d.printf("  %s diff epoch:1 main             (what changed since the first flush, per table)\n", q)
	d.printf("  %s query --as-of epoch:1 --format csv \"SELECT * FROM customers ORDER BY id LIMIT 3\"\n", q)
	if len(problems) > 0 {
		return fmt.Errorf("pg-cdc query does not match the source (%d problems above); this is a pg-cdc bug, please report it with %s", len(problems), d.rel(d.dir))
	}
	return nil
}

// queryOutput is what the demo reads of pg-cdc query's JSON outputs.
type queryOutput struct {
	Tables []struct {
		Name string `json:"name"`
		Rows int64  `json:"rows"`
	} `json:"tables"`
	Rows [][]any `json:"rows"`
}

// queryJSON runs pg-cdc query with args (and --format json) and decodes
// its output.
func (d *demo) queryJSON(ctx context.Context, args ...string) (*queryOutput, error) {
	full := append([]string{"-c", d.config, "query"}, args...)
	if !strings.Contains(strings.Join(args, " "), "--format") {
		full = append(full, "--format", "json")
	}
	out, code, err := runStdout(ctx, d.bin, full...)
	if err != nil || code != 0 {
		return nil, fmt.Errorf("pg-cdc query %s: exit %d, %v\n%s", strings.Join(args, " "), code, err, out)
	}
	var q queryOutput
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		return nil, fmt.Errorf("pg-cdc query %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return &q, nil
}
