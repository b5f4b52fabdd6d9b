package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The history log stores each version as a generic diff of two manifest
// encodings (see log.go). The diff never interprets the manifest: it walks
// the two JSON documents side by side, so a field added to the manifest
// later is carried without a change here.
//
// Rules, from the previous document a to the next b, at each path:
//
//   - equal bytes: nothing (the encodings are deterministic, so an
//     unchanged subtree is byte-for-byte equal and is never descended into);
//   - two objects: a delete per key only a has, a set per key only b has,
//     and a recursion per key both have;
//   - two arrays where b is a without its first drop elements, followed by
//     appended ones (deltas folded by a compaction, the history trimmed at
//     100, garbage collected, a schema version or a delta appended): one
//     splice;
//   - anything else: a set of b's value.
//
// So a diff is O(what changed) in bytes. Computing it scans the changed
// subtrees once per level, with a small scanner over the two byte slices
// (no decoding into maps), which keeps its time well below that of the
// manifest's own encoding.

// Op is one change of a diff. Path names object keys from the root; arrays
// are never indexed into (they are set whole or spliced).
type Op struct {
	// Op is "set", "delete" or "splice".
	Op   string   `json:"op"`
	Path []string `json:"path"`
	// Value is the new value of a set, compact JSON.
	Value json.RawMessage `json:"value,omitempty"`
	// Drop and Append are a splice: the array loses its first Drop
	// elements, then Append is added at its end.
	Drop   int               `json:"drop,omitempty"`
	Append []json.RawMessage `json:"append,omitempty"`
}

// Op kinds.
const (
	opSet    = "set"
	opDelete = "delete"
	opSplice = "splice"
)

// diffJSON returns the ops that turn the JSON document a into b.
func diffJSON(a, b []byte) ([]Op, error) {
	da, err := newDoc(a)
	if err != nil {
		return nil, err
	}
	db, err := newDoc(b)
	if err != nil {
		return nil, err
	}
	return diffDocs(da, db)
}

// diffDocs returns the ops that turn a into b.
func diffDocs(a, b *doc) ([]Op, error) {
	d := differ{a: a, b: b}
	if err := d.value(nil, a.root, b.root); err != nil {
		return nil, err
	}
	return d.ops, nil
}

// doc is a JSON document with its structural index: where each object or
// array that opens at an offset closes. One pass builds it (the committer
// keeps the previous version's), after which splitting a container into
// its members jumps over nested values instead of scanning them, so a diff
// reads each changed level once rather than each byte once per level.
type doc struct {
	data   []byte
	root   span
	opens  []int // offsets of '{' and '[' in document order
	closes []int // offset of the matching '}' or ']'
}

// span is a value's bytes, [start, end) in doc.data.
type span struct{ start, end int }

// newDoc indexes data, which must hold one JSON value (objects, arrays
// and strings are checked for structure; literals are not parsed).
func newDoc(data []byte) (*doc, error) {
	d := &doc{data: data}
	var stack []int // indexes into opens
	for i := 0; i < len(data); i++ {
		for i < len(data) && !structural[data[i]] {
			i++
		}
		if i == len(data) {
			break
		}
		switch c := data[i]; c {
		case '"':
			end, err := skipString(data, i)
			if err != nil {
				return nil, err
			}
			i = end - 1
		case '{', '[':
			stack = append(stack, len(d.opens))
			d.opens = append(d.opens, i)
			d.closes = append(d.closes, -1)
		case '}', ']':
			if len(stack) == 0 {
				return nil, errors.New("diff: mismatched bracket")
			}
			k := stack[len(stack)-1]
			if (c == '}') != (data[d.opens[k]] == '{') {
				return nil, errors.New("diff: mismatched bracket")
			}
			stack = stack[:len(stack)-1]
			d.closes[k] = i
		}
	}
	if len(stack) > 0 {
		return nil, errors.New("diff: unterminated value")
	}
	start := skipSpace(data, 0)
	if start == len(data) {
		return nil, errors.New("diff: empty document")
	}
	end, err := d.skipValue(start)
	if err != nil {
		return nil, err
	}
	if skipSpace(data, end) != len(data) {
		return nil, errors.New("diff: trailing bytes after a value")
	}
	d.root = span{start, end}
	return d, nil
}

func (d *doc) bytes(s span) []byte { return d.data[s.start:s.end] }

// closing returns the offset of the bracket that closes the container
// opening at i.
func (d *doc) closing(i int) (int, error) {
	k, found := slices.BinarySearch(d.opens, i)
	if !found {
		return 0, errors.New("diff: not a container")
	}
	return d.closes[k], nil
}

