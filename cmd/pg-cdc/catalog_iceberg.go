//go:build !noiceberg && !nodb

package main

import (
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
)

// openIcebergSQL opens the embedded SQL catalog (iceberg-go, SQLite).
func openIcebergSQL(path, root string) (catalog.Catalog, func() error, error) {
	return iceberg.OpenSQL(path, root)
}
