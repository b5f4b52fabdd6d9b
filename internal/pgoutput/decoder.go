package pgoutput

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// ErrProtocol is wrapped by every error that Decode returns for bytes or a
// message order that the pgoutput protocol does not allow, including DML for
// an undescribed relation. None of them is transient: retrying the same
// stream gives the same bytes.
var ErrProtocol = errors.New("pgoutput protocol violation")

// errParserPanic marks a panic inside pglogrepl that checkFrame should have
// prevented. It is an error rather than a crash so that a bad payload stops
// the stream with a message instead of a stack trace; FuzzDecode fails if it
// ever shows up.
var errParserPanic = errors.New("pglogrepl parser panicked")

// Decoder turns pgoutput payloads into Messages. See the package
// documentation for its invariants.
type Decoder struct {
	relations map[uint32]*Relation
	// inStream is true between StreamStart and StreamStop; pglogrepl needs it
	// to know whether an xid precedes the body.
	inStream  bool
	streamXID uint32
	// inTxn is true between Begin and Commit.
	inTxn bool
}

// NewDecoder returns a decoder with an empty relation cache, outside any
// transaction or stream.
func NewDecoder() *Decoder {
	return &Decoder{relations: map[uint32]*Relation{}}
}

// Relation returns the latest Relation message received for relID. The
// returned value is shared with the cache and must not be modified.
func (d *Decoder) Relation(relID uint32) (*Relation, bool) {
	r, ok := d.relations[relID]
	return r, ok
}

// InStream reports whether the decoder is inside a stream block, and the
// top-level xid of that block.
func (d *Decoder) InStream() (xid uint32, ok bool) { return d.streamXID, d.inStream }

// Decode decodes one XLogData payload. On error the decoder's state (stream
// and transaction nesting, relation cache) is unchanged.
func (d *Decoder) Decode(walData []byte) (Message, error) {
	if len(walData) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrProtocol)
	}
	typ := walData[0]
	if err := d.checkOrder(typ, walData); err != nil {
		return nil, fmt.Errorf("%w: %s message: %w", ErrProtocol, messageName(typ), err)
	}
	if err := checkFrame(walData, d.inStream); err != nil {
		return nil, err
	}
	var (
		msg Message
		err error
	)
	switch typ {
	case 'I', 'U', 'D':
		msg, err = d.decodeDML(walData)
	default:
		var raw pglogrepl.Message
		if raw, err = parse(walData, d.inStream); err == nil {
			msg, err = d.convert(raw)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s message: %w", ErrProtocol, messageName(typ), err)
	}
	d.advance(msg)
	return msg, nil
}

// parse calls pglogrepl.ParseV2 and turns a panic into an error; see
// errParserPanic.
func parse(data []byte, inStream bool) (m pglogrepl.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%w: %v", errParserPanic, r)
		}
	}()
	return pglogrepl.ParseV2(data, inStream)
}

// checkOrder enforces the nesting of transactions and stream blocks before
// anything is parsed, since parsing itself depends on inStream. PostgreSQL
// asserts the same nesting on its side (pgoutput: stream commit and abort
// happen outside stream blocks; a streamed transaction's block never
// interleaves with a replayed transaction).
func (d *Decoder) checkOrder(typ byte, data []byte) error {
	inside := d.inTxn || d.inStream
	switch typ {
	case 'B':
		if inside {
			return d.nestingError("Begin")
		}
	case 'C':
		if !d.inTxn {
			return errors.New("Commit without Begin")
		}
	case 'S':
		if inside {
			return d.nestingError("StreamStart")
		}
	case 'E':
		if !d.inStream {
			return errors.New("StreamStop outside a stream block")
		}
	case 'c', 'A':
		if inside {
			return d.nestingError(messageName(typ))
		}
	case 'R', 'Y', 'I', 'U', 'D', 'T', 'O':
		if !inside {
			return errors.New("outside a transaction and a stream block")
		}
	case 'M':
		// A non-transactional message is sent as soon as it is decoded,
		// outside any transaction; a transactional one belongs to one. The
		// flags byte sits after the xid inside streams, so outside both it is
		// data[1].
		if !inside && len(data) > 1 && data[1]&1 != 0 {
			return errors.New("transactional message outside a transaction and a stream block")
		}
	}
	return nil
}

func (d *Decoder) nestingError(what string) error {
	if d.inStream {
		return fmt.Errorf("%s inside the stream block of xid %d", what, d.streamXID)
	}
	return fmt.Errorf("%s inside a transaction", what)
}

// advance updates the nesting state after a message was accepted.
func (d *Decoder) advance(msg Message) {
	switch m := msg.(type) {
	case *Begin:
		d.inTxn = true
	case *Commit:
		d.inTxn = false
	case *StreamStart:
		d.inStream, d.streamXID = true, m.XID
	case *StreamStop:
		d.inStream, d.streamXID = false, 0
	case *Relation:
		d.relations[m.RelID] = m
	}
}