// skipValue returns the offset after the JSON value starting at i.
func (d *doc) skipValue(i int) (int, error) {
	data := d.data
	if i >= len(data) {
		return 0, errors.New("diff: value expected")
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		c, err := d.closing(i)
		if err != nil {
			return 0, err
		}
		return c + 1, nil
	case '}', ']', ',', ':':
		return 0, errors.New("diff: value expected")
	}
	j := i
	for j < len(data) && !literalEnd[data[j]] {
		j++
	}
	return j, nil
}

// structural marks the bytes newDoc stops at.
var structural = func() (t [256]bool) {
	for _, c := range []byte("\"{}[]") {
		t[c] = true
	}
	return t
}()

// literalEnd marks the bytes that end a number, true, false or null.
var literalEnd = func() (t [256]bool) {
	for _, c := range []byte(" \t\n\r,]}:{[\"") {
		t[c] = true
	}
	return t
}()

type differ struct {
	a, b *doc
	ops  []Op
}

func (d *differ) value(path []string, a, b span) error {
	av, bv := d.a.bytes(a), d.b.bytes(b)
	if bytes.Equal(av, bv) {
		return nil
	}
	switch {
	case av[0] == '{' && bv[0] == '{':
		return d.object(path, a, b)
	case av[0] == '[' && bv[0] == '[':
		return d.array(path, a, b)
	}
	return d.set(path, bv)
}

func (d *differ) set(path []string, v []byte) error {
	c, err := compactJSON(v)
	if err != nil {
		return err
	}
	d.ops = append(d.ops, Op{Op: opSet, Path: clonePath(path), Value: c})
	return nil
}

func (d *differ) object(path []string, a, b span) error {
	am, err := d.a.members(a)
	if err != nil {
		return err
	}
	bm, err := d.b.members(b)
	if err != nil {
		return err
	}
	old := make(map[string]span, len(am))
	for _, m := range am {
		old[m.key] = m.val
	}
	seen := make(map[string]bool, len(bm))
	for _, m := range bm {
		seen[m.key] = true
		p := append(path, m.key)
		if av, ok := old[m.key]; ok {
			if err := d.value(p, av, m.val); err != nil {
				return err
			}
			continue
		}
		if err := d.set(p, d.b.bytes(m.val)); err != nil {
			return err
		}
	}
	for _, m := range am {
		if !seen[m.key] {
			d.ops = append(d.ops, Op{Op: opDelete, Path: clonePath(append(path, m.key))})
		}
	}
	return nil
}

func (d *differ) array(path []string, a, b span) error {
	ae, err := d.a.elements(a)
	if err != nil {
		return err
	}
	be, err := d.b.elements(b)
	if err != nil {
		return err
	}
	drop, ok := splice(d.a, ae, d.b, be)
	if !ok {
		return d.set(path, d.b.bytes(b))
	}
	kept := len(ae) - drop
	op := Op{Op: opSplice, Path: clonePath(path), Drop: drop}
	for _, e := range be[kept:] {
		c, err := compactJSON(d.b.bytes(e))
		if err != nil {
			return err
		}
		op.Append = append(op.Append, c)
	}
	d.ops = append(d.ops, op)
	return nil
}

// splice finds the smallest drop such that b is a[drop:] followed by more
// elements, keeping at least one element of a (a splice that keeps nothing
// is a set).
func splice(da *doc, a []span, db *doc, b []span) (drop int, ok bool) {
	for drop = 0; drop < len(a); drop++ {
		kept := len(a) - drop
		if kept > len(b) || !bytes.Equal(da.bytes(a[drop]), db.bytes(b[0])) {
			continue
		}
		match := true
		for i := 1; i < kept; i++ {
			if !bytes.Equal(da.bytes(a[drop+i]), db.bytes(b[i])) {
				match = false
				break
			}
		}
		if match {
			return drop, true
		}
	}
	return 0, false
}

func clonePath(p []string) []string {
	out := make([]string, len(p))
	copy(out, p)
	return out
}

func compactJSON(v []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	buf.Grow(len(v))
	if err := json.Compact(&buf, v); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return buf.Bytes(), nil
}

// member is one key and value of a JSON object.
type member struct {
	key string
	val span
}

