// Command pg-cdc streams a PostgreSQL database's committed changes into
// typed Parquet files and a manifest. See README.md and docs/.
//
// This package is thin: it reads the configuration, builds the adapters
// with an explicit switch (app.go), runs one of the two libraries that own
// the work (internal/daemon for start, internal/capture for every other
// command), prints what they report, and maps errors to exit codes by
// their class (exitcode.go, docs/exit-codes.md). Only here are errors
// printed, scrubbed of secrets like the log; here too each operator action
// is audited (internal/audit).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/audit"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/logging"
	"github.com/pg-cdc/pg-cdc/internal/profiling"
)

func main() {
	stopProfiles := profiling.Start()
	code := run(os.Args[1:])
	stopProfiles()
	os.Exit(code)
}

// cli is what every command shares: the configuration's path and, once a
// command runs, its audit, run id and scrubber.
type cli struct {
	configPath string
	args       []string
	audit      *audit.Log
	runID      string
	scrub      *logging.Scrubber
}

// newRoot is the command tree, every command's usage errors marked and
// its long help set.
func newRoot(app *cli) *cobra.Command {
	root := &cobra.Command{
		Use:           "pg-cdc",
		Short:         "Stream PostgreSQL changes into Parquet files with a manifest",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return commandLine(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
			}
			return cmd.Help()
		},
	}
	defaultConfig := "./pg-cdc.yml"
	if p := os.Getenv("PGCDC_CONFIG"); p != "" {
		defaultConfig = p
	}
	root.PersistentFlags().StringVarP(&app.configPath, "config", "c", defaultConfig, "configuration file (default from PGCDC_CONFIG)")
	root.AddCommand(
		newPreflightCmd(app), newInitCmd(app), newStartCmd(app), newStatusCmd(app), newTeardownCmd(app),
		newRebuildCmd(app), newCompactCmd(app), newDumpCmd(app), newVerifyCmd(app), newReconcileCmd(app),
		newResnapshotCmd(app), newQueryCmd(app), newDiffCmd(app), newRefsCmd(app), newPromoteCmd(app),
		newServeCmd(app), newMCPCmd(app), newCatalogCmd(app),
		newConfigCmd(app), newVersionCmd(),
	)
	usageArgs(root)
	setHelp(root)
	return root
}

func run(args []string) int {
	app := &cli{args: args, scrub: scrubberFor(config.Config{})}
	root := newRoot(app)
	root.SetArgs(args)
	started := false
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		started = true
		return app.begin(cmd)
	}
	err := root.Execute()
	if !started && err != nil {
		// Cobra failed before the command ran (a flag that does not
		// parse): its message may quote an argument, so the
		// configuration's secrets are wanted too.
		if cfg, lerr := config.Load(app.configPath, os.Environ()); lerr == nil {
			app.scrub = scrubberFor(cfg)
		}
	}
	code := exitCode(err)
	app.audit.End(code, err)
	if err == nil {
		return code
	}
	fmt.Fprintf(os.Stderr, "pg-cdc: %s\n", app.scrub.Scrub(err.Error()))
	if hint := cdc.HintOf(err); hint != "" {
		fmt.Fprintf(os.Stderr, "hint: %s\n", app.scrub.Scrub(hint))
	}
	if errors.As(err, new(commandLineError)) {
		fmt.Fprintln(os.Stderr, "run 'pg-cdc --help' for usage")
	}
	return code
}

// begin scrubs with the configuration's secrets from here on, and starts
// the command's audit.
func (app *cli) begin(cmd *cobra.Command) error {
	cfg, err := config.Load(app.configPath, os.Environ()) // best effort: the command reports its own errors
	if err != nil {
		cfg = config.Default()
	}
	app.scrub = scrubberFor(cfg)
	if app.runID, err = audit.NewRunID(); err != nil {
		return err
	}
	_, action, _ := strings.Cut(cmd.CommandPath(), " ") // "start", "config print"
	app.audit = audit.New(action, app.runID, app.args, audit.TextOrJSON(cfg.Log.Format, cmd.ErrOrStderr()), app.scrub)
	app.audit.Begin()
	return nil
}

// commandLineError is a usage error of the command line itself (an
// argument, a flag), after which main points at --help.
type commandLineError struct{ error }

func (e commandLineError) Unwrap() error { return e.error }

func commandLine(err error) error { return commandLineError{cdc.Usage(err)} }

// usageArgs makes every command's argument and flag errors command-line
// usage errors.
func usageArgs(cmd *cobra.Command) {
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return commandLine(err)
			}
			return nil
		}
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return commandLine(err) })
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}
