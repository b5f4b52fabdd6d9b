//go:build !nodb

package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// prepareQuery prepares sql on c and returns it only if it is one
// statement, a query, and names only what names allows; nothing of sql
// has run, nor been bound, when it refuses. Three checks, each enough to
// refuse:
//
//  1. DuckDB's parser, alone: json_serialize_sql(sql), with sql passed as a
//     parameter (never spliced into SQL), parses without binding and
//     serializes SELECT statements only. It counts the statements and
//     refuses every other kind. Then the allowlist walks the whole tree
//     the parser gave (allowlist.check): a statement DuckDB calls a SELECT
//     can still hold a COPY in its WITH clause (WITH x AS (COPY … TO
//     '<sink>/…') SELECT 1 is typed SELECT by both checks below, and
//     writes), read files through a table function or a string as a
//     table, or disclose settings. This comes first because preparing is
//     not free of effects: DuckDB v2.0 binds a statement while preparing
//     it, and binding EXPORT DATABASE creates its directory (TestRefused
//     saw it in the data dir), so no statement is prepared before the
//     parser has said it is one SELECT naming only what it may.
//  2. The driver-level Prepare. database/sql's QueryContext and
//     PrepareContext would not do: the driver's PrepareContext executes
//     every statement but the last while preparing (duckdb-go's
//     Conn.prepareStmts), so "INSTALL x; SELECT 1" would install before
//     anything could look at it. Conn.Prepare extracts the statements and
//     refuses more than one without preparing any.
//  3. The prepared statement's type must be STATEMENT_TYPE_SELECT.
//
// What runs: SELECT, WITH, FROM-first, VALUES, set operations, DESCRIBE,
// SHOW, SUMMARIZE, UNPIVOT, all of which only read. EXPLAIN is refused: it
// is not a SELECT to either check, and EXPLAIN ANALYZE executes the
// statement it explains (EXPLAIN ANALYZE CREATE TABLE creates it, EXPLAIN
// ANALYZE COPY … TO writes the file), so allowing EXPLAIN would let any
// statement through. PRAGMA is refused too, even PRAGMA version (use
// SELECT * FROM pragma_version()), as are CALL and PIVOT (it creates an
// enum type before it selects).
func prepareQuery(ctx context.Context, c *duckdb.Conn, sql string, names *allowlist) (*duckdb.Stmt, error) {
	if err := parseCheck(ctx, c, sql, names); err != nil {
		return nil, err
	}
	return prepareChecked(c, sql)
}

// prepareChecked is checks 2 and 3 of prepareQuery.
func prepareChecked(c *duckdb.Conn, sql string) (*duckdb.Stmt, error) {
	ds, err := c.Prepare(sql)
	if err != nil {
		return nil, classifyPrepare(err)
	}
	st := ds.(*duckdb.Stmt)
	t, err := st.StatementType()
	if err != nil {
		st.Close()
		return nil, classify(context.Background(), err, Limits{})
	}
	if t != duckdb.STATEMENT_TYPE_SELECT {
		st.Close()
		return nil, &RefusedError{Rule: RuleOnlyQueries, Detail: "this is " + article(statementName(t))}
	}
	return st, nil
}

// checkStatementRules proves the statement check works on this build
// before the engine serves (it depends on json_serialize_sql and
// sql_tokenize, from the linked json and autocomplete extensions, and on
// the shape of the parser's JSON: a DuckDB that stopped serializing a COPY
// inside WITH, or moved table functions, fails here). It runs before
// setup, with an allowlist of no views.
func checkStatementRules(ctx context.Context, c *sql.Conn) error {
	return c.Raw(func(dc any) error {
		dcc, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("statement check: driver connection is %T", dc)
		}
		for _, p := range []struct{ sql, rule string }{
			{"SELECT 1", ""},
			{"SELECT 1; SELECT 2", RuleOneStatement},
			{"SELECT 1; INSTALL httpfs", RuleOneStatement},
			{"COPY (SELECT 1) TO 'x.csv'", RuleOnlyQueries},
			{"SELECT * FROM range(2) r WHERE r.range = abs(-1)", ""},
			{"WITH x AS (COPY (SELECT 1) TO 'x.csv') SELECT 1", RuleNotAllowed},
			{"SELECT * FROM (SELECT 1) WHERE EXISTS (FROM read_text('x'))", RuleNotAllowed},
			{"FROM 'x.parquet'", RuleNotAllowed},
			{"SELECT current_setting('temp_directory')", RuleNotAllowed},
		} {
			st, err := prepareQuery(ctx, dcc, p.sql, &allowlist{})
			if st != nil {
				st.Close()
			}
			var re *RefusedError
			switch {
			case p.rule == "" && err != nil:
				return fmt.Errorf("statement check: %s: %w", p.sql, err)
			case p.rule != "" && (!errors.As(err, &re) || re.Rule != p.rule):
				return &SandboxError{Setting: "statement check: " + p.sql, Got: fmt.Sprint(err), Want: "refused: " + p.rule}
			}
		}
		return nil
	})
}

