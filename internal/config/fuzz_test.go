package config

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that no file and no environment makes Parse panic, that
// whatever Parse accepts also validates, and that its printed form reads
// back to the same settings.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full), "PGPASSWORD=x")
	f.Add([]byte(minimal), "PGCDC_FLUSH_MAX_ROWS=5")
	f.Add([]byte(minimal+"flush:\n  intervall_sec: 5\n"), "")
	f.Add([]byte("a: &x {b: *x}\n"), "")
	f.Add([]byte("source: &s\n  postgres: *s\n"), "")
	f.Add([]byte("- [a, {b: c}]\n---\nx: y\n"), "PGCDC_TABLES_INCLUDE=a,,b")
	f.Add([]byte("flush: {max_rows: 0x10, max_bytes: 1_000}\n"), "")
	f.Add([]byte("source:\n  postgres:\n    url: ${A}$$${B\n"), "A=1\nB=2")
	f.Add([]byte("? [a]\n: b\n"), "")
	f.Add([]byte(minimal+"flush: {interval_sec: 4611686018427387904, drain_timeout_sec: -0o17}\n"), "PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC=-9999999999")
	f.Add([]byte(minimal+"flush:\n  interval_sec: ten\n  max_rows: 0\nlog: {level: loud}\n"), "PGCDC_FLUSH_MAX_ROWS=0")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		environ := strings.Split(env, "\n")
		c, err := Parse(data, "fuzz.yml", environ)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
		_ = c.Redacted()
		y, err := c.YAML()
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		back, err := Parse(y, "printed.yml", nil)
		if err != nil {
			t.Fatalf("the printed configuration does not parse: %v\n%s", err, y)
		}
		if !reflect.DeepEqual(back.Settings(), c.Settings()) {
			t.Fatalf("the printed configuration reads back differently:\n%s", y)
		}
	})
}
