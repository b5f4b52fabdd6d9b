package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// PreflightReport is what preflight found; its JSON form is
// `pg-cdc preflight --format json`.
type PreflightReport struct {
	Provider string  `json:"provider"`
	Checks   []Check `json:"checks"`
	Failed   int     `json:"failed"`
	Warnings int     `json:"warnings"`
}

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func checkOf(c postgres.Check) Check {
	return Check{Name: c.Name, Status: string(c.Status), Detail: c.Detail, Fix: c.Fix}
}

func fail(name, detail, fix string) Check {
	return Check{Name: name, Status: string(postgres.StatusFail), Detail: detail, Fix: fix}
}

// PreflightSink says how preflight reaches the sink: Open opens it (its
// failure is a failed check, not an error), and a filesystem sink's Path is
// judged without creating it.
type PreflightSink struct {
	Open func(context.Context) (Sink, error)
	Path string // the filesystem sink's directory; "" for an object store
}

// Preflight runs every check init and start depend on and changes nothing
// on the source: the source's (postgres.RunPreflight), the type overrides,
// the sink's (the conditional-write probe, the manifest, its owner) and
// the upstream's identity against the manifest. It fails only when
// interrupted; the report holds every problem, each with its fix.
func (c *Capture) Preflight(ctx context.Context, sink PreflightSink) (PreflightReport, error) {
	sinkChecks, m := c.preflightSink(ctx, sink)
	target := postgres.PreflightTarget{
		Provider: c.Provider, Publication: c.Publication, Slot: c.Slot,
		Schemas: c.Tables.Schemas, Include: c.Tables.Include, Exclude: c.Tables.Exclude,
	}
	if m != nil {
		// After init the captured tables are the manifest's, whatever the
		// configuration says now.
		target.Initialized, target.EndLSN, target.Include, target.Exclude = true, m.EndLSN, nil, nil
		for _, key := range SortedTables(m) {
			target.Include = append(target.Include, m.Tables[key].ID())
		}
	}
	src := postgres.RunPreflight(ctx, c.Source, target)
	if err := ctx.Err(); err != nil {
		return PreflightReport{}, err // interrupted: the checks that ran meanwhile failed for that
	}
	rep := PreflightReport{Provider: string(src.Provider)}
	for _, ch := range src.Checks {
		rep.Checks = append(rep.Checks, checkOf(ch))
	}
	if m == nil && src.Tables != nil && len(c.Tables.Types) > 0 {
		// init applies the type overrides to the discovered tables.
		ch := Check{Name: "types", Status: string(postgres.StatusOK), Detail: fmt.Sprintf("every types: key names a captured column (%d)", len(c.Tables.Types))}
		if err := ApplyTypeOverrides(src.Tables, c.Tables.Types); err != nil {
			ch = fail("types", err.Error(), "correct or remove the types: keys (schema.table.column, as PostgreSQL spells the names)")
		}
		rep.Checks = append(rep.Checks, ch)
	}
	rep.Checks = append(rep.Checks, sinkChecks...)
	if m != nil && src.Identity.SystemIdentifier != "" {
		if err := CheckIdentity(m, src.Identity); err != nil {
			rep.Checks = append(rep.Checks, fail("manifest", err.Error()+" (start exits 12)", cdc.HintOf(err)))
		}
	}
	for _, ch := range rep.Checks {
		switch postgres.Status(ch.Status) {
		case postgres.StatusFail:
			rep.Failed++
		case postgres.StatusWarn:
			rep.Warnings++
		}
	}
	return rep, nil
}

// Err is the report's verdict: postgres.ErrPreflight (exit 2) when a check
// failed.
func (r PreflightReport) Err() error {
	if r.Failed == 0 {
		return nil
	}
	return &cdc.Error{Class: postgres.ErrPreflight,
		Msg:  fmt.Sprintf("%d of %d preflight checks failed", r.Failed, len(r.Checks)),
		Hint: "each failed check above is followed by its fix; run 'pg-cdc preflight' again once they are applied"}
}

