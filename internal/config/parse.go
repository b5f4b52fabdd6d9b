package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path and returns the configuration it
// describes, with environ (os.Environ() form, "KEY=value") supplying ${VAR}
// values and PGCDC_* overrides. The result is validated.
func Load(path string, environ []string) (Config, error) {
	if path == "" {
		return Config{}, errors.New("read config: no file given")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Config{}, fmt.Errorf("read config %s: file does not exist: %w", path, err)
		}
		return Config{}, fmt.Errorf("read config %s: %w", path, err)
	}
	return Parse(data, path, environ)
}

// Parse is Load on bytes already read; name is the file name used in error
// messages ("pg-cdc.yml:7: ..."). Empty data gives the defaults (plus the
// environment), which still must validate.
//
// Every problem is returned at once, in one error: those of the file (an
// unknown key, a value of the wrong type), those of the overrides and the
// values Validate refuses. A refused value is reported where it was set:
// "pg-cdc.yml:12: flush.max_rows: must be > 0, got 0", or "environment
// variable PGCDC_FLUSH_MAX_ROWS (flush.max_rows): ..." for an override; a
// default has no place. The file's problems come first, in line order, then
// the overrides' in variable order, then the defaults'. A key whose value
// did not decode is not validated again: the value it kept is not the one
// that was written. A file that is not a YAML mapping at all is not
// validated either, since nothing in it could be read.
func Parse(data []byte, name string, environ []string) (Config, error) {
	c := Default()
	env := envMap(environ)
	o := newOrigins()
	errs, readable := decodeFile(&c, data, name, env, o)
	errs = append(errs, applyEnv(&c, env, o)...)
	if _, ok := env[urlEnv]; ok {
		// An override is taken literally (applyEnv), so there is nothing
		// to expand again.
		c.Source.Postgres.urlTemplate, c.Source.Postgres.urlLoaded = "", ""
	}
	c.normalize()
	if readable {
		errs = append(errs, o.locate(name, c.validate())...)
	}
	if len(errs) > 0 {
		return Config{}, joinSorted(errs)
	}
	return c, nil
}

// normalize rewrites what people type for what pg-cdc means: one trailing
// slash of storage.prefix (as in s3://bucket/cdc/app/) is dropped; any
// other stray slash stays, for validate to refuse.
func (c *Config) normalize() {
	if pf := c.Storage.Prefix; strings.HasSuffix(pf, "/") && !strings.HasSuffix(pf, "//") {
		c.Storage.Prefix = strings.TrimSuffix(pf, "/")
	}
}

// joinSorted joins errs into one error: first those at a line of the file,
// by line, then those of an environment variable, by name, then the rest,
// each group keeping the order it was found in.
func joinSorted(errs []*posError) error {
	rank := func(e *posError) int {
		switch {
		case e.line > 0:
			return 0
		case e.env != "":
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(errs, func(a, b *posError) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.line, b.line), strings.Compare(a.env, b.env))
	})
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// origins records where each key got its value, so that a problem Validate
// finds names the line, or the variable, that set the value it refuses.
type origins struct {
	// lines maps a key, a list item ("tables.include[1]") or a types entry
	// ("types.public.t.c") to the line of the file that set it.
	lines map[string]int
	// vars maps a key to the PGCDC_* variable that set it, over the file.
	vars map[string]string
	// failed holds the keys whose value in the file or the environment did
	// not decode; each kept its earlier value, and has its error already.
	failed map[string]bool
}

func newOrigins() *origins {
	return &origins{lines: map[string]int{}, vars: map[string]string{}, failed: map[string]bool{}}
}

// locate places each validation problem where its value was set, and drops
// those of keys that failed to decode or that read such a key (FieldError's
// uses).
func (o *origins) locate(name string, fes []*FieldError) []*posError {
	out := make([]*posError, 0, len(fes))
	for _, fe := range fes {
		at := cmp.Or(fe.at, fe.Key)
		key := leafOf(at)
		if o.failed[key] || slices.ContainsFunc(fe.uses, func(k string) bool { return o.failed[k] }) {
			continue
		}
		if v := o.vars[key]; v != "" {
			out = append(out, &posError{env: v, msg: fmt.Sprintf("environment variable %s (%s): %s", v, fe.Key, fe.Problem), err: fe})
			continue
		}
		line := o.lines[at]
		if line == 0 {
			line = o.lines[key]
		}
		if line == 0 {
			out = append(out, &posError{msg: fe.Error(), err: fe}) // a default: it has no place
			continue
		}
		out = append(out, &posError{line: line, msg: fmt.Sprintf("%s:%d: %s", name, line, fe.Error()), err: fe})
	}
	return out
}

// leafOf is the key a validation key belongs to: "tables.include[1]" belongs
// to "tables.include", "types.public.t.c" to "types" (the only mapping key,
// checked first because its entries may hold a "[").
func leafOf(k string) string {
	if strings.HasPrefix(k, "types.") {
		return "types"
	}
	if i := strings.IndexByte(k, '['); i >= 0 {
		return k[:i]
	}
	return k
}