// serialized is the envelope json_serialize_sql returns.
type serialized struct {
	Error        bool              `json:"error"`
	ErrorType    string            `json:"error_type"`
	ErrorMessage string            `json:"error_message"`
	Statements   []json.RawMessage `json:"statements"`
}

// parseCheck is check 1 of prepareQuery: one statement, a SELECT, naming
// only what names allows.
func parseCheck(ctx context.Context, c *duckdb.Conn, sql string, names *allowlist) error {
	out, err := trustedStrings(ctx, c, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", sql)
	if err != nil {
		return fmt.Errorf("query parse check: %w", err)
	}
	if len(out) != 1 || len(out[0]) != 1 {
		return fmt.Errorf("query parse check: %d rows", len(out))
	}
	var s serialized
	if err := json.Unmarshal([]byte(out[0][0]), &s); err != nil {
		return fmt.Errorf("query parse check: %w", err)
	}
	switch {
	case s.Error && s.ErrorType == "parser":
		return fmt.Errorf("%w: %s", ErrInvalid, s.ErrorMessage)
	case s.Error:
		// "Only SELECT statements can be serialized to json!": refused.
		// Which rule, and which statement, only names the refusal: DuckDB's
		// tokenizer counts the statements and gives each first keyword.
		return notAQuery(ctx, c, sql, s.ErrorMessage)
	case len(s.Statements) == 0:
		return &RefusedError{Rule: RuleOneStatement, Detail: "the request holds none"}
	case len(s.Statements) > 1:
		return &RefusedError{Rule: RuleOneStatement, Detail: "the request holds several"}
	}
	if names == nil {
		return errors.New("query parse check: no allowlist")
	}
	return names.check(s.Statements[0])
}

// notAQuery names a request the parser would not serialize.
func notAQuery(ctx context.Context, c *duckdb.Conn, sql, parserMsg string) error {
	tokens, err := trustedStrings(ctx, c, "SELECT token_type, word FROM sql_tokenize($1)", sql)
	if err != nil {
		return &RefusedError{Rule: RuleOnlyQueries, Detail: "DuckDB's parser: " + parserMsg}
	}
	var firsts []string // the first keyword (or word) of each statement
	inStatement := false
	for _, t := range tokens {
		switch t[0] {
		case "COMMENT":
			continue
		case "TERMINATOR":
			inStatement = false
			continue
		}
		if !inStatement {
			firsts = append(firsts, strings.ToUpper(t[1]))
			inStatement = true
		}
	}
	if len(firsts) > 1 {
		return &RefusedError{Rule: RuleOneStatement, Detail: "the request holds several"}
	}
	if len(firsts) == 1 && t0IsKeyword(tokens) && !slices.Contains([]string{"SELECT", "WITH", "FROM", "VALUES", "TABLE"}, firsts[0]) {
		return &RefusedError{Rule: RuleOnlyQueries, Detail: "this is " + article(firsts[0])}
	}
	return &RefusedError{Rule: RuleOnlyQueries, Detail: "not a SELECT statement"}
}

// t0IsKeyword reports whether the first token that is not a comment is a
// keyword (so it names the statement: COPY, ATTACH, INSTALL …).
func t0IsKeyword(tokens [][]string) bool {
	for _, t := range tokens {
		if t[0] != "COMMENT" && t[0] != "TERMINATOR" {
			return t[0] == "KEYWORD"
		}
	}
	return false
}

// trustedStrings runs one fixed query of the engine's (never a request's
// text: that goes in args) on c and returns its rows as strings.
func trustedStrings(ctx context.Context, c *duckdb.Conn, query string, args ...any) ([][]string, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := c.QueryContext(ctx, query, named)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	var out [][]string
	for {
		if err := rows.Next(dest); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		row := make([]string, len(dest))
		for i, v := range dest {
			row[i], _ = v.(string)
		}
		out = append(out, row)
	}
}

// classifyPrepare names what the driver's Prepare refused. The driver's own
// errors (not DuckDB's) are unexported and recognised by their text; if a
// later driver changes the text the request is still refused, only as
// ErrInvalid instead of RuleOneStatement. (The parse check refuses those
// requests first; this is the second layer.)
func classifyPrepare(err error) error {
	var de *duckdb.Error
	if !errors.As(err, &de) {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "multi-statement"):
			return &RefusedError{Rule: RuleOneStatement, Detail: "the request holds several"}
		case strings.Contains(msg, "empty query"):
			return &RefusedError{Rule: RuleOneStatement, Detail: "the request holds none"}
		}
	}
	return classify(context.Background(), err, Limits{})
}

