package main

import (
	"context"
	"os"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/postgres/rdsiam"
)

// sourceConn says how every connection to the source is opened: the URL's
// ${VAR} references are resolved from the process environment again for
// each connection (config.PostgresConfig.ResolveURL), and with
// source.postgres.iam_auth each connection signs in with a fresh RDS IAM
// token. An AWS configuration that names no region, or does not load, is a
// configuration error.
func sourceConn(ctx context.Context, cfg config.Config) (postgres.ConnSpec, error) {
	pc := cfg.Source.Postgres
	spec := postgres.ConnSpec{
		URL: func(context.Context) (string, error) { return pc.ResolveURL(os.LookupEnv) },
	}
	if pc.IAMAuth {
		tokens, err := rdsiam.Load(ctx, pc.Region)
		if err != nil {
			return postgres.ConnSpec{}, usageError{err}
		}
		spec.Password = tokens.Password
	}
	return spec, nil
}

// connectSource opens the source database for a command.
func connectSource(ctx context.Context, cfg config.Config) (*postgres.DB, error) {
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return postgres.Connect(ctx, spec)
}

// openSource opens the source database for a command that will also open a
// replication connection (with spec) and judges the upstream itself (with
// its identity): init and rebuild.
func openSource(ctx context.Context, cfg config.Config) (postgres.ConnSpec, *postgres.DB, postgres.Identity, error) {
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return spec, nil, postgres.Identity{}, err
	}
	db, err := postgres.Connect(ctx, spec)
	if err != nil {
		return spec, nil, postgres.Identity{}, err
	}
	ident, err := db.Identity(ctx)
	if err != nil {
		db.Close()
		return spec, nil, postgres.Identity{}, err
	}
	return spec, db, ident, nil
}

// connectUpstream opens the source database and checks that it is the one
// m was built from (DESIGN §1): a command must not act on another database
// that happens to answer at the same address.
func connectUpstream(ctx context.Context, cfg config.Config, m *manifest.Manifest) (*postgres.DB, error) {
	db, err := connectSource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ident, err := db.Identity(ctx)
	if err == nil {
		err = checkIdentity(m, ident)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
