package manifest

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestDiffJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want string // the ops, as JSON
	}{
		{"same bytes", `{"a":1}`, `{"a":1}`, `null`},
		{"same values", `{"a":1,"b":[1]}`, `{"a": 1, "b":[1]}`, `null`},
		{"set and delete", `{"a":1,"b":2}`, `{"a":1,"c":3}`, `[{"op":"set","path":["c"],"value":3},{"op":"delete","path":["b"]}]`},
		{"recurses into objects", `{"t":{"x":{"y":1,"z":2}}}`, `{"t":{"x":{"y":1,"z":3}}}`, `[{"op":"set","path":["t","x","z"],"value":3}]`},
		{"append", `{"d":[1,2]}`, `{"d":[1,2,3]}`, `[{"op":"splice","path":["d"],"append":[3]}]`},
		{"drop a prefix and append", `{"h":[1,2,3]}`, `{"h":[2,3,4]}`, `[{"op":"splice","path":["h"],"drop":1,"append":[4]}]`},
		{"drop only", `{"g":[{"p":"a"},{"p":"b"},{"p":"c"}]}`, `{"g":[{"p":"c"}]}`, `[{"op":"splice","path":["g"],"drop":2}]`},
		{"an element changed: set", `{"s":[1,2,3]}`, `{"s":[1,9,3]}`, `[{"op":"set","path":["s"],"value":[1,9,3]}]`},
		{"nothing kept: set", `{"s":[1,2]}`, `{"s":[3]}`, `[{"op":"set","path":["s"],"value":[3]}]`},
		{"type change", `{"b":null}`, `{"b":{"x":1}}`, `[{"op":"set","path":["b"],"value":{"x":1}}]`},
		{"escaped key", `{"t":{"a\"b":1}}`, `{"t":{"a\"b":2}}`, `[{"op":"set","path":["t","a\"b"],"value":2}]`},
		{"values compacted", `{"a":[1]}`, "{\"a\":[1,\n  {\"x\": [ 1, 2 ]}]}", `[{"op":"splice","path":["a"],"append":[{"x":[1,2]}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := diffJSON([]byte(tc.a), []byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(ops)
			if string(got) != tc.want {
				t.Errorf("diff = %s\nwant   %s", got, tc.want)
			}
			checkApplies(t, []byte(tc.a), []byte(tc.b), ops)
		})
	}
}

func TestDiffJSONRejectsMalformed(t *testing.T) {
	for _, b := range []string{`{"a":`, `{"a":1`, `{"a":[1,2}`, `{"a" 1}`, `{"a":1}x`, `{"a":"x}`} {
		if _, err := diffJSON([]byte(`{"a":0}`), []byte(b)); err == nil {
			t.Errorf("diff to %q: no error", b)
		}
	}
}

// checkApplies asserts that ops turn a into b (as JSON values).
func checkApplies(t testing.TB, a, b []byte, ops []Op) {
	t.Helper()
	tree, err := decodeGeneric(a)
	if err != nil {
		t.Fatal(err)
	}
	tree, err = applyOps(tree, ops)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	want, err := decodeGeneric(b)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(tree)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("applied diff gives %s, want %s", g, w)
	}
}

// FuzzDiffJSON: for any two JSON objects, the diff applied to the first
// gives the second; on any bytes, the scanner never panics.
func FuzzDiffJSON(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,3],"b":{"c":"x"}}`), []byte(`{"a":[2,3,4],"b":{"c":"y","d":null}}`))
	f.Add([]byte(`{"h":[{"e":1},{"e":2}]}`), []byte(`{"h":[{"e":2},{"e":3}],"x":1.50}`))
	f.Add([]byte(`{"k\u00e9":"\"]}"}`), []byte(`{"k\u00e9":"\"]}x"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ops, err := diffJSON(a, b)
		var av, bv map[string]any
		if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
			return // malformed input: an error or a diff, never a panic
		}
		// Indent both the way Encode does, so equal values are equal bytes.
		var ai, bi bytes.Buffer
		if json.Indent(&ai, a, "", "  ") != nil || json.Indent(&bi, b, "", "  ") != nil {
			return
		}
		if ops, err = diffJSON(ai.Bytes(), bi.Bytes()); err != nil {
			t.Fatalf("diff of two objects: %v", err)
		}
		checkApplies(t, ai.Bytes(), bi.Bytes(), ops)
	})
}
