package iceberg

import (
	"context"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
)

// Catalog kinds (catalog.iceberg.type).
const (
	KindSQL  = "sql"
	KindREST = "rest"
	KindGlue = "glue"
)

// OpenOptions say which Iceberg catalog to open over a filesystem sink.
type OpenOptions struct {
	// Kind is KindSQL (the embedded catalog, SQLite at URI), KindREST
	// (a REST catalog at URI, with Properties) or KindGlue (the AWS Glue
	// Data Catalog that Properties name; no URI).
	Kind       string
	URI        string
	Properties map[string]string
	// Warehouse is the sink's root: the tables' files and metadata.
	Warehouse string
}

// Open opens the catalog o names; close releases it. A REST or Glue
// catalog is opened at its first use and again after a failed open
// (Lazy): a catalog that is down must not stop start, whose publisher
// retries.
func Open(o OpenOptions) (catalog.Catalog, func() error, error) {
	switch o.Kind {
	case KindREST:
		l := NewLazy(func(ctx context.Context) (*Adapter, func() error, error) {
			return OpenREST(ctx, o.URI, o.Warehouse, o.Properties)
		})
		return l, l.Close, nil
	case KindGlue:
		l := NewLazy(func(ctx context.Context) (*Adapter, func() error, error) {
			return OpenGlue(ctx, o.Warehouse, o.Properties)
		})
		return l, l.Close, nil
	case KindSQL:
		return OpenSQL(o.URI, o.Warehouse)
	default:
		return nil, nil, fmt.Errorf("catalog.iceberg.type %q: want %s, %s or %s", o.Kind, KindSQL, KindREST, KindGlue)
	}
}
