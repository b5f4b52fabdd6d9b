package pgoutput

import (
	"encoding/binary"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// decodeDML decodes Insert, Update and Delete, nearly every message of a
// stream, without pglogrepl: pglogrepl allocates each column's descriptor
// and value separately (about twenty allocations for a row of six columns,
// a sixth of pg-cdc's CPU time while draining a backlog, issue 3). Here the
// message's values share one copy of the payload, each value's capacity
// capped at its length, so the Datums own their bytes as before and an
// append to one cannot overwrite the next.
//
// checkFrame has accepted data, so every read below is in bounds.
// TestDecodeDMLMatchesPglogrepl and FuzzDecodeDML hold the result equal to
// convert(pglogrepl.ParseV2(…)), which stays the reference.
func (d *Decoder) decodeDML(data []byte) (Message, error) {
	own := append([]byte(nil), data...)
	p := dmlReader{b: own, off: 1}
	var xid uint32
	if d.inStream {
		xid = p.u32()
	}
	relID := p.u32()
	rel, err := d.described(relID)
	if err != nil {
		return nil, err
	}
	switch own[0] {
	case 'I':
		p.off++ // 'N'
		newRow, err := p.tuple(rel, "new")
		if err != nil {
			return nil, err
		}
		return &Insert{RelID: relID, XID: xid, New: newRow}, nil
	case 'U':
		u := &Update{RelID: relID, XID: xid}
		if kind := own[p.off]; kind == 'K' || kind == 'O' {
			p.off++
			u.OldKind = kind
			if u.Old, err = p.tuple(rel, "old"); err != nil {
				return nil, err
			}
		}
		p.off++ // 'N'
		if u.New, err = p.tuple(rel, "new"); err != nil {
			return nil, err
		}
		return u, nil
	default: // 'D'
		kind := own[p.off]
		p.off++
		old, err := p.tuple(rel, "old")
		if err != nil {
			return nil, err
		}
		return &Delete{RelID: relID, XID: xid, OldKind: kind, Old: old}, nil
	}
}

type dmlReader struct {
	b   []byte
	off int
}

func (p *dmlReader) u16() uint16 {
	v := binary.BigEndian.Uint16(p.b[p.off:])
	p.off += 2
	return v
}

func (p *dmlReader) u32() uint32 {
	v := binary.BigEndian.Uint32(p.b[p.off:])
	p.off += 4
	return v
}

// tuple reads a TupleData of rel's columns; errors are those of datums.
func (p *dmlReader) tuple(rel *Relation, which string) ([]cdc.Datum, error) {
	n := int(p.u16())
	if n != len(rel.Columns) {
		return nil, fmt.Errorf("relation %s.%s (OID %d): %s tuple has %d columns but the Relation message describes %d",
			rel.Namespace, rel.Name, rel.RelID, which, n, len(rel.Columns))
	}
	out := make([]cdc.Datum, n)
	for i := range out {
		kind := p.b[p.off]
		p.off++
		switch kind {
		case 'n':
			out[i] = cdc.Datum{Kind: cdc.DatumNull}
		case 'u':
			out[i] = cdc.Datum{Kind: cdc.DatumUnchanged}
		case 't':
			l := int(p.u32())
			out[i] = cdc.Datum{Kind: cdc.DatumText, Text: p.b[p.off : p.off+l : p.off+l]}
			p.off += l
		default:
			// checkFrame rejects 'b' and unknown kinds already.
			return nil, fmt.Errorf("relation %s.%s (OID %d): %s tuple column %q has kind %q, want text, null or unchanged",
				rel.Namespace, rel.Name, rel.RelID, which, rel.Columns[i].Name, rune(kind))
		}
	}
	return out, nil
}
