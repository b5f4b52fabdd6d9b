//go:build !noiceberg && !nodb

package main

import (
	"context"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

// openIceberg opens the catalog.iceberg.type catalog (iceberg-go) over the
// storage.type sink st, whose store is sink: the tables' locations are the
// sink's (file://, s3://, gs://) and iceberg-go's IO reaches them with the
// sink's endpoint and credentials.
func openIceberg(kind, uri string, st config.StorageConfig, sink blob.Store, props map[string]string) (catalog.Catalog, func() error, error) {
	return iceberg.Open(iceberg.OpenOptions{Kind: kind, URI: uri, Properties: props, Sink: iceberg.Sink{
		Type: st.Type, Path: st.Path, Bucket: st.Bucket, Prefix: st.Prefix, Region: st.Region, Endpoint: st.Endpoint,
		ForcePathStyle: st.ForcePathStyle, CredentialsFile: st.CredentialsFile, Store: sink}})
}

// tombstones reads the positions of a sink file's tombstones, through the
// sink's store.
func tombstones(sink blob.Store) func(context.Context, string) ([]int64, error) {
	if sink == nil {
		return nil
	}
	return iceberg.TombstonesIn(sink)
}