// convert maps pglogrepl's mixed V1/V2 types to ours. ParseV2 returns the V1
// types for Begin, Commit and Origin, and *...V2 types (V1 plus Xid) for the
// rest.
func (d *Decoder) convert(raw pglogrepl.Message) (Message, error) {
	switch m := raw.(type) {
	case *pglogrepl.BeginMessage:
		return &Begin{XID: m.Xid, FinalLSN: cdc.LSN(m.FinalLSN), CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.CommitMessage:
		return &Commit{CommitLSN: cdc.LSN(m.CommitLSN), EndLSN: cdc.LSN(m.TransactionEndLSN), CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.OriginMessage:
		return &Origin{CommitLSN: cdc.LSN(m.CommitLSN), Name: m.Name}, nil
	case *pglogrepl.RelationMessageV2:
		r := &Relation{
			RelID: m.RelationID, XID: m.Xid,
			Namespace: m.Namespace, Name: m.RelationName,
			ReplicaIdentity: m.ReplicaIdentity,
			Columns:         make([]RelationColumn, len(m.Columns)),
		}
		for i, c := range m.Columns {
			r.Columns[i] = RelationColumn{Name: c.Name, TypeOID: c.DataType, TypeMod: c.TypeModifier, Key: c.Flags&1 != 0}
		}
		return r, nil
	case *pglogrepl.TypeMessageV2:
		return &TypeMsg{XID: m.Xid, TypeOID: m.DataType, Namespace: m.Namespace, Name: m.Name}, nil
	case *pglogrepl.InsertMessageV2:
		rel, err := d.described(m.RelationID)
		if err != nil {
			return nil, err
		}
		newRow, err := datums(rel, "new", m.Tuple)
		if err != nil {
			return nil, err
		}
		return &Insert{RelID: m.RelationID, XID: m.Xid, New: newRow}, nil
	case *pglogrepl.UpdateMessageV2:
		rel, err := d.described(m.RelationID)
		if err != nil {
			return nil, err
		}
		u := &Update{RelID: m.RelationID, XID: m.Xid, OldKind: m.OldTupleType}
		if m.OldTupleType != 0 {
			if u.Old, err = datums(rel, "old", m.OldTuple); err != nil {
				return nil, err
			}
		}
		if u.New, err = datums(rel, "new", m.NewTuple); err != nil {
			return nil, err
		}
		return u, nil
	case *pglogrepl.DeleteMessageV2:
		rel, err := d.described(m.RelationID)
		if err != nil {
			return nil, err
		}
		old, err := datums(rel, "old", m.OldTuple)
		if err != nil {
			return nil, err
		}
		return &Delete{RelID: m.RelationID, XID: m.Xid, OldKind: m.OldTupleType, Old: old}, nil
	case *pglogrepl.TruncateMessageV2:
		// pgoutput sends a Relation for every truncated table first, so an
		// unknown OID here is as much a protocol error as for DML.
		for _, id := range m.RelationIDs {
			if _, err := d.described(id); err != nil {
				return nil, err
			}
		}
		return &Truncate{
			XID: m.Xid, RelIDs: m.RelationIDs,
			Cascade:         m.Option&pglogrepl.TruncateOptionCascade != 0,
			RestartIdentity: m.Option&pglogrepl.TruncateOptionRestartIdentity != 0,
		}, nil
	case *pglogrepl.LogicalDecodingMessageV2:
		// pglogrepl slices Content out of the payload; copy it so the message
		// outlives the caller's buffer.
		return &LogicalMessage{
			XID: m.Xid, Transactional: m.Transactional, LSN: cdc.LSN(m.LSN),
			Prefix: m.Prefix, Content: append([]byte(nil), m.Content...),
		}, nil
	case *pglogrepl.StreamStartMessageV2:
		return &StreamStart{XID: m.Xid, First: m.FirstSegment == 1}, nil
	case *pglogrepl.StreamStopMessageV2:
		return &StreamStop{}, nil
	case *pglogrepl.StreamCommitMessageV2:
		return &StreamCommit{XID: m.Xid, CommitLSN: cdc.LSN(m.CommitLSN), EndLSN: cdc.LSN(m.TransactionEndLSN), CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.StreamAbortMessageV2:
		return &StreamAbort{XID: m.Xid, SubXID: m.SubXid}, nil
	}
	return nil, fmt.Errorf("unexpected parsed type %T", raw)
}

func (d *Decoder) described(relID uint32) (*Relation, error) {
	rel, ok := d.relations[relID]
	if !ok {
		return nil, fmt.Errorf("DML for relation OID %d that was never described by a Relation message", relID)
	}
	return rel, nil
}

// datums converts a tuple. pglogrepl copies every text value into its own
// slice (TupleData.Decode allocates per column), so the Datums can take
// those slices without another copy and still own their bytes.
func datums(rel *Relation, which string, t *pglogrepl.TupleData) ([]cdc.Datum, error) {
	if t == nil {
		return nil, fmt.Errorf("relation %s.%s (OID %d): missing %s tuple", rel.Namespace, rel.Name, rel.RelID, which)
	}
	if len(t.Columns) != len(rel.Columns) {
		return nil, fmt.Errorf("relation %s.%s (OID %d): %s tuple has %d columns but the Relation message describes %d",
			rel.Namespace, rel.Name, rel.RelID, which, len(t.Columns), len(rel.Columns))
	}
	out := make([]cdc.Datum, len(t.Columns))
	for i, c := range t.Columns {
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			out[i] = cdc.Datum{Kind: cdc.DatumNull}
		case pglogrepl.TupleDataTypeToast:
			out[i] = cdc.Datum{Kind: cdc.DatumUnchanged}
		case pglogrepl.TupleDataTypeText:
			out[i] = cdc.Datum{Kind: cdc.DatumText, Text: c.Data}
		default:
			// checkFrame rejects 'b' and unknown kinds already; kept so that
			// conversion never depends on that.
			return nil, fmt.Errorf("relation %s.%s (OID %d): %s tuple column %q has kind %q, want text, null or unchanged",
				rel.Namespace, rel.Name, rel.RelID, which, rel.Columns[i].Name, rune(c.DataType))
		}
	}
	return out, nil
}