// envMap turns "KEY=value" entries into a map. A later entry wins over an
// earlier one, as with os/exec, so a test can append an override. Entries
// without "=" are ignored: they carry no value.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// posError is an error located at a line of the file (line > 0) or at an
// environment variable (env), or at neither (a default). It keeps the cause
// for errors.Is/As while printing the position the way compilers do.
type posError struct {
	line int
	env  string
	msg  string
	err  error
}

func (e *posError) Error() string { return e.msg }
func (e *posError) Unwrap() error { return e.err }

// decodeFile walks the YAML document against the known keys and sets them
// on c, recording in o where each key was set. It returns every problem it
// finds, not only the first, so that one run shows all the typos of a file;
// readable is false when the file as a whole could not be read (bad YAML,
// two documents, not a mapping), so that nothing in it was set.
func decodeFile(c *Config, data []byte, name string, env map[string]string, o *origins) (errs []*posError, readable bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true // an empty file: every key keeps its default
		}
		return []*posError{yamlError(name, err)}, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return []*posError{yamlError(name, err)}, false
		}
		// A second document would be silently ignored by a plain decode.
		return []*posError{{line: extra.Line, msg: fmt.Sprintf("%s:%d: more than one YAML document (remove the extra \"---\")", name, extra.Line)}}, false
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, true
		}
		root = root.Content[0]
	}
	w := walker{name: name, env: env, schema: newSchema(c), c: c, origins: o}
	w.section(root, "")
	top := deref(root)
	return w.errs, top.Kind == yaml.MappingNode || isNull(top)
}

// yamlError rewrites yaml.v3's "yaml: line N: msg" as "name:N: msg".
func yamlError(name string, err error) *posError {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if line, convErr := strconv.Atoi(n); convErr == nil {
				return &posError{line: line, msg: fmt.Sprintf("%s:%s: %s", name, n, tail), err: err}
			}
		}
	}
	return &posError{msg: fmt.Sprintf("%s: parse YAML: %s", name, strings.TrimPrefix(msg, "yaml: ")), err: err}
}

type walker struct {
	name    string
	env     map[string]string
	schema  schema
	c       *Config  // the config being set, to keep the URL's template
	origins *origins // where each key was set, for Validate's errors
	errs    []*posError
}

func (w *walker) errorf(line int, format string, args ...any) {
	w.errs = append(w.errs, &posError{line: line, msg: fmt.Sprintf("%s:%d: %s", w.name, line, fmt.Sprintf(format, args...))})
}

// deref follows an alias to the node it names (anchors are allowed, and
// YAML forbids an alias of an alias).
func deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// section walks a mapping whose keys are the children of prefix ("" is the
// top level).
func (w *walker) section(node *yaml.Node, prefix string) {
	line := node.Line
	node = deref(node)
	if isNull(node) {
		return // "flush:" with nothing under it keeps the defaults
	}
	if node.Kind != yaml.MappingNode {
		where := "at the top level"
		if prefix != "" {
			where = "for " + prefix
		}
		w.errorf(line, "want a mapping of keys %s, got %s", where, describe(node))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errorf(k.Line, "keys must be plain names, got %s", describe(k))
			continue
		}
		path := join(prefix, k.Value)
		if first, dup := seen[k.Value]; dup {
			w.errorf(k.Line, "duplicate key %q (first set at line %d)", path, first)
			continue
		}
		seen[k.Value] = k.Line
		switch {
		case k.Value == "<<":
			w.errorf(k.Line, "merge keys (<<) are not supported in %s", nonEmpty(prefix, "the top level"))
		case w.schema.sections[path]:
			w.section(v, path)
		default:
			l, ok := w.schema.leaves[path]
			if !ok {
				w.errorf(k.Line, "unknown key %q%s", path, suggest(path, w.schema.paths))
				continue
			}
			w.leaf(l, k.Line, v)
		}
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// leaf sets one key, written at keyLine, from its YAML value, and records
// where it was set or that it failed (a key with any error keeps its
// earlier value whole: a list is not set item by item).
func (w *walker) leaf(l leaf, keyLine int, v *yaml.Node) {
	before := len(w.errs)
	w.setLeaf(l, v)
	if len(w.errs) > before {
		w.origins.failed[l.path] = true
		return
	}
	w.origins.lines[l.path] = keyLine
}

func (w *walker) setLeaf(l leaf, v *yaml.Node) {
	line := v.Line
	v = deref(v)
	switch t := l.target.(type) {
	case *string:
		if s, ok := w.str(l.path, line, v); ok {
			*t = s
			if p := &w.c.Source.Postgres; t == &p.URL && strings.Contains(v.Value, "$") {
				// Kept for ResolveURL, which expands it again per
				// connection.
				p.urlTemplate, p.urlLoaded = v.Value, s
			}
		}
	case *int:
		if n, ok := w.integer(l.path, line, v, strconv.IntSize); ok {
			*t = int(n)
		}
	case *int64:
		if n, ok := w.integer(l.path, line, v, 64); ok {
			*t = n
		}
	case seconds:
		if n, ok := w.integer(l.path, line, v, 64); ok {
			d, inRange := secondsDuration(n)
			if !inRange {
				w.errorf(line, "%s: %s", l.path, secondsRangeError(n))
				return
			}
			*t.d = d
		}
	case *bool:
		// Only YAML's true and false: "yes", "on" and 1 are refused, so a
		// switch that accepts a risk is never flipped by accident.
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || (v.Value != "true" && v.Value != "false") {
			w.errorf(line, "%s: want true or false, got %s", l.path, describe(v))
			return
		}
		*t = v.Value == "true"
	case *time.Duration:
		if v.Kind != yaml.ScalarNode || isNull(v) || v.ShortTag() != "!!str" {
			w.errorf(line, "%s: want a duration such as \"90s\", \"15m\" or \"720h\", got %s", l.path, describe(v))
			return
		}
		d, err := parseDuration(v.Value)
		if err != nil {
			w.errorf(line, "%s: %v", l.path, err)
			return
		}
		*t = d
	case *[]string:
		if isNull(v) {
			*t = []string{} // "include:" with nothing after it is an empty list
			return
		}
		if v.Kind != yaml.SequenceNode {
			w.errorf(line, "%s: want a list of strings such as [a, b], got %s", l.path, describe(v))
			return
		}
		out := make([]string, 0, len(v.Content))
		ok := true
		for i, item := range v.Content {
			itemPath := fmt.Sprintf("%s[%d]", l.path, i)
			w.origins.lines[itemPath] = item.Line
			s, itemOK := w.str(itemPath, item.Line, deref(item))
			out = append(out, s)
			ok = ok && itemOK
		}
		if ok {
			*t = out
		}
	case *map[string]string:
		if isNull(v) {
			*t = map[string]string{}
			return
		}
		if v.Kind != yaml.MappingNode {
			w.errorf(line, "%s: want a mapping such as {\"public.t.c\": string}, got %s", l.path, describe(v))
			return
		}
		out := make(map[string]string, len(v.Content)/2)
		ok := true
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := deref(v.Content[i]), v.Content[i+1]
			key, keyOK := w.str(l.path+" key", k.Line, k)
			if _, dup := out[key]; keyOK && dup {
				w.errorf(k.Line, "%s: duplicate key %q", l.path, key)
				keyOK = false
			}
			w.origins.lines[l.path+"."+key] = k.Line
			s, valOK := w.str(l.path+"."+key, val.Line, deref(val))
			out[key] = s
			ok = ok && keyOK && valOK
		}
		if ok {
			*t = out
		}
	default:
		// Unreachable: leaves() holds only the types above.
		w.errorf(line, "%s: unsupported field type %T", l.path, l.target)
	}
}

