package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// choice is a flag that takes one of a few words: another is refused when
// the flags parse, as a command-line error (exit 2), before anything runs.
type choice struct {
	v       *string
	choices []string
}

func (c choice) String() string { return *c.v }
func (c choice) Type() string   { return "string" }

func (c choice) Set(s string) error {
	if !slices.Contains(c.choices, s) {
		return fmt.Errorf("want %s", strings.Join(c.choices, ", "))
	}
	*c.v = s
	return nil
}

// formatFlag adds --format to cmd: one of choices, the first the default.
func formatFlag(cmd *cobra.Command, p *string, choices ...string) {
	*p = choices[0]
	cmd.Flags().Var(choice{p, choices}, "format", "output: "+strings.Join(choices, ", "))
}
