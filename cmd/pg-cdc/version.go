package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := ""
			if info, ok := debug.ReadBuildInfo(); ok {
				for _, s := range info.Settings {
					if s.Key == "vcs.revision" {
						rev = " (" + s.Value + ")"
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pg-cdc %s%s %s manifest format %d\n", version, rev, runtime.Version(), manifest.FormatVersion)
			return nil
		},
	}
}
