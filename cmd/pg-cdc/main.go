// Command pg-cdc streams a PostgreSQL database's committed changes into
// typed Parquet files and a manifest. See README.md and docs/.
//
// This package is thin: it reads the configuration, builds the adapters with
// an explicit switch, runs a service, and maps errors to exit codes
// (docs/exit-codes.md). Only here are errors printed.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func main() {
	stopProfiles := startProfiles()
	code := run(os.Args[1:])
	stopProfiles()
	os.Exit(code)
}

func run(args []string) int {
	var configPath string
	root := &cobra.Command{
		Use:           "pg-cdc",
		Short:         "Stream PostgreSQL changes into Parquet files with a manifest",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	defaultConfig := "./pg-cdc.yml"
	if p := os.Getenv("PGCDC_CONFIG"); p != "" {
		defaultConfig = p
	}
	root.PersistentFlags().StringVarP(&configPath, "config", "c", defaultConfig, "configuration file (default from PGCDC_CONFIG)")
	root.AddCommand(
		newPreflightCmd(&configPath),
		newInitCmd(&configPath),
		newStartCmd(&configPath),
		newStatusCmd(&configPath),
		newTeardownCmd(&configPath),
		newCompactCmd(&configPath),
		newDumpCmd(&configPath),
		newVerifyCmd(&configPath),
		newVersionCmd(),
	)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	fmt.Fprintf(os.Stderr, "pg-cdc: %v\n", err)
	if hint := cdc.HintOf(err); hint != "" {
		fmt.Fprintf(os.Stderr, "hint: %s\n", hint)
	}
	if code == ExitUsage && !errors.As(err, new(usageError)) && !errors.Is(err, postgres.ErrPreflight) {
		// Cobra's own argument errors (unknown command or flag) land here.
		fmt.Fprintln(os.Stderr, "run 'pg-cdc --help' for usage")
	}
	return code
}
