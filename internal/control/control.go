// Package control holds the logical decoding messages pg-cdc writes into
// its own replication stream (pg_logical_emit_message) to tell the
// streaming loop something at an exact WAL position: their prefixes, how
// their content is encoded, and how it is decoded. Writers (the backfill
// worker, pg-cdc reconcile and resnapshot, the heartbeat, pg-cdc verify)
// encode through Encode; the loop decodes every message it receives through
// Decode and dispatches on the result with one type switch
// (replicate's Service.control). No I/O.
//
// The prefixes and encodings are a wire format between pg-cdc processes of
// different versions (a reconcile request written by one binary is read by
// the running start of another): a change of encoding takes a new format
// number or a new prefix, never a new meaning of an old one.
//
// Every message but Watermark is written non-transactionally: the
// walsender sends it when it decodes it, after every transaction that
// committed before it, which is what makes its LSN a position the loop can
// act at (design.md §5, backfill placement; §8, reconcile).
package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// The prefixes of pg-cdc's messages. Every one starts with Namespace, so a
// consumer of the same WAL can tell pg-cdc's messages from its own.
const (
	Namespace = "pgcdc."

	PrefixReconcile  = "pgcdc.reconcile"  // Reconcile
	PrefixChunk      = "pgcdc.backfill"   // Chunk
	PrefixAddTable   = "pgcdc.addtable"   // AddTable
	PrefixResnapshot = "pgcdc.resnapshot" // Resnapshot
	PrefixHeartbeat  = "pgcdc.heartbeat"  // Heartbeat
	PrefixWatermark  = "pgcdc.verify"     // Watermark
	PrefixPartitions = "pgcdc.partitions" // Partitions
)

// Message is one of pg-cdc's control messages: Reconcile, Chunk, AddTable,
// Resnapshot, Heartbeat or Watermark.
type Message interface {
	// Prefix is the message's logical decoding prefix.
	Prefix() string
	// content is its encoded content.
	content() (string, error)
}

// Reconcile asks the loop to record schema changes no Relation message has
// announced yet (an ADD COLUMN with no row changed since): every table's
// live shape, read while its shape could not change (postgres.DB's
// EmitAtShapes holds ACCESS SHARE locks), so the loop receives it exactly
// where the shapes hold. Encoded as JSON with a format number.
type Reconcile struct {
	Tables []Shape
}

// Shape is one table's live columns in attnum order, described as the
// catalog describes them (types resolved, attnum, missing value).
type Shape struct {
	Schema  string       `json:"schema"`
	Name    string       `json:"name"`
	OID     uint32       `json:"oid"`
	Columns []cdc.Column `json:"columns"`
}

// ID is the shape's table.
func (s Shape) ID() cdc.TableID { return cdc.TableID{Schema: s.Schema, Name: s.Name} }

// Chunk marks the position of a backfill chunk read by the worker: the
// loop places the chunk's rows there (design.md §5). ID names the chunk
// within the writing session.
type Chunk struct{ ID string }

// AddTable hands a table found while streaming to the loop, which records
// it in the manifest before the worker publishes it. ID names the handoff.
type AddTable struct{ ID string }

// Resnapshot tells a running loop that pg-cdc resnapshot recorded a
// request for Table ("schema.table") in the manifest: re-read it.
type Resnapshot struct{ Table string }

// Partitions tells the loop that the leaf partitions of a captured
// partitioned table (Table, "schema.table") are now Leaves (their OIDs,
// sorted). Resnapshot asks for the table to be copied again into its next
// generation: a partition attached with rows, detached or dropped changed
// the table's rows with no row change in the WAL.
type Partitions struct {
	Table      string   `json:"table"`
	Leaves     []uint32 `json:"leaves"`
	Resnapshot bool     `json:"resnapshot"`
}

// Heartbeat moves an idle slot: its only meaning is its position. At is
// when it was written (RFC 3339), for a person reading the WAL.
type Heartbeat struct{ At string }

// Watermark is pg-cdc verify's transactional message, committed after its
// source snapshot: the manifest passing it means every transaction the
// snapshot saw is in the sink. Snapshot is the pg_current_snapshot() text.
type Watermark struct{ Snapshot string }

