package compact

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Each process compacts in its own scratch directory; a dead process's
// directory, and the shared one of earlier releases, are cleared, and a
// live process's is left alone (pg-cdc compact beside pg-cdc start).
func TestScratchDirPerProcess(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	names := map[string]bool{ // name → kept
		fmt.Sprintf("public.t.pid%d", dead.Process.Pid): false,
		fmt.Sprintf("public.t.pid%d", os.Getppid()):     true,
		"public.t": false,
		fmt.Sprintf("public.t2.pid%d", dead.Process.Pid): true,  // another table's
		fmt.Sprintf("public.t.pid%d", os.Getpid()):       false, // this process's, half-way
	}
	for n := range names {
		if err := os.MkdirAll(filepath.Join(root, n, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := scratchDir(root, "public.t")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, fmt.Sprintf("public.t.pid%d", os.Getpid())); dir != want {
		t.Errorf("scratch %s, want %s", dir, want)
	}
	for n, kept := range names {
		_, err := os.Stat(filepath.Join(root, n))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v", n, got, kept)
		}
	}
}
