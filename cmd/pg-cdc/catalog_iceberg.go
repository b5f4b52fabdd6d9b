//go:build !noiceberg && !nodb

package main

import (
	"context"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
)

// openIceberg opens the catalog.iceberg.type catalog (iceberg-go) over the
// filesystem sink at warehouse.
func openIceberg(kind, uri, warehouse string, props map[string]string) (catalog.Catalog, func() error, error) {
	return iceberg.Open(iceberg.OpenOptions{Kind: kind, URI: uri, Warehouse: warehouse, Properties: props})
}

// tombstones reads the positions of a filesystem sink file's tombstones.
func tombstones(root string) func(context.Context, string) ([]int64, error) {
	return iceberg.Tombstones(root)
}