// classify sorts an error from DuckDB into the package's classes. ctx is
// the request's context: an interrupt it caused is a timeout (our
// deadline) or the caller's cancellation.
func classify(ctx context.Context, err error, l Limits) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, errTimedOut) {
			return &LimitError{Limit: LimitTimeout, Value: l.Timeout.String(), Err: err}
		}
		return errors.Join(ctx.Err(), err)
	}
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return err
	}
	switch de.Type {
	case duckdb.ErrorTypePermission:
		return &RefusedError{Rule: RuleSandbox, Detail: firstLine(de.Msg), Err: err}
	case duckdb.ErrorTypeOutOfMemory:
		return &LimitError{Limit: LimitMemory, Err: err}
	case duckdb.ErrorTypeInterrupt:
		// Interrupted with no context of ours done: nothing of ours does
		// that, so it is the engine's error.
		return err
	case duckdb.ErrorTypeParser, duckdb.ErrorTypeSyntax, duckdb.ErrorTypeBinder, duckdb.ErrorTypeCatalog,
		duckdb.ErrorTypeConversion, duckdb.ErrorTypeOutOfRange, duckdb.ErrorTypeMismatchType,
		duckdb.ErrorTypeInvalidType, duckdb.ErrorTypeDivideByZero, duckdb.ErrorTypeInvalidInput,
		duckdb.ErrorTypeParameterNotResolved, duckdb.ErrorTypeParameterNotAllowed, duckdb.ErrorTypeNotImplemented,
		duckdb.ErrorTypeDecimal, duckdb.ErrorTypeExpression, duckdb.ErrorTypeMissingExtension, duckdb.ErrorTypeAutoLoad,
		duckdb.ErrorTypeConstraint, duckdb.ErrorTypeDependency, duckdb.ErrorTypeSequence, duckdb.ErrorTypeIO:
		// An I/O error here is a file of the data dirs that is not what the
		// SQL says (missing, not Parquet): the request's mistake.
		return errors.Join(ErrInvalid, err)
	}
	return err
}

var errTimedOut = errors.New("request timeout")

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func article(s string) string {
	if s != "USE" && strings.ContainsRune("AEIOU", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

func statementName(t duckdb.StmtType) string {
	switch t {
	case duckdb.STATEMENT_TYPE_SELECT:
		return "SELECT"
	case duckdb.STATEMENT_TYPE_INSERT:
		return "INSERT"
	case duckdb.STATEMENT_TYPE_UPDATE:
		return "UPDATE"
	case duckdb.STATEMENT_TYPE_EXPLAIN:
		return "EXPLAIN"
	case duckdb.STATEMENT_TYPE_DELETE:
		return "DELETE"
	case duckdb.STATEMENT_TYPE_PREPARE:
		return "PREPARE"
	case duckdb.STATEMENT_TYPE_CREATE:
		return "CREATE"
	case duckdb.STATEMENT_TYPE_EXECUTE:
		return "EXECUTE"
	case duckdb.STATEMENT_TYPE_ALTER:
		return "ALTER"
	case duckdb.STATEMENT_TYPE_TRANSACTION:
		return "TRANSACTION"
	case duckdb.STATEMENT_TYPE_COPY:
		return "COPY"
	case duckdb.STATEMENT_TYPE_ANALYZE:
		return "ANALYZE"
	case duckdb.STATEMENT_TYPE_VARIABLE_SET:
		return "SET VARIABLE"
	case duckdb.STATEMENT_TYPE_CREATE_FUNC:
		return "CREATE FUNCTION"
	case duckdb.STATEMENT_TYPE_DROP:
		return "DROP"
	case duckdb.STATEMENT_TYPE_EXPORT:
		return "EXPORT"
	case duckdb.STATEMENT_TYPE_PRAGMA:
		return "PRAGMA"
	case duckdb.STATEMENT_TYPE_VACUUM:
		return "VACUUM"
	case duckdb.STATEMENT_TYPE_CALL:
		return "CALL"
	case duckdb.STATEMENT_TYPE_SET:
		return "SET"
	case duckdb.STATEMENT_TYPE_LOAD:
		return "LOAD"
	case duckdb.STATEMENT_TYPE_RELATION:
		return "RELATION"
	case duckdb.STATEMENT_TYPE_EXTENSION:
		return "EXTENSION"
	case duckdb.STATEMENT_TYPE_LOGICAL_PLAN:
		return "LOGICAL PLAN"
	case duckdb.STATEMENT_TYPE_ATTACH:
		return "ATTACH"
	case duckdb.STATEMENT_TYPE_DETACH:
		return "DETACH"
	case duckdb.STATEMENT_TYPE_MULTI:
		return "MULTI"
	}
	return "statement of type " + strconv.Itoa(int(t))
}
