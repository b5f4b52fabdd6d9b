// Command pg-cdc streams a PostgreSQL database's committed changes into
// typed Parquet files and a manifest. See README.md and docs/.
//
// This package is thin: it reads the configuration, builds the adapters with
// an explicit switch, runs a service, and maps errors to exit codes
// (docs/exit-codes.md). Only here are errors printed, scrubbed of secrets
// like the log; here too each operator action is audited.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/runs"
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
		newRebuildCmd(&configPath),
		newCompactCmd(&configPath),
		newDumpCmd(&configPath),
		newVerifyCmd(&configPath),
		newReconcileCmd(&configPath),
		newResnapshotCmd(&configPath),
		newConfigCmd(&configPath),
		newVersionCmd(),
	)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// What main prints is scrubbed like the log: with the secrets of the
	// environment, and of the configuration once the command is known.
	scrub := scrubberFor(config.Config{})
	var (
		act     *audit
		started bool // PersistentPreRunE ran
	)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		started = true
		cfg, err := config.Load(configPath, os.Environ()) // best effort: the command reports its own errors
		if err != nil {
			cfg = config.Default()
		}
		scrub = scrubberFor(cfg)
		id, err := runs.NewID(time.Now(), nil)
		if err != nil {
			return err
		}
		act = newAudit(actionOf(cmd), id, args, cfg.Log.Format, cmd.ErrOrStderr(), scrub)
		act.begin()
		cmd.SetContext(withAudit(cmd.Context(), act))
		return nil
	}
	err := root.Execute()
	if !started && err != nil {
		// Cobra failed before the command ran (a flag that does not
		// parse): its message may quote an argument, so the
		// configuration's secrets are wanted too.
		if cfg, lerr := config.Load(configPath, os.Environ()); lerr == nil {
			scrub = scrubberFor(cfg)
		}
	}
	code := ExitOK
	if err != nil {
		code = exitCode(err)
	}
	act.end(code, err)
	if err == nil {
		return code
	}
	fmt.Fprintf(os.Stderr, "pg-cdc: %s\n", scrub.Scrub(err.Error()))
	if hint := cdc.HintOf(err); hint != "" {
		fmt.Fprintf(os.Stderr, "hint: %s\n", scrub.Scrub(hint))
	}
	if code == ExitUsage && !errors.As(err, new(usageError)) && !errors.Is(err, postgres.ErrPreflight) {
		// Cobra's own argument errors (unknown command or flag) land here.
		fmt.Fprintln(os.Stderr, "run 'pg-cdc --help' for usage")
	}
	return code
}
