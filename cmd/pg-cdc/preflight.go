package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func newPreflightCmd(configPath *string) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check that the source and the sink are ready for pg-cdc, with the fix for each problem",
		Long: `preflight runs every check init and start depend on, changes nothing on
the source, and prints one line per check (✓ passed, ! warning, ✗ failed),
each problem followed by the exact fix for the provider it runs on
(source.postgres.provider: self-managed, rds or aurora; auto detects it).

Source: server version, wal_level, replication privilege, CREATE on the
database, free replication slots and WAL senders, a replication connection,
the captured tables' names, replica identity and SELECT privilege, the
publication and the slot. Sink: the conditional-write probe (it writes and
deletes one object under _pgcdc/probe/) and the manifest. A filesystem sink
whose directory does not exist yet is not created: its parent must be
writable, and init creates it.

Exit 0 when nothing failed (warnings allowed), 2 when a check failed.
See docs/preflight.md.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, _ *slog.Logger, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return usageError{fmt.Errorf("--format %q: want text or json", format)}
		}
		return runPreflight(ctx, cfg, cmd.OutOrStdout(), format)
	})
	return cmd
}

// preflightReport is what preflight prints; its JSON form is the
// --format json output.
type preflightReport struct {
	Provider string      `json:"provider"`
	Checks   []checkLine `json:"checks"`
	Failed   int         `json:"failed"`
	Warnings int         `json:"warnings"`
}

type checkLine struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func line(c postgres.Check) checkLine {
	return checkLine{Name: c.Name, Status: string(c.Status), Detail: c.Detail, Fix: c.Fix}
}

func runPreflight(ctx context.Context, cfg config.Config, out io.Writer, format string) error {
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return err
	}
	sinkChecks, m := preflightSink(ctx, cfg)

	target := postgres.PreflightTarget{
		Provider:    postgres.Provider(cfg.Source.Postgres.Provider),
		Publication: cfg.Replication.Publication,
		Slot:        cfg.Replication.Slot,
		Schemas:     cfg.Source.Postgres.Schemas,
		Exclude:     cfg.Tables.Exclude,
	}
	if m != nil {
		// After init the captured tables are the manifest's, whatever the
		// configuration says now.
		target.Initialized, target.EndLSN = true, m.EndLSN
		for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
			t := m.Tables[key]
			target.Include = append(target.Include, cdc.TableID{Schema: t.Schema, Name: t.Name})
		}
		target.Exclude = nil
	} else if target.Include, err = cfg.IncludeIDs(); err != nil {
		return usageError{err}
	}
	src := postgres.RunPreflight(ctx, spec, target)
	if err := ctx.Err(); err != nil {
		return err // interrupted: the checks that ran meanwhile failed for that
	}

	rep := preflightReport{Provider: string(src.Provider)}
	for _, c := range src.Checks {
		rep.Checks = append(rep.Checks, line(c))
	}
	if m == nil && src.Tables != nil && len(cfg.Types) > 0 {
		// init applies the type overrides to the discovered tables.
		c := checkLine{Name: "types", Status: string(postgres.StatusOK), Detail: fmt.Sprintf("every types: key names a captured column (%d)", len(cfg.Types))}
		if err := applyTypeOverrides(src.Tables, cfg.Types); err != nil {
			c = checkLine{Name: "types", Status: string(postgres.StatusFail), Detail: err.Error(),
				Fix: "correct or remove the types: keys (schema.table.column, as PostgreSQL spells the names)"}
		}
		rep.Checks = append(rep.Checks, c)
	}
	rep.Checks = append(rep.Checks, sinkChecks...)
	if m != nil && src.Identity.SystemIdentifier != "" {
		if err := checkIdentity(m, src.Identity); err != nil {
			rep.Checks = append(rep.Checks, checkLine{Name: "manifest", Status: string(postgres.StatusFail),
				Detail: err.Error() + " (start exits 12)", Fix: cdc.HintOf(err)})
		}
	}

	for _, c := range rep.Checks {
		switch postgres.Status(c.Status) {
		case postgres.StatusFail:
			rep.Failed++
		case postgres.StatusWarn:
			rep.Warnings++
		}
	}
	if err := printPreflight(out, rep, format); err != nil {
		return err
	}
	if rep.Failed > 0 {
		return &cdc.Error{Class: postgres.ErrPreflight,
			Msg:  fmt.Sprintf("%d of %d preflight checks failed", rep.Failed, len(rep.Checks)),
			Hint: "each failed check above is followed by its fix; run 'pg-cdc preflight' again once they are applied"}
	}
	return nil
}

func printPreflight(out io.Writer, rep preflightReport, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	}
	mark := map[string]string{string(postgres.StatusOK): "✓", string(postgres.StatusWarn): "!", string(postgres.StatusFail): "✗"}
	for _, c := range rep.Checks {
		fmt.Fprintf(out, "%s %s\n", mark[c.Status], c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(out, "    fix: %s\n", c.Fix)
		}
	}
	provider := rep.Provider
	if provider == "" {
		provider = "unknown"
	}
	warnings := "warnings"
	if rep.Warnings == 1 {
		warnings = "warning"
	}
	_, err := fmt.Fprintf(out, "preflight: %d passed, %d %s, %d failed (fixes for provider %s)\n",
		len(rep.Checks)-rep.Failed-rep.Warnings, rep.Warnings, warnings, rep.Failed, provider)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// preflightSink checks the sink: that it exists or can be created, that it
// enforces conditional writes (the probe start runs, DESIGN §2), and what
// manifest it holds. The manifest is returned when there is one, so the
// source checks can hold the slot and publication to it.
//
// A filesystem sink whose directory does not exist is not created (a typo
// in storage.path would otherwise leave a stray directory): its nearest
// existing parent must be a writable directory, and init creates the rest.
// Its probe is then skipped; the filesystem sink enforces conditional writes
// by construction (flock and rename) on the local filesystems it supports.
func preflightSink(ctx context.Context, cfg config.Config) ([]checkLine, *manifest.Manifest) {
	fail := func(name, detail, fix string) []checkLine {
		return []checkLine{{Name: name, Status: string(postgres.StatusFail), Detail: detail, Fix: fix}}
	}
	name := sinkName(cfg)
	if cfg.Storage.Type == config.StorageFilesystem {
		if c, missing := missingDirectory(cfg.Storage.Path); missing {
			return []checkLine{c}, nil
		}
	}
	store, err := openSink(ctx, cfg)
	if err != nil {
		return fail("sink", err.Error(), "check storage.* in the configuration, the bucket or directory, and the credentials"), nil
	}
	host, _ := os.Hostname()
	// One key per host: the filesystem sink keeps a lock file per probed
	// key, so a key per run would leave one behind at every run.
	key := "_pgcdc/probe/preflight-" + keySafe(host)
	var out []checkLine
	switch err := blob.ProbeConditional(ctx, store, key); {
	case err == nil:
		out = append(out, checkLine{Name: "sink", Status: string(postgres.StatusOK),
			Detail: fmt.Sprintf("sink %s enforces conditional writes (probe written and deleted)", name)})
	case errors.Is(err, blob.ErrConditionalIgnored) && cfg.Storage.AcceptSingleWriterRisk:
		out = append(out, checkLine{Name: "sink", Status: string(postgres.StatusWarn),
			Detail: fmt.Sprintf("sink %s ignores conditional writes (%v); storage.accept_single_writer_risk is set, so a second writer would go undetected", name, err),
			Fix:    "use a store that enforces If-Match / If-None-Match (or generation preconditions)"})
	case errors.Is(err, blob.ErrConditionalIgnored):
		return fail("sink", fmt.Sprintf("sink %s ignores conditional writes: %v (start and init exit 14)", name, err),
			"use a store that enforces If-Match / If-None-Match (or generation preconditions); if this pg-cdc is certainly the only writer, set storage.accept_single_writer_risk: true"), nil
	default:
		return fail("sink", fmt.Sprintf("sink %s: %v", name, err),
			"check that these credentials may write, read and delete objects under the storage path or prefix (_pgcdc/)"), nil
	}

	m, _, err := manifest.Load(ctx, store)
	switch {
	case errors.Is(err, cdc.ErrNotInitialized):
		out = append(out, checkLine{Name: "manifest", Status: string(postgres.StatusOK),
			Detail: fmt.Sprintf("no manifest in %s: not initialized yet ('pg-cdc init' takes the snapshot)", name)})
		return out, nil
	case err != nil:
		return append(out, fail("manifest", err.Error(), "the manifest does not load: keep a copy of _pgcdc/manifest.json for the report")...), nil
	}
	out = append(out, checkLine{Name: "manifest", Status: string(postgres.StatusOK),
		Detail: fmt.Sprintf("initialized at epoch %d (end LSN %s, slot %s, tables: %d)", m.Epoch, m.EndLSN, m.Source.Slot, len(m.Tables))})
	if err := checkOwner(m, cfg); err != nil {
		out = append(out, fail("manifest", err.Error()+" (start exits 12)", cdc.HintOf(err))...)
	}
	return out, m
}

// missingDirectory reports a filesystem sink path that does not exist yet,
// judged by its nearest existing parent. missing is false when the path
// exists (or cannot be examined: opening the sink then says why).
func missingDirectory(path string) (checkLine, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return checkLine{}, false
	}
	if _, err := os.Stat(abs); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
		return checkLine{}, false
	}
	parent := filepath.Dir(abs)
	for {
		if _, err := os.Stat(parent); !errors.Is(err, os.ErrNotExist) || parent == filepath.Dir(parent) {
			break
		}
		parent = filepath.Dir(parent)
	}
	fi, err := os.Stat(parent)
	switch {
	case err != nil:
		return checkLine{Name: "sink", Status: string(postgres.StatusFail), Detail: fmt.Sprintf("storage.path %s does not exist, and %v", path, err),
			Fix: "create it (mkdir -p), or choose another storage.path"}, true
	case !fi.IsDir():
		return checkLine{Name: "sink", Status: string(postgres.StatusFail), Detail: fmt.Sprintf("storage.path %s cannot be created: %s is not a directory", path, parent),
			Fix: "choose another storage.path"}, true
	case unix.Access(parent, unix.W_OK|unix.X_OK) != nil:
		return checkLine{Name: "sink", Status: string(postgres.StatusFail),
			Detail: fmt.Sprintf("storage.path %s does not exist, and this user may not create it in %s", path, parent),
			Fix:    fmt.Sprintf("create it for the user pg-cdc runs as: mkdir -p %s && chown <user> %s", abs, abs)}, true
	}
	return checkLine{Name: "sink", Status: string(postgres.StatusOK),
		Detail: fmt.Sprintf("storage.path %s does not exist yet; init creates it in %s, which is writable (conditional writes: the filesystem sink's own, not probed)", path, parent)}, true
}
