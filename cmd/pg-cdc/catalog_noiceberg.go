//go:build noiceberg || nodb

package main

import (
	"context"
	"errors"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

// openIceberg refuses: this binary was built without iceberg-go (-tags
// noiceberg, as make demo builds it, or the static streaming-only -tags
// nodb): iceberg-go, arrow-go and SQLite more than double a cold build.
func openIceberg(kind, uri string, st config.StorageConfig, sink blob.Store, props map[string]string) (catalog.Catalog, func() error, error) {
	return nil, nil, errNoIceberg
}

func tombstones(blob.Store) func(context.Context, string) ([]int64, error) { return nil }

var errNoIceberg = cdc.Usage(errors.New("catalog.type iceberg: this pg-cdc was built without the Iceberg publisher (-tags noiceberg or nodb); build it with 'make build'"))