// members splits the object at s into its members, in document order;
// keys are unescaped.
func (d *doc) members(s span) ([]member, error) {
	data := d.data
	var out []member
	i := skipSpace(data, s.start+1)
	last := s.end - 1 // the closing '}'
	if i == last {
		return out, nil
	}
	for {
		if i >= last || data[i] != '"' {
			return nil, errors.New("diff: object key expected")
		}
		end, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		key, err := unquote(data[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(data, end)
		if i >= last || data[i] != ':' {
			return nil, errors.New("diff: ':' expected")
		}
		i = skipSpace(data, i+1)
		vend, err := d.skipValue(i)
		if err != nil {
			return nil, err
		}
		if vend > last {
			return nil, errors.New("diff: value runs past its object")
		}
		out = append(out, member{key: key, val: span{i, vend}})
		i = skipSpace(data, vend)
		switch {
		case i == last:
			return out, nil
		case i < last && data[i] == ',':
			i = skipSpace(data, i+1)
		default:
			return nil, errors.New("diff: ',' or '}' expected")
		}
	}
}

// elements splits the array at s into its elements.
func (d *doc) elements(s span) ([]span, error) {
	data := d.data
	var out []span
	i := skipSpace(data, s.start+1)
	last := s.end - 1 // the closing ']'
	if i == last {
		return out, nil
	}
	for {
		end, err := d.skipValue(i)
		if err != nil {
			return nil, err
		}
		if end > last || end == i {
			return nil, errors.New("diff: element runs past its array")
		}
		out = append(out, span{i, end})
		i = skipSpace(data, end)
		switch {
		case i == last:
			return out, nil
		case i < last && data[i] == ',':
			i = skipSpace(data, i+1)
		default:
			return nil, errors.New("diff: ',' or ']' expected")
		}
	}
}

func unquote(s []byte) (string, error) {
	inner := s[1 : len(s)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var k string
	if err := json.Unmarshal(s, &k); err != nil {
		return "", fmt.Errorf("diff: object key: %w", err)
	}
	return k, nil
}

func skipSpace(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset after the string starting at d[i] ('"'),
// finding quotes with bytes.IndexByte: a quote ends the string unless an
// odd number of backslashes precedes it.
func skipString(d []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(d[j:], '"')
		if k < 0 {
			return 0, errors.New("diff: unterminated string")
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && d[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// applyOps applies ops to the generic JSON tree root (decoded with
// UseNumber) and returns the new root.
func applyOps(root any, ops []Op) (any, error) {
	for i, op := range ops {
		var err error
		root, err = applyOp(root, op)
		if err != nil {
			return nil, fmt.Errorf("op %d (%s %s): %w", i, op.Op, strings.Join(op.Path, "."), err)
		}
	}
	return root, nil
}

func applyOp(root any, op Op) (any, error) {
	switch op.Op {
	case opSet:
		v, err := decodeGeneric(op.Value)
		if err != nil {
			return nil, err
		}
		if len(op.Path) == 0 {
			return v, nil
		}
		parent, err := walk(root, op.Path[:len(op.Path)-1])
		if err != nil {
			return nil, err
		}
		parent[op.Path[len(op.Path)-1]] = v
		return root, nil
	case opDelete:
		if len(op.Path) == 0 {
			return nil, errors.New("delete of the root")
		}
		parent, err := walk(root, op.Path[:len(op.Path)-1])
		if err != nil {
			return nil, err
		}
		key := op.Path[len(op.Path)-1]
		if _, ok := parent[key]; !ok {
			return nil, fmt.Errorf("no key %q to delete", key)
		}
		delete(parent, key)
		return root, nil
	case opSplice:
		var arr []any
		var parent map[string]any
		if len(op.Path) == 0 {
			a, ok := root.([]any)
			if !ok {
				return nil, errors.New("splice of a root that is not an array")
			}
			arr = a
		} else {
			var err error
			if parent, err = walk(root, op.Path[:len(op.Path)-1]); err != nil {
				return nil, err
			}
			a, ok := parent[op.Path[len(op.Path)-1]].([]any)
			if !ok {
				return nil, errors.New("splice of a value that is not an array")
			}
			arr = a
		}
		if op.Drop < 0 || op.Drop > len(arr) {
			return nil, fmt.Errorf("splice drops %d of %d elements", op.Drop, len(arr))
		}
		next := make([]any, 0, len(arr)-op.Drop+len(op.Append))
		next = append(next, arr[op.Drop:]...)
		for _, raw := range op.Append {
			v, err := decodeGeneric(raw)
			if err != nil {
				return nil, err
			}
			next = append(next, v)
		}
		if parent == nil {
			return next, nil
		}
		parent[op.Path[len(op.Path)-1]] = next
		return root, nil
	}
	return nil, fmt.Errorf("unknown op %q", op.Op)
}

// walk follows path through objects.
func walk(root any, path []string) (map[string]any, error) {
	cur, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("the root is not an object")
	}
	for i, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return cur, nil
}

// decodeGeneric decodes one JSON value, numbers kept as written.
func decodeGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode value: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode value: trailing data")
	}
	return v, nil
}