// preflightSink checks the sink: that it exists or can be created, that it
// enforces conditional writes (the probe start runs, design.md §2.3), and
// what manifest it holds. The manifest is returned when there is one, so the
// source checks can hold the slot and publication to it.
//
// A filesystem sink whose directory does not exist is not created (a typo
// in storage.path would otherwise leave a stray directory): its nearest
// existing parent must be a writable directory, and init creates the rest.
// Its probe is then skipped; the filesystem sink enforces conditional writes
// by construction (flock and rename) on the local filesystems it supports.
func (c *Capture) preflightSink(ctx context.Context, sink PreflightSink) ([]Check, *manifest.Manifest) {
	if sink.Path != "" {
		if ch, missing := MissingDirectory(sink.Path); missing {
			return []Check{ch}, nil
		}
	}
	store, err := sink.Open(ctx)
	if err != nil {
		return []Check{fail("sink", err.Error(), "check storage.* in the configuration, the bucket or directory, and the credentials")}, nil
	}
	out, ok := c.probeCheck(ctx, store)
	if !ok {
		return out, nil
	}
	m, _, err := manifest.Load(ctx, store)
	switch {
	case errors.Is(err, cdc.ErrNotInitialized):
		return append(out, Check{Name: "manifest", Status: string(postgres.StatusOK),
			Detail: fmt.Sprintf("no manifest in %s: not initialized yet ('pg-cdc init' takes the snapshot)", c.SinkName)}), nil
	case err != nil:
		return append(out, fail("manifest", err.Error(), "the manifest does not load: keep a copy of _pgcdc/manifest.json for the report")), nil
	}
	out = append(out, Check{Name: "manifest", Status: string(postgres.StatusOK),
		Detail: fmt.Sprintf("initialized at epoch %d (end LSN %s, slot %s, tables: %d)", m.Epoch, m.EndLSN, m.Source.Slot, len(m.Tables))})
	if err := c.CheckOwner(m); err != nil {
		out = append(out, fail("manifest", err.Error()+" (start exits 12)", cdc.HintOf(err)))
	}
	return out, m
}

// probeCheck runs the conditional-write probe; ok is false when the sink
// cannot be used at all.
func (c *Capture) probeCheck(ctx context.Context, store Sink) (_ []Check, ok bool) {
	host, _ := os.Hostname()
	// One key per host: the filesystem sink keeps a lock file per probed
	// key, so a key per run would leave one behind at every run.
	key := "_pgcdc/probe/preflight-" + KeySafe(host)
	name := c.SinkName
	switch err := blob.ProbeConditional(ctx, store, key); {
	case err == nil:
		return []Check{{Name: "sink", Status: string(postgres.StatusOK),
			Detail: fmt.Sprintf("sink %s enforces conditional writes (probe written and deleted)", name)}}, true
	case errors.Is(err, blob.ErrConditionalIgnored) && c.AcceptSingleWriterRisk:
		return []Check{{Name: "sink", Status: string(postgres.StatusWarn),
			Detail: fmt.Sprintf("sink %s ignores conditional writes (%v); storage.accept_single_writer_risk is set, so a second writer would go undetected", name, err),
			Fix:    "use a store that enforces If-Match / If-None-Match (or generation preconditions)"}}, true
	case errors.Is(err, blob.ErrConditionalIgnored):
		return []Check{fail("sink", fmt.Sprintf("sink %s ignores conditional writes: %v (start and init exit 14)", name, err),
			"use a store that enforces If-Match / If-None-Match (or generation preconditions); if this pg-cdc is certainly the only writer, set storage.accept_single_writer_risk: true")}, false
	default:
		return []Check{fail("sink", fmt.Sprintf("sink %s: %v", name, err),
			"check that these credentials may write, read and delete objects under the storage path or prefix (_pgcdc/)")}, false
	}
}

// MissingDirectory reports a filesystem sink path that does not exist yet,
// judged by its nearest existing parent. missing is false when the path
// exists (or cannot be examined: opening the sink then says why).
func MissingDirectory(path string) (Check, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Check{}, false
	}
	if _, err := os.Stat(abs); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
		return Check{}, false
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
		return fail("sink", fmt.Sprintf("storage.path %s does not exist, and %v", path, err), "create it (mkdir -p), or choose another storage.path"), true
	case !fi.IsDir():
		return fail("sink", fmt.Sprintf("storage.path %s cannot be created: %s is not a directory", path, parent), "choose another storage.path"), true
	case unix.Access(parent, unix.W_OK|unix.X_OK) != nil:
		return fail("sink", fmt.Sprintf("storage.path %s does not exist, and this user may not create it in %s", path, parent),
			fmt.Sprintf("create it for the user pg-cdc runs as: mkdir -p %s && chown <user> %s", abs, abs)), true
	}
	return Check{Name: "sink", Status: string(postgres.StatusOK),
		Detail: fmt.Sprintf("storage.path %s does not exist yet; init creates it in %s, which is writable (conditional writes: the filesystem sink's own, not probed)", path, parent)}, true
}
