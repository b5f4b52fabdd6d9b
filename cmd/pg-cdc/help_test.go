package main

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every help file is some command's long help, and every command that
// takes more explaining than its one line has one.
func TestHelpFiles(t *testing.T) {
	root := newRoot(&cli{})
	setHelp(root)
	paths := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if _, p, ok := strings.Cut(c.CommandPath(), " "); ok {
			paths[strings.ReplaceAll(p, " ", "-")] = c
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	files, err := fs.Glob(helpFiles, "help/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("help files: %v %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "help/"), ".txt")
		c, ok := paths[name]
		if !ok {
			t.Errorf("%s: no command %q", f, strings.ReplaceAll(name, "-", " "))
			continue
		}
		if c.Long == "" || strings.HasSuffix(c.Long, "\n") {
			t.Errorf("%s: command %q has long help %q", f, c.CommandPath(), c.Long)
		}
	}
	for _, want := range []string{"query", "serve", "catalog-status", "rebuild", "config-print"} {
		if c := paths[want]; c == nil || c.Long == "" {
			t.Errorf("command %s has no long help", want)
		}
	}
}
