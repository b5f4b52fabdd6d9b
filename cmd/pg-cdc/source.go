package main

import (
	"context"
	"os"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// sourceConn says how every connection to the source is opened: the URL's
// ${VAR} references are resolved from the process environment again for
// each connection (config.PostgresConfig.ResolveURL).
func sourceConn(_ context.Context, cfg config.Config) (postgres.ConnSpec, error) {
	pc := cfg.Source.Postgres
	return postgres.ConnSpec{
		URL: func(context.Context) (string, error) { return pc.ResolveURL(os.LookupEnv) },
	}, nil
}
