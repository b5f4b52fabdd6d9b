package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCmd(app *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect the configuration",
		Args:  cobra.NoArgs,
	}
	var redacted bool
	printCmd := &cobra.Command{
		Use:   "print",
		Short: "Print the effective configuration (defaults, file, environment) as YAML, secrets redacted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(app.configPath)
			if err != nil {
				return err
			}
			out, err := cfg.Redacted().YAML()
			if !redacted {
				fmt.Fprintln(cmd.ErrOrStderr(), "pg-cdc: --redacted=false: the output holds secrets")
				out, err = cfg.YAML()
			}
			if err != nil {
				return err
			}
			if redacted {
				out = []byte(scrubberFor(cfg).Scrub(string(out)))
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	printCmd.Flags().BoolVar(&redacted, "redacted", true, "replace secrets with xxxxx (--redacted=false prints them)")
	cmd.AddCommand(printCmd)
	return cmd
}
