package main

import (
	"context"
	"os"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
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
			return postgres.ConnSpec{}, cdc.Usage(err)
		}
		spec.Password = tokens.Password
	}
	return spec, nil
}
