package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Provider is where the source server runs. It decides how a setting is
// changed and a privilege granted, so the fixes that preflight and init
// print name the commands that work there: a managed service has no
// postgresql.conf, no ALTER SYSTEM and no SUPERUSER.
type Provider string

// Providers. The values are the ones source.postgres.provider takes.
const (
	// ProviderAuto asks DB.Provider to recognise the server.
	ProviderAuto Provider = "auto"
	// ProviderSelfManaged: postgresql.conf or ALTER SYSTEM, a restart,
	// ALTER ROLE ... REPLICATION as a superuser.
	ProviderSelfManaged Provider = "self-managed"
	// ProviderRDS: Amazon RDS for PostgreSQL. Settings live in the
	// instance's DB parameter group (rds.logical_replication = 1 sets
	// wal_level), replication is the rds_replication role.
	ProviderRDS Provider = "rds"
	// ProviderAurora: Aurora PostgreSQL. As RDS, but the settings live in
	// the DB cluster parameter group and the writer instance is rebooted.
	ProviderAurora Provider = "aurora"
)

// providerEvidence is what a server shows of a managed service. Each item
// is readable by any role.
type providerEvidence struct {
	auroraVersion bool // a function aurora_version() exists (Aurora only)
	rdsSuperuser  bool // the role rds_superuser exists (RDS and Aurora)
	rdsExtensions bool // the setting rds.extensions exists (RDS and Aurora)
}

// provider judges the evidence: Aurora has aurora_version(); RDS and Aurora
// both have rds_superuser and rds.extensions; anything else is taken as
// self-managed (other managed services get the self-managed fixes, which
// name the setting and the privilege all the same).
func (e providerEvidence) provider() Provider {
	switch {
	case e.auroraVersion:
		return ProviderAurora
	case e.rdsSuperuser || e.rdsExtensions:
		return ProviderRDS
	default:
		return ProviderSelfManaged
	}
}

// String says what the judgement rests on, for preflight's output.
func (e providerEvidence) String() string {
	var seen []string
	if e.auroraVersion {
		seen = append(seen, "aurora_version() exists")
	}
	if e.rdsSuperuser {
		seen = append(seen, "role rds_superuser exists")
	}
	if e.rdsExtensions {
		seen = append(seen, "setting rds.extensions exists")
	}
	if len(seen) == 0 {
		return "no rds_superuser role, rds.extensions setting or aurora_version() function"
	}
	return strings.Join(seen, ", ")
}

func (db *DB) providerEvidence(ctx context.Context) (providerEvidence, error) {
	var e providerEvidence
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'aurora_version'),
				EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_superuser'),
				current_setting('rds.extensions', true) IS NOT NULL`).
			Scan(&e.auroraVersion, &e.rdsSuperuser, &e.rdsExtensions)
	})
	if err != nil {
		return providerEvidence{}, fmt.Errorf("detect provider of %s: %w", db.server, err)
	}
	return e, nil
}

// Provider returns configured, unless it is ProviderAuto (or empty): then
// it recognises the server (see providerEvidence).
func (db *DB) Provider(ctx context.Context, configured Provider) (Provider, error) {
	if configured != ProviderAuto && configured != "" {
		return configured, nil
	}
	e, err := db.providerEvidence(ctx)
	if err != nil {
		return "", err
	}
	return e.provider(), nil
}

// providerCheck resolves the provider and says how: as configured, or
// detected and why. A configured provider the server contradicts is a
// warning (the fixes follow the configuration). When detection fails, the
// fixes are the self-managed ones.
func (db *DB) providerCheck(ctx context.Context, configured Provider) (Check, Provider) {
	e, err := db.providerEvidence(ctx)
	if err != nil {
		p := configured
		if p == ProviderAuto || p == "" {
			p = ProviderSelfManaged
		}
		return Check{Name: "provider", Status: StatusWarn, Detail: fmt.Sprintf("%v; fixes below are for %s", err, p),
			Fix: "set source.postgres.provider to self-managed, rds or aurora"}, p
	}
	detected := e.provider()
	switch {
	case configured == ProviderAuto || configured == "":
		return Check{Name: "provider", Status: StatusOK, Detail: fmt.Sprintf("provider %s (detected: %s)", detected, e)}, detected
	case configured != detected:
		return Check{Name: "provider", Status: StatusWarn,
			Detail: fmt.Sprintf("provider %s (configured), but the server looks %s (%s); fixes below are for %s", configured, detected, e, configured),
			Fix:    fmt.Sprintf("set source.postgres.provider to %s, or to auto", detected)}, configured
	default:
		return Check{Name: "provider", Status: StatusOK, Detail: fmt.Sprintf("provider %s (configured; detected: %s)", configured, e)}, configured
	}
}
