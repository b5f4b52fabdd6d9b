//go:build !noiceberg && !nodb

package main

import (
	"context"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
)

// openIcebergSQL opens the embedded SQL catalog (iceberg-go, SQLite).
func openIcebergSQL(path, root string) (catalog.Catalog, func() error, error) {
	return iceberg.OpenSQL(path, root)
}

// openIcebergREST returns a REST catalog opened at its first use.
func openIcebergREST(uri, root string, props map[string]string) (catalog.Catalog, func() error, error) {
	l := iceberg.NewLazy(func(ctx context.Context) (*iceberg.Adapter, func() error, error) {
		return iceberg.OpenREST(ctx, uri, root, props)
	})
	return l, l.Close, nil
}

// tombstones reads the positions of a filesystem sink file's tombstones.
func tombstones(root string) func(context.Context, string) ([]int64, error) {
	return iceberg.Tombstones(root)
}
