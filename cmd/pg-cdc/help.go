package main

import (
	"embed"
	"strings"

	"github.com/spf13/cobra"
)

// The long help of each command is prose, kept as text in help/ (one file
// a command, named by its path: "catalog status" is help/catalog-status.txt)
// and read into the binary, so it is written and reviewed as prose, apart
// from the wiring. TestHelpFiles holds files and commands to each other.
//
//go:embed help/*.txt
var helpFiles embed.FS

// setHelp gives cmd and every command under it its long help.
func setHelp(cmd *cobra.Command) {
	_, path, _ := strings.Cut(cmd.CommandPath(), " ")
	if b, err := helpFiles.ReadFile("help/" + strings.ReplaceAll(path, " ", "-") + ".txt"); err == nil {
		cmd.Long = strings.TrimRight(string(b), "\n")
	}
	for _, sub := range cmd.Commands() {
		setHelp(sub)
	}
}
