package parquetfile

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Rule names a documented way a value that its column's Parquet type cannot
// hold as-is is written instead of failing the flush (docs/types.md). Every
// value a rule touches is counted per column (Writer.Adjusted) and the first
// one of each column is reported (Schema.SetReporter).
type Rule string

const (
	// RuleInfinity: date, timestamp and timestamptz ±infinity are written
	// as the extreme INT32/INT64 values, which DuckDB reads back as
	// ±infinity. Nothing is lost; it is counted because other readers show
	// a far-future or far-past instant.
	RuleInfinity Rule = "infinity as extreme value"
	// RuleTimestampRange: a timestamp after 294247-01-10 04:00:54.775806
	// (PostgreSQL goes on to 294276) does not fit INT64 microseconds since
	// 1970 and is written as +infinity, the only value ordering after every
	// representable instant. The exact instant is lost.
	RuleTimestampRange Rule = "timestamp beyond year 294247 written as infinity"
	// RuleDecimalSpecial: numeric NaN, Infinity and -Infinity in a
	// DECIMAL(p,s) column are written as NULL. The value is lost in this
	// column; the types: override "string" keeps it.
	RuleDecimalSpecial Rule = "numeric NaN/Infinity in DECIMAL written as NULL"
	// RuleArrayFlattened: a multi-dimensional array is written as the LIST
	// of its elements in row-major order; its shape is lost.
	RuleArrayFlattened Rule = "multi-dimensional array flattened"
	// RuleArrayBounds: an array whose lower bound is not 1 is written as the
	// LIST of its elements; the bounds are lost.
	RuleArrayBounds Rule = "array lower bound not 1 dropped"
)

// ruleApplied is what a converter returns, beside its value, when it applied
// a rule. It travels on the error return so that the converter signature
// (and the hot path) stays as it is; the writer never treats it as a
// failure.
type ruleApplied struct{ rule Rule }

func (r *ruleApplied) Error() string { return string(r.rule) }

// Pre-allocated, so applying a rule does not allocate.
var (
	appliedInfinity       = &ruleApplied{RuleInfinity}
	appliedTimestampRange = &ruleApplied{RuleTimestampRange}
	appliedDecimalSpecial = &ruleApplied{RuleDecimalSpecial}
	appliedArrayFlattened = &ruleApplied{RuleArrayFlattened}
	appliedArrayBounds    = &ruleApplied{RuleArrayBounds}
)

// Adjustment describes the first value of a column that a rule changed.
type Adjustment struct {
	Table  cdc.TableID
	Column string
	PGType string
	// ParquetType is the column's type as the manifest records it.
	ParquetType string
	Rule        Rule
	// Key is the row's primary key as "col=value, ...", values truncated;
	// empty for a table without one.
	Key string
	// Value is the value's text, truncated.
	Value string
}

// String is the operator-facing description, one line.
func (a Adjustment) String() string {
	return fmt.Sprintf("table %s column %q (%s as %s): %s, first at key (%s), value %q; further values of this column are counted, not logged",
		a.Table, a.Column, a.PGType, a.ParquetType, a.Rule, a.Key, a.Value)
}

// reporter calls a function once per column for the first adjusted value.
// A schema is shared by every writer of its table (snapshot parts, epochs),
// so this is per process and column, and safe for concurrent writers.
type reporter struct {
	mu   sync.Mutex
	fn   func(Adjustment)
	seen map[string]bool
}

// SetReporter makes fn receive the first adjusted value of each column,
// once per column for the life of the schema. fn must not block for long.
func (s *Schema) SetReporter(fn func(Adjustment)) {
	s.rep.mu.Lock()
	defer s.rep.mu.Unlock()
	s.rep.fn = fn
}

func (s *Schema) report(c *column, rule Rule, key func() string, text []byte) {
	s.rep.mu.Lock()
	defer s.rep.mu.Unlock()
	if s.rep.fn == nil || s.rep.seen[c.name] {
		return
	}
	if s.rep.seen == nil {
		s.rep.seen = map[string]bool{}
	}
	s.rep.seen[c.name] = true
	s.rep.fn(Adjustment{
		Table: s.table, Column: c.name, PGType: c.pgType, ParquetType: c.parquetType,
		Rule: rule, Key: key(), Value: truncate(text),
	})
}

// adjusted is one value of the row being written that a rule changed.
type adjusted struct {
	col  int
	rule Rule
}

// countAdjusted adds the rules applied to the row just written (adj) to
// counts, per column, and reports them; values are still the caller's.
func (w *Writer) countAdjusted(counts *[]int64, adj []adjusted, values []cdc.Datum) {
	if *counts == nil {
		*counts = make([]int64, len(w.schema.cols))
	}
	for _, a := range adj {
		(*counts)[a.col]++
		c := &w.schema.cols[a.col]
		w.schema.report(c, a.rule, func() string { return w.keyText(values) }, values[a.col].Text)
	}
}

// keyText renders the row's primary key for a report.
func (w *Writer) keyText(values []cdc.Datum) string {
	var b strings.Builder
	for i := range w.schema.cols {
		if !w.schema.cols[i].key || i >= len(values) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(w.schema.cols[i].name)
		b.WriteByte('=')
		if values[i].Kind == cdc.DatumText {
			b.WriteString(truncate(values[i].Text))
		} else {
			b.WriteString("NULL")
		}
	}
	return b.String()
}

// Adjusted returns, per column name, how many values written so far a
// documented rule changed; nil when none was. A pipelined writer counts
// on its encoders: its figures are complete once it is closed.
func (w *Writer) Adjusted() map[string]int64 {
	var out map[string]int64
	add := func(counts []int64) {
		for i, n := range counts {
			if n > 0 {
				if out == nil {
					out = map[string]int64{}
				}
				out[w.schema.cols[i].name] += n
			}
		}
	}
	add(w.adjusted)
	if w.pipe != nil && w.closed {
		// The encoders counted the pipelined rows; they have ended.
		for _, e := range w.pipe.encoders {
			add(e.adjusted)
		}
	}
	return out
}
