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
		Long: `print writes the configuration pg-cdc would run with, after the defaults,
the file, ${VAR} expansion and the PGCDC_* overrides, as a YAML file that
sets every key: it can be read back with --config. A configuration that
does not validate is refused (exit 2) with every problem.

Passwords are replaced with xxxxx (the source URL's user info and its
password= and sslpassword= parameters, storage.endpoint's user info), and
anything else that looks like a secret or equals a known one is scrubbed as
in the log. --redacted=false prints the values as loaded, secrets included;
the audit stream records that it was asked for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(app.configPath)
			if err != nil {
				return err
			}
			if !redacted {
				out, err := cfg.YAML()
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "pg-cdc: --redacted=false: the output holds secrets")
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			out, err := cfg.Redacted().YAML()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), scrubberFor(cfg).Scrub(string(out)))
			return err
		},
	}
	printCmd.Flags().BoolVar(&redacted, "redacted", true, "replace secrets with xxxxx (--redacted=false prints them)")
	cmd.AddCommand(printCmd)
	return cmd
}
