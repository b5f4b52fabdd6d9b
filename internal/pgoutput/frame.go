package pgoutput

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// checkFrame walks a payload the way the protocol lays it out and reports the
// first field that is missing, malformed or followed by stray bytes. It
// extracts nothing: its only job is to guarantee that pglogrepl.ParseV2,
// which trusts lengths and counts, sees a well-formed message. It must
// accept exactly the messages ParseV2 can decode; FuzzDecode checks that a
// payload accepted here never makes ParseV2 panic.
//
// data is non-empty (Decode checks); data[0] is the message type.
func checkFrame(data []byte, inStream bool) error {
	f := &frame{b: data, off: 1}
	// Messages that may belong to a streamed transaction carry its xid first
	// when they are inside a stream block.
	streamXID := func() {
		if inStream {
			f.fixed(4, "xid")
		}
	}
	switch data[0] {
	case 'B':
		f.fixed(8+8+4, "final LSN, commit time and xid")
	case 'C':
		f.fixed(1+8+8+8, "flags, commit LSN, end LSN and commit time")
	case 'O':
		f.fixed(8, "origin commit LSN")
		f.cstring("origin name")
	case 'R':
		streamXID()
		f.fixed(4, "relation OID")
		f.cstring("namespace")
		f.cstring("relation name")
		f.fixed(1, "replica identity")
		n := f.u16("column count")
		for i := 0; i < int(n) && f.err == nil; i++ {
			f.fixed(1, "column flags")
			f.cstring("column name")
			f.fixed(4+4, "column type OID and modifier")
		}
	case 'Y':
		streamXID()
		f.fixed(4, "type OID")
		f.cstring("type namespace")
		f.cstring("type name")
	case 'I':
		streamXID()
		f.fixed(4, "relation OID")
		f.expect("new tuple marker", 'N')
		f.tuple("new tuple")
	case 'U':
		streamXID()
		f.fixed(4, "relation OID")
		switch kind := f.u8("tuple marker"); kind {
		case 'K', 'O':
			f.tuple("old tuple")
			f.expect("new tuple marker", 'N')
			f.tuple("new tuple")
		case 'N':
			f.tuple("new tuple")
		default:
			f.fail("tuple marker %q: want 'K', 'O' or 'N'", rune(kind))
		}
	case 'D':
		streamXID()
		f.fixed(4, "relation OID")
		switch kind := f.u8("old tuple marker"); kind {
		case 'K', 'O':
			f.tuple("old tuple")
		default:
			f.fail("old tuple marker %q: want 'K' or 'O'", rune(kind))
		}
	case 'T':
		streamXID()
		n := f.u32("relation count")
		f.fixed(1, "options")
		// The count is checked against the bytes present before anything
		// loops over it: ParseV2 allocates n OIDs up front.
		if f.err == nil && uint64(n)*4 != uint64(len(f.b)-f.off) {
			f.fail("relation count %d does not match the %d bytes of OIDs", n, len(f.b)-f.off)
		}
		f.off = len(f.b)
	case 'M':
		streamXID()
		f.fixed(1+8, "flags and LSN")
		f.cstring("prefix")
		n := f.u32("content length")
		f.bytes(n, "content")
	case 'S':
		f.fixed(4+1, "xid and first-segment flag")
	case 'E':
		// StreamStop has no body.
	case 'c':
		f.fixed(4+1+8+8+8, "xid, flags, commit LSN, end LSN and commit time")
	case 'A':
		f.fixed(4+4, "xid and subtransaction xid")
	default:
		return fmt.Errorf("%w: unknown message type %s", ErrProtocol, typeByte(data[0]))
	}
	if f.err == nil && f.off != len(f.b) {
		f.fail("%d trailing bytes", len(f.b)-f.off)
	}
	if f.err != nil {
		return fmt.Errorf("%w: %s message: %w", ErrProtocol, messageName(data[0]), f.err)
	}
	return nil
}

// frame is a cursor over a payload; the first failure sticks and later reads
// are no-ops, so the walk above needs no error check after every field.
type frame struct {
	b   []byte
	off int
	err error
	// in prefixes the field names of failures inside a tuple ("new
	// tuple"). The name is joined only when a check fails: this walk runs
	// for every column of every row, and building the names up front was
	// a tenth of pg-cdc's CPU time (issue 3's profile).
	in string
}

func (f *frame) label(what string) string {
	if f.in == "" {
		return what
	}
	return f.in + " " + what
}

func (f *frame) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf(format, args...)
	}
}

func (f *frame) has(n uint64, what string) bool {
	if f.err != nil {
		return false
	}
	if uint64(len(f.b)-f.off) < n {
		f.fail("%s: need %d bytes at offset %d, have %d", f.label(what), n, f.off, len(f.b)-f.off)
		return false
	}
	return true
}

func (f *frame) fixed(n int, what string) {
	if f.has(uint64(n), what) {
		f.off += n
	}
}

func (f *frame) bytes(n uint32, what string) {
	if f.has(uint64(n), what) {
		f.off += int(n)
	}
}

func (f *frame) u8(what string) byte {
	if !f.has(1, what) {
		return 0
	}
	v := f.b[f.off]
	f.off++
	return v
}

func (f *frame) u16(what string) uint16 {
	if !f.has(2, what) {
		return 0
	}
	v := binary.BigEndian.Uint16(f.b[f.off:])
	f.off += 2
	return v
}

func (f *frame) u32(what string) uint32 {
	if !f.has(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(f.b[f.off:])
	f.off += 4
	return v
}

func (f *frame) expect(what string, want byte) {
	if got := f.u8(what); f.err == nil && got != want {
		f.fail("%s %q: want %q", f.label(what), rune(got), rune(want))
	}
}

func (f *frame) cstring(what string) {
	if f.err != nil {
		return
	}
	i := bytes.IndexByte(f.b[f.off:], 0)
	if i < 0 {
		f.fail("%s: no terminating NUL", f.label(what))
		return
	}
	f.off += i + 1
}

// tuple checks a TupleData: Int16 column count, then per column a kind byte
// and, for text, an Int32 length and that many bytes.
func (f *frame) tuple(what string) {
	f.in = what
	n := f.u16("column count")
	for i := 0; i < int(n) && f.err == nil; i++ {
		switch kind := f.u8("column kind"); kind {
		case 'n', 'u':
		case 't':
			l := f.u32("column length")
			f.bytes(l, "column value")
		case 'b':
			// Binary values appear only when the binary option is requested,
			// which pg-cdc never does; every consumer expects text.
			f.fail("%s column %d: binary value, but binary mode was not requested", what, i)
		default:
			f.fail("%s column %d: unknown kind %q", what, i, rune(kind))
		}
	}
	f.in = ""
}

// typeByte prints a message type byte readably even when it is not a
// printable character.
func typeByte(b byte) string { return fmt.Sprintf("%q (0x%02x)", rune(b), b) }

func messageName(b byte) string {
	switch b {
	case 'B':
		return "Begin"
	case 'C':
		return "Commit"
	case 'O':
		return "Origin"
	case 'R':
		return "Relation"
	case 'Y':
		return "Type"
	case 'I':
		return "Insert"
	case 'U':
		return "Update"
	case 'D':
		return "Delete"
	case 'T':
		return "Truncate"
	case 'M':
		return "Message"
	case 'S':
		return "StreamStart"
	case 'E':
		return "StreamStop"
	case 'c':
		return "StreamCommit"
	case 'A':
		return "StreamAbort"
	}
	return "type " + typeByte(b)
}
