package config

import (
	"strings"
	"testing"
)

// FuzzParse checks that no file and no environment makes Parse panic, and
// that whatever Parse accepts also validates.
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
	})
}
