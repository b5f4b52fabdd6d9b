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

// OpenOptions say which Iceberg catalog to open over which sink.
type OpenOptions struct {
	// Kind is KindSQL (the embedded catalog, SQLite at URI), KindREST
	// (a REST catalog at URI, with Properties) or KindGlue (the AWS Glue
	// Data Catalog that Properties name; no URI).
	Kind       string
	URI        string
	Properties map[string]string
	// Sink is the sink the tables' files and metadata are in. When its
	// Type is empty, Warehouse is a filesystem sink's root.
	Sink Sink
	// Warehouse is a filesystem sink's root, when Sink is not set.
	Warehouse string
}

// Open opens the catalog o names; close releases it. A REST or Glue
// catalog is opened at its first use and again after a failed open
// (Lazy): a catalog that is down must not stop start, whose publisher
// retries.
func Open(o OpenOptions) (catalog.Catalog, func() error, error) {
	sink := o.Sink
	if sink.Type == "" {
		sink = Sink{Type: SinkFilesystem, Path: o.Warehouse, Store: o.Sink.Store}
	}
	wh, err := NewWarehouse(sink)
	if err != nil {
		return nil, nil, err
	}
	switch o.Kind {
	case KindREST:
		l := NewLazy(func(ctx context.Context) (*Adapter, func() error, error) {
			return OpenREST(ctx, o.URI, wh, o.Properties)
		})
		return l, l.Close, nil
	case KindGlue:
		l := NewLazy(func(ctx context.Context) (*Adapter, func() error, error) {
			return OpenGlue(ctx, wh, o.Properties)
		})
		return l, l.Close, nil
	case KindSQL:
		return OpenSQL(o.URI, wh, o.Properties)
	default:
		return nil, nil, fmt.Errorf("catalog.iceberg.type %q: want %s, %s or %s", o.Kind, KindSQL, KindREST, KindGlue)
	}
}
