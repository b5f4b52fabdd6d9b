package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return nil, errors.New("diff: empty document")
	}
	var d differ
	if err := d.value(nil, a, b); err != nil {
		return nil, err
	}
	return d.ops, nil
}

type differ struct {
	ops []Op
}

func (d *differ) value(path []string, a, b []byte) error {
	if bytes.Equal(a, b) {
		return nil
	}
	switch {
	case a[0] == '{' && b[0] == '{':
		return d.object(path, a, b)
	case a[0] == '[' && b[0] == '[':
		return d.array(path, a, b)
	}
	return d.set(path, b)
}

func (d *differ) set(path []string, v []byte) error {
	c, err := compactJSON(v)
	if err != nil {
		return err
	}
	d.ops = append(d.ops, Op{Op: opSet, Path: clonePath(path), Value: c})
	return nil
}

func (d *differ) object(path []string, a, b []byte) error {
	am, err := objectMembers(a)
	if err != nil {
		return err
	}
	bm, err := objectMembers(b)
	if err != nil {
		return err
	}
	old := make(map[string][]byte, len(am))
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
		if err := d.set(p, m.val); err != nil {
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

func (d *differ) array(path []string, a, b []byte) error {
	ae, err := arrayElements(a)
	if err != nil {
		return err
	}
	be, err := arrayElements(b)
	if err != nil {
		return err
	}
	drop, ok := splice(ae, be)
	if !ok {
		return d.set(path, b)
	}
	kept := len(ae) - drop
	op := Op{Op: opSplice, Path: clonePath(path), Drop: drop}
	for _, e := range be[kept:] {
		c, err := compactJSON(e)
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
func splice(a, b [][]byte) (drop int, ok bool) {
	for drop = 0; drop < len(a); drop++ {
		kept := len(a) - drop
		if kept > len(b) {
			continue
		}
		if !bytes.Equal(a[drop], b[0]) {
			continue
		}
		match := true
		for i := 1; i < kept; i++ {
			if !bytes.Equal(a[drop+i], b[i]) {
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

// member is one key and raw value of a JSON object.
type member struct {
	key string
	val []byte
}

// objectMembers splits the JSON object d (no surrounding space) into its
// members, in document order. Values keep their bytes (whitespace included);
// keys are unescaped.
func objectMembers(d []byte) ([]member, error) {
	if len(d) == 0 || d[0] != '{' {
		return nil, errors.New("diff: not an object")
	}
	var out []member
	i := skipSpace(d, 1)
	if i < len(d) && d[i] == '}' {
		return out, checkEnd(d, i+1)
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return nil, errors.New("diff: object key expected")
		}
		end, err := skipString(d, i)
		if err != nil {
			return nil, err
		}
		key, err := unquote(d[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(d, end)
		if i >= len(d) || d[i] != ':' {
			return nil, errors.New("diff: ':' expected")
		}
		i = skipSpace(d, i+1)
		vend, err := skipValue(d, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, val: d[i:vend]})
		i = skipSpace(d, vend)
		if i >= len(d) {
			return nil, errors.New("diff: unterminated object")
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case '}':
			return out, checkEnd(d, i+1)
		default:
			return nil, errors.New("diff: ',' or '}' expected")
		}
	}
}

// arrayElements splits the JSON array d (no surrounding space) into its
// elements' bytes.
func arrayElements(d []byte) ([][]byte, error) {
	if len(d) == 0 || d[0] != '[' {
		return nil, errors.New("diff: not an array")
	}
	var out [][]byte
	i := skipSpace(d, 1)
	if i < len(d) && d[i] == ']' {
		return out, checkEnd(d, i+1)
	}
	for {
		end, err := skipValue(d, i)
		if err != nil {
			return nil, err
		}
		out = append(out, d[i:end])
		i = skipSpace(d, end)
		if i >= len(d) {
			return nil, errors.New("diff: unterminated array")
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case ']':
			return out, checkEnd(d, i+1)
		default:
			return nil, errors.New("diff: ',' or ']' expected")
		}
	}
}

func checkEnd(d []byte, i int) error {
	if skipSpace(d, i) != len(d) {
		return errors.New("diff: trailing bytes after a value")
	}
	return nil
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

// skipString returns the index after the string starting at d[i] ('"').
func skipString(d []byte, i int) (int, error) {
	for j := i + 1; j < len(d); j++ {
		switch d[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("diff: unterminated string")
}

// skipValue returns the index after the JSON value starting at d[i]. It
// checks structure (brackets, strings), not the grammar of literals: its
// inputs are encodings this package wrote, and the diff of a malformed
// document fails at the first bracket or quote out of place.
func skipValue(d []byte, i int) (int, error) {
	if i >= len(d) {
		return 0, errors.New("diff: value expected")
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		var stack []byte
		for j := i; j < len(d); j++ {
			switch c := d[j]; c {
			case '"':
				end, err := skipString(d, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || (c == '}') != (stack[len(stack)-1] == '{') {
					return 0, errors.New("diff: mismatched bracket")
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("diff: unterminated value")
	case '}', ']', ',', ':':
		return 0, errors.New("diff: value expected")
	}
	j := i
	for j < len(d) && !strings.ContainsRune(" \t\n\r,]}:", rune(d[j])) {
		j++
	}
	return j, nil
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
