//go:build !nodb

package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Engine is one sandboxed in-memory DuckDB database. It is safe for
// concurrent use: each request takes its own connection from a pool (the
// sandbox settings are the database's, so every connection has them), and
// how many requests run at once is the caller's to cap.
type Engine struct {
	// remote, when set, is the worker process the engine runs in
	// (Options.Isolation); db is then nil.
	remote *workerEngine

	db     *sql.DB
	limits Limits
	dir    string // the engine's own directory under Options.TempDir
	// names is what a request may name (allowlist.go), read after setup.
	names *allowlist

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open creates the database, applies the sandbox (sandboxStatements, in
// its order), reads every setting back and checks the canaries, and only
// then runs setup: the caller's own statements (CREATE SCHEMA, CREATE VIEW,
// CREATE MACRO … over the data dirs), trusted, run in order with the
// sandbox already in force, so a view can read only what a request could.
// The catalog setup creates is what every request sees; requests cannot
// change it. To serve other views (a new manifest version), open another
// Engine and close this one when its requests are done.
//
// Open fails, serving nothing, if an option is wrong, a setting does not
// read back as set (a *SandboxError naming it), a canary is readable, or a
// setup statement fails.
//
// With Options.Isolation other than IsolationNone, all of this happens in
// a worker process (worker.go) that confines itself first, and the Engine
// forwards each request to it.
func Open(ctx context.Context, o Options, setup []string) (*Engine, error) {
	if !ValidIsolation(o.Isolation) {
		return nil, fmt.Errorf("query options: isolation %q is none of %s, %s, %s", o.Isolation, IsolationLandlock, IsolationProcess, IsolationNone)
	}
	if o.Isolation == IsolationNone {
		return open(ctx, o, setup, nil)
	}
	w, err := openWorker(ctx, o, setup)
	if err != nil {
		return nil, err
	}
	return &Engine{remote: w, limits: w.limits}, nil
}

// Confinement says how the engine's DuckDB is held: in this process, or
// in a worker process (its pid, Landlock ABI and memory bound).
func (e *Engine) Confinement() Confinement {
	if e.remote != nil {
		return e.remote.Confinement()
	}
	return Confinement{Isolation: IsolationNone}
}

func open(ctx context.Context, o Options, setup []string, skip func(string) bool) (_ *Engine, err error) {
	limits, err := o.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := resolvePaths(o)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(p.temp, "engine-")
	if err != nil {
		return nil, fmt.Errorf("query engine directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	spill := filepath.Join(dir, "spill")
	if err := os.Mkdir(spill, 0o700); err != nil {
		return nil, fmt.Errorf("query engine directory: %w", err)
	}

	connector, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	db := sql.OpenDB(connector) // closes the connector when db closes
	defer func() {
		if err != nil {
			db.Close()
		}
	}()

	setter, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	defer setter.Close()
	if err := applySandbox(ctx, setter, sandboxStatements(spill, p.data, limits), skip); err != nil {
		return nil, err
	}
	// Verify on a second connection (the first is still held, so the pool
	// opens another): what a request's connection will see.
	checker, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	defer checker.Close()
	if err := verifySandbox(ctx, checker, spill, p.data, limits); err != nil {
		return nil, err
	}
	if err := checkCanaries(ctx, checker, dir, spill); err != nil {
		return nil, err
	}
	if err := checkStatementRules(ctx, checker); err != nil {
		return nil, err
	}
	for i, s := range setup {
		if _, err := checker.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("query setup statement %d (%.60q): %w", i+1, s, err)
		}
	}
	// What requests may name is what setup made, read back now that it
	// has run (allowlist.go).
	names, err := readAllowlist(ctx, checker)
	if err != nil {
		return nil, err
	}
	return &Engine{db: db, limits: limits, dir: dir, names: names}, nil
}

// Limits returns the limits in force (the defaults filled in).
func (e *Engine) Limits() Limits { return e.limits }

// Query runs one query under the engine's limits and returns at most
// MaxRows rows and MaxBytes bytes of it, Truncated saying whether more
// there was. sql must be exactly one statement and a query (prepareQuery);
// values go in args, bound as parameters ($1 or ?, and sql.Named for
// $name), never into the text.
//
// The whole request (waiting for a connection, preparing, running,
// fetching) is bounded by Limits.Timeout; at the deadline DuckDB is
// interrupted and Query returns a *LimitError. DuckDB computes a query's
// whole result before the first row is fetched (the driver's results are
// materialized), so the row and byte caps bound what is returned, while
// the work of computing it is bounded by the timeout, the memory limit and
// the spill cap: a caller showing the first rows of a big table should put
// a LIMIT in the SQL. Preparing (binding reads the footers of the Parquet
// files a view names) runs before the driver can interrupt; the deadline
// stops a request there only once its execution starts.
func (e *Engine) Query(ctx context.Context, sql string, args ...any) (*Result, error) {
	start := time.Now()
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if e.remote != nil {
		res, err := e.remote.query(ctx, sql, args)
		if err != nil {
			return nil, err
		}
		res.Elapsed = time.Since(start)
		return res, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.limits.Timeout, errTimedOut)
	defer cancel()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		if e.closed.Load() {
			return nil, ErrClosed
		}
		return nil, classify(ctx, fmt.Errorf("query connection: %w", err), e.limits)
	}
	defer conn.Close()
	var res *Result
	var runErr error
	rawErr := conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			runErr = fmt.Errorf("query: driver connection is %T, not *duckdb.Conn", dc)
			return nil
		}
		res, runErr = e.run(ctx, c, sql, args)
		if ctx.Err() != nil {
			// An interrupted connection is not given to the next request:
			// the pool closes it and opens a fresh one (cheap: the same
			// database).
			return driver.ErrBadConn
		}
		return nil
	})
	if runErr != nil {
		var le *LimitError
		if context.Cause(ctx) != nil && !errors.As(runErr, &le) {
			// Whatever stopped the request, the deadline (or the caller)
			// came first: say so.
			runErr = classify(ctx, runErr, e.limits)
		}
		return nil, runErr
	}
	if rawErr != nil && !errors.Is(rawErr, driver.ErrBadConn) {
		return nil, fmt.Errorf("query connection: %w", rawErr)
	}
	if res == nil {
		return nil, classify(ctx, fmt.Errorf("query interrupted: %w", ctx.Err()), e.limits)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func (e *Engine) run(ctx context.Context, c *duckdb.Conn, sql string, args []any) (*Result, error) {
	st, err := prepareQuery(ctx, c, sql, e.names)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if n := st.NumInput(); n != len(args) {
		return nil, fmt.Errorf("%w: the query has %d parameters, the request %d values", ErrInvalid, n, len(args))
	}
	named, err := bindArgs(c, args)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, named)
	if err != nil {
		return nil, classify(ctx, err, e.limits)
	}
	defer rows.Close()

	names := rows.Columns()
	res := &Result{Columns: make([]Column, len(names)), Rows: [][]any{}}
	typed, _ := rows.(driver.RowsColumnTypeDatabaseTypeName)
	for i, n := range names {
		res.Columns[i].Name = n
		if typed != nil {
			res.Columns[i].Type = typed.ColumnTypeDatabaseTypeName(i)
		}
	}
	dest := make([]driver.Value, len(names))
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return nil, classify(ctx, fmt.Errorf("query fetch: %w", err), e.limits)
		}
		if len(res.Rows) == e.limits.MaxRows {
			// The row past the cap exists: say so rather than cut silently.
			res.Truncated = true
			return res, nil
		}
		row := make([]any, len(dest))
		for i, v := range dest {
			row[i] = normalize(v, res.Columns[i].Type)
		}
		size := rowSize(row)
		if res.Bytes+size > e.limits.MaxBytes {
			res.Truncated = true
			return res, nil
		}
		res.Rows = append(res.Rows, row)
		res.Bytes += size
		if len(res.Rows)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, classify(ctx, err, e.limits)
			}
		}
	}
}

// bindArgs converts args as database/sql would: the driver's own checker
// first, the default converter for what it leaves (driver.ErrSkip).
func bindArgs(c *duckdb.Conn, args []any) ([]driver.NamedValue, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv := driver.NamedValue{Ordinal: i + 1, Value: a}
		if na, ok := a.(sql.NamedArg); ok {
			nv.Name, nv.Value = na.Name, na.Value
		}
		err := c.CheckNamedValue(&nv)
		if errors.Is(err, driver.ErrSkip) {
			nv.Value, err = driver.DefaultParameterConverter.ConvertValue(nv.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %d: %w", ErrInvalid, i+1, err)
		}
		named[i] = nv
	}
	return named, nil
}

// Close stops new requests, waits for the running ones, closes the
// database and removes the engine's directory (its spill files).
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		if e.remote != nil {
			if err := e.remote.close(); err != nil {
				e.closeErr = fmt.Errorf("close query engine: %w", err)
			}
			return
		}
		err := e.db.Close()
		if rmErr := os.RemoveAll(e.dir); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		if err != nil {
			e.closeErr = fmt.Errorf("close query engine: %w", err)
		}
	})
	return e.closeErr
}
