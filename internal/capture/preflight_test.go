package capture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingDirectory: a filesystem sink that does not exist yet is judged
// by its nearest existing parent and never created.
func TestMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, missing := MissingDirectory(dir); missing {
		t.Errorf("%s exists, but was reported missing", dir)
	}
	c, missing := MissingDirectory(filepath.Join(dir, "a", "b"))
	if !missing || c.Status != "ok" || !strings.Contains(c.Detail, "init creates it in "+dir) {
		t.Errorf("missing under a writable directory: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("the check created a directory (stat: %v)", err)
	}
	c, missing = MissingDirectory(filepath.Join(file, "sink"))
	if !missing || c.Status != "fail" || !strings.Contains(c.Detail, "is not a directory") || c.Fix == "" {
		t.Errorf("missing under a file: %+v", c)
	}
}

func TestPrintPreflight(t *testing.T) {
	rep := PreflightReport{Provider: "rds", Failed: 1, Warnings: 1, Checks: []Check{
		{Name: "wal_level", Status: "fail", Detail: "wal_level is replica, not logical", Fix: "set rds.logical_replication = 1"},
		{Name: "replica_identity", Status: "warn", Detail: "table public.e has no primary key", Fix: "add one"},
		{Name: "slot", Status: "ok", Detail: "slot s does not exist yet"},
	}}
	var b strings.Builder
	if err := rep.Write(&b, "text"); err != nil {
		t.Fatal(err)
	}
	want := `✗ wal_level is replica, not logical
    fix: set rds.logical_replication = 1
! table public.e has no primary key
    fix: add one
✓ slot s does not exist yet
preflight: 1 passed, 1 warning, 1 failed (fixes for provider rds)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