// parseDuration reads a Go duration ("90s", "1h30m"); a bare number is
// refused, because its unit would be a guess.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("want a duration such as \"90s\", \"15m\" or \"720h\", got %q", truncate(s))
	}
	return d, nil
}

// str reads a string value and expands ${VAR} in it. Any scalar is taken as
// its text ("path: 2024" is the directory "2024"); null, lists and mappings
// are errors.
func (w *walker) str(path string, line int, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode || isNull(v) {
		w.errorf(line, "%s: want a string, got %s", path, describe(v))
		return "", false
	}
	s, err := expand(v.Value, mapLookup(w.env))
	if err != nil {
		w.errs = append(w.errs, &posError{line: line, msg: fmt.Sprintf("%s:%d: %s: %v", w.name, line, path, err), err: err})
		return "", false
	}
	return s, true
}

// integer reads an integer value. Only YAML integers are accepted: a quoted
// "10" is a string, as yaml.v3 itself decides, and ${VAR} is not expanded
// here (use the PGCDC_* override to set a number from the environment).
func (w *walker) integer(path string, line int, v *yaml.Node, bits int) (int64, bool) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		w.errorf(line, "%s: want an integer, got %s", path, describe(v))
		return 0, false
	}
	if digits := strings.TrimLeft(v.Value, "+-"); len(digits) > 1 && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9' {
		// YAML 1.1 reads 017 as octal 15: refuse rather than surprise.
		w.errorf(line, "%s: %s has a leading zero, which YAML reads as octal; write it without the zero (or as 0o...)", path, truncate(v.Value))
		return 0, false
	}
	var n int64
	if err := v.Decode(&n); err != nil {
		w.errorf(line, "%s: integer %s is out of range", path, truncate(v.Value))
		return 0, false
	}
	if bits < 64 && (n > 1<<(bits-1)-1 || n < -(1<<(bits-1))) {
		w.errorf(line, "%s: integer %s is out of range", path, truncate(v.Value))
		return 0, false
	}
	return n, true
}

// describe names a node's kind for "got ..." messages, quoting a scalar's
// text (cut short) so the reader can find it.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "no value (remove the key to keep its default)"
		case "!!str":
			return "string " + strconv.Quote(truncate(n.Value))
		case "!!int":
			return "integer " + truncate(n.Value)
		case "!!float":
			return "number " + truncate(n.Value)
		case "!!bool":
			return "boolean " + truncate(n.Value)
		default:
			return n.ShortTag() + " " + strconv.Quote(truncate(n.Value))
		}
	default:
		return "nothing"
	}
}

func truncate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
