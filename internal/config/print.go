package config

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Setting is one key of a configuration with its value, for printing.
type Setting struct {
	// Key is the dotted path as the file writes it ("flush.interval_sec").
	Key string
	// Value is a string, int, int64, bool, time.Duration, []string or
	// map[string]string (a copy: changing it changes nothing). A *_sec key
	// ("flush.interval_sec") gives an int, its duration in whole seconds, as
	// the file writes it.
	Value any
}

// Settings lists every key of c with its value, in the order of
// docs/configuration.md. It prints what it is given: call it on
// Redacted() unless the secrets are meant to be seen.
func (c Config) Settings() []Setting {
	ls := leaves(&c)
	out := make([]Setting, len(ls))
	for i, l := range ls {
		var v any
		switch t := l.target.(type) {
		case *string:
			v = *t
		case *int:
			v = *t
		case *int64:
			v = *t
		case seconds:
			// Whole seconds, as Validate requires; a fraction a Config
			// built in code holds is cut off.
			v = int(*t.d / time.Second)
		case *bool:
			v = *t
		case *time.Duration:
			v = *t
		case *[]string:
			v = slices.Clone(*t)
		case *map[string]string:
			v = maps.Clone(*t)
		default:
			panic(fmt.Sprintf("config: leaf %s has unsupported type %T", l.path, l.target)) // leaves() holds only the types above
		}
		out[i] = Setting{Key: l.path, Value: v}
	}
	return out
}

// YAML renders c as a configuration file that sets every key, in sections.
// Parse reads it back to the same values: strings are quoted, with "$"
// written "$$" so nothing is expanded again, durations are Go durations
// ("15m") and the *_sec keys integer seconds. Like Settings, it prints what
// it is given.
func (c Config) YAML() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	sections := map[string]*yaml.Node{"": root}
	for _, s := range c.Settings() {
		parent := root
		parts := strings.Split(s.Key, ".")
		for i := range parts[:len(parts)-1] {
			path := strings.Join(parts[:i+1], ".")
			sec, ok := sections[path]
			if !ok {
				sec = &yaml.Node{Kind: yaml.MappingNode}
				parent.Content = append(parent.Content, strNode(parts[i], false), sec)
				sections[path] = sec
			}
			parent = sec
		}
		parent.Content = append(parent.Content, strNode(parts[len(parts)-1], false), valueNode(s.Value))
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("render configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render configuration: %w", err)
	}
	return buf.Bytes(), nil
}

func valueNode(v any) *yaml.Node {
	switch t := v.(type) {
	case string:
		return strNode(t, true)
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(t)}
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(t, 10)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}
	case time.Duration:
		return strNode(FormatDuration(t), true)
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range t {
			n.Content = append(n.Content, strNode(s, true))
		}
		return n
	case map[string]string:
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			n.Content = append(n.Content, strNode(k, true), strNode(t[k], true))
		}
		return n
	default:
		panic(fmt.Sprintf("config: unsupported setting type %T", v)) // Settings returns only the types above
	}
}

// strNode is a string scalar; data (a value, not a key name) is quoted,
// with "$" doubled so that Parse does not expand it.
func strNode(s string, data bool) *yaml.Node {
	if !data {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.ReplaceAll(s, "$", "$$"), Style: yaml.DoubleQuotedStyle}
}

// FormatDuration writes d as the shortest Go duration that reads back the
// same: "15m" rather than "15m0s", "720h" rather than "720h0m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