func (Reconcile) Prefix() string  { return PrefixReconcile }
func (Chunk) Prefix() string      { return PrefixChunk }
func (AddTable) Prefix() string   { return PrefixAddTable }
func (Resnapshot) Prefix() string { return PrefixResnapshot }
func (Heartbeat) Prefix() string  { return PrefixHeartbeat }
func (Watermark) Prefix() string  { return PrefixWatermark }
func (Partitions) Prefix() string { return PrefixPartitions }

// reconcileFormat is the Reconcile encoding this version writes and reads.
const reconcileFormat = 1

// reconcileWire is Reconcile as it travels.
type reconcileWire struct {
	Format int     `json:"format"`
	Tables []Shape `json:"tables"`
}

func (r Reconcile) content() (string, error) {
	tables := r.Tables
	if tables == nil {
		tables = []Shape{}
	}
	b, err := json.Marshal(reconcileWire{Format: reconcileFormat, Tables: tables})
	if err != nil {
		return "", fmt.Errorf("encode reconcile request: %w", err)
	}
	return string(b), nil
}

func (p Partitions) content() (string, error) {
	if p.Table == "" {
		return "", errors.New("encode partitions: no table")
	}
	if p.Leaves == nil {
		p.Leaves = []uint32{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode partitions of %s: %w", p.Table, err)
	}
	return string(b), nil
}

func (c Chunk) content() (string, error)      { return text("backfill chunk id", c.ID) }
func (a AddTable) content() (string, error)   { return text("new table id", a.ID) }
func (r Resnapshot) content() (string, error) { return text("resnapshot table", r.Table) }
func (h Heartbeat) content() (string, error)  { return text("heartbeat time", h.At) }
func (w Watermark) content() (string, error)  { return text("verify snapshot", w.Snapshot) }

// text checks a plain-text content: PostgreSQL stores it as text, so it
// must be valid UTF-8 without NUL, and an empty one names nothing.
func text(what, s string) (string, error) {
	if s == "" || strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		return "", fmt.Errorf("encode %s %q: want non-empty UTF-8 text without NUL", what, s)
	}
	return s, nil
}

// Encode returns the prefix and content to write for m.
func Encode(m Message) (prefix, content string, err error) {
	if m == nil {
		return "", "", errors.New("encode control message: nil")
	}
	c, err := m.content()
	if err != nil {
		return "", "", err
	}
	return m.Prefix(), c, nil
}

// ErrUnreadable is the class of a message with one of pg-cdc's prefixes
// whose content this version cannot read (another format, a corrupt
// write): the loop logs it and goes on, as it would without the message.
var ErrUnreadable = errors.New("unreadable pg-cdc control message")

// Decode reads a logical decoding message. A prefix outside pg-cdc's
// Namespace (another application's message) gives nil and no error; a
// pg-cdc prefix this version does not know gives nil and no error too (a
// newer version's message, which older loops ignore by design). A known
// prefix whose content does not decode gives an error matching
// ErrUnreadable.
func Decode(prefix string, content []byte) (Message, error) {
	switch prefix {
	case PrefixReconcile:
		var w reconcileWire
		if err := json.Unmarshal(content, &w); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnreadable, prefix, err)
		}
		if w.Format != reconcileFormat {
			return nil, fmt.Errorf("%w: %s: format %d, this version reads %d", ErrUnreadable, prefix, w.Format, reconcileFormat)
		}
		if w.Tables == nil {
			w.Tables = []Shape{}
		}
		return Reconcile{Tables: w.Tables}, nil
	case PrefixPartitions:
		var p Partitions
		if err := json.Unmarshal(content, &p); err != nil || p.Table == "" {
			return nil, fmt.Errorf("%w: %s: %q", ErrUnreadable, prefix, content)
		}
		return p, nil
	case PrefixChunk:
		return decodeText(prefix, content, func(s string) Message { return Chunk{ID: s} })
	case PrefixAddTable:
		return decodeText(prefix, content, func(s string) Message { return AddTable{ID: s} })
	case PrefixResnapshot:
		return decodeText(prefix, content, func(s string) Message { return Resnapshot{Table: s} })
	case PrefixHeartbeat:
		return decodeText(prefix, content, func(s string) Message { return Heartbeat{At: s} })
	case PrefixWatermark:
		return decodeText(prefix, content, func(s string) Message { return Watermark{Snapshot: s} })
	}
	return nil, nil
}

func decodeText(prefix string, content []byte, wrap func(string) Message) (Message, error) {
	s, err := text(prefix, string(content))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return wrap(s), nil
}
