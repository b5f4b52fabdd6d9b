package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	icebergio "github.com/apache/iceberg-go/io"
	// iceberg-go's IO for s3:// and gs:// locations: only file:// is
	// registered without them.
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Sink kinds (storage.type).
const (
	SinkFilesystem = "filesystem"
	SinkS3         = "s3"
	SinkGCS        = "gcs"
)

// Sink is the sink the tables' files are in, as the configuration names it
// (storage.*): the adapter package does not read the configuration itself.
type Sink struct {
	// Type is SinkFilesystem (the default when empty), SinkS3 or SinkGCS.
	Type string
	// Path is the filesystem sink's root.
	Path string
	// Bucket and Prefix place an object store sink.
	Bucket, Prefix string
	// Region, Endpoint and ForcePathStyle are the S3 sink's; Endpoint is
	// also a GCS emulator's.
	Region, Endpoint string
	ForcePathStyle   bool
	// CredentialsFile is the GCS sink's key file (empty: application
	// default credentials).
	CredentialsFile string
	// NoAuth sends GCS requests without credentials (an emulator).
	NoAuth bool
	// Store is the sink itself: the position delete files are written and
	// the tombstones read through it. Nil for a filesystem sink opens one
	// at Path.
	Store blob.Store
}

// Warehouse is a sink as Iceberg addresses it: the location every table
// file and metadata file is under, and the properties iceberg-go's IO
// needs to reach it with the sink's endpoint and credentials.
type Warehouse struct {
	// Location is file://<abs root>, s3://<bucket>[/<prefix>] or
	// gs://<bucket>[/<prefix>], without a trailing slash.
	Location string
	// IO are iceberg-go's IO properties (s3.endpoint, s3.region,
	// gcs.endpoint, …): the catalog's properties for the SQL and Glue
	// catalogs, additional client properties for REST.
	IO map[string]string
	// Store is the sink: what pg-cdc writes and reads itself (position
	// deletes, tombstones) goes through it, whatever the store.
	Store blob.Store
}

// FileWarehouse is the filesystem sink at root.
func FileWarehouse(root string) (Warehouse, error) {
	return NewWarehouse(Sink{Type: SinkFilesystem, Path: root})
}

// NewWarehouse is the warehouse of the sink s.
//
// S3: the IO is iceberg-go's gocloud S3 client, signing with the AWS SDK's
// default credential chain as the sink does (environment AWS_*, shared
// files, instance or task role; the properties s3.access-key-id and
// s3.secret-access-key, set by hand in catalog.iceberg.properties,
// override it), in the sink's region (s3.region: storage.region, else
// AWS_REGION / AWS_DEFAULT_REGION, else us-east-1 when an endpoint is set,
// as the sink), at storage.endpoint (s3.endpoint), path-style exactly when
// storage.force_path_style (s3.force-virtual-addressing is its negation:
// iceberg-go defaults to path-style whenever an endpoint is set), and, at
// an S3-compatible endpoint, without the SDK's optional checksums
// (s3.compat-mode), as the sink sends them only where S3 requires them.
//
// GCS: gcs.endpoint (the sink's endpoint with the JSON API path),
// gcs.usejsonapi (reads through the JSON API, as the sink's),
// gcs.keypath (storage.credentials_file), gcs.no-auth for an emulator
// (NoAuth or STORAGE_EMULATOR_HOST).
func NewWarehouse(s Sink) (Warehouse, error) {
	switch s.Type {
	case "", SinkFilesystem:
		if s.Path == "" {
			return Warehouse{}, fmt.Errorf("iceberg warehouse: the filesystem sink has no root")
		}
		abs, err := filepath.Abs(s.Path)
		if err != nil {
			return Warehouse{}, fmt.Errorf("iceberg warehouse %s: %w", s.Path, err)
		}
		store := s.Store
		if store == nil {
			if store, err = fs.New(abs); err != nil {
				return Warehouse{}, fmt.Errorf("iceberg warehouse: %w", err)
			}
		}
		return Warehouse{Location: "file://" + filepath.ToSlash(abs), IO: map[string]string{}, Store: store}, nil
	case SinkS3:
		loc, err := bucketLocation("s3", s)
		if err != nil {
			return Warehouse{}, err
		}
		props := map[string]string{
			icebergio.S3ForceVirtualAddressing: strconv.FormatBool(!s.ForcePathStyle),
		}
		region := s.Region
		if region == "" {
			region = cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
		}
		if region == "" && s.Endpoint != "" {
			region = "us-east-1" // the S3 sink's default at an endpoint
		}
		if region != "" {
			// Always explicit: iceberg-go's Glue catalog hands its own AWS
			// configuration (Glue's region) to the IO that reads a table's
			// metadata, and only s3.region overrides it.
			props[icebergio.S3Region] = region
		}
		if s.Endpoint != "" {
			props[icebergio.S3EndpointURL] = s.Endpoint
			props[icebergio.S3CompatMode] = "true"
		}
		return Warehouse{Location: loc, IO: props, Store: s.Store}, nil
	case SinkGCS:
		loc, err := bucketLocation("gs", s)
		if err != nil {
			return Warehouse{}, err
		}
		props := map[string]string{}
		if s.Endpoint != "" {
			ep := strings.TrimSuffix(s.Endpoint, "/")
			if !strings.HasSuffix(ep, "/storage/v1") {
				ep += "/storage/v1"
			}
			props[icebergio.GCSEndpoint] = ep + "/"
		} else if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
			if !strings.Contains(host, "://") {
				host = "http://" + host
			}
			props[icebergio.GCSEndpoint] = strings.TrimSuffix(host, "/") + "/storage/v1/"
			s.NoAuth = true
		}
		// Reads through the JSON API, as the sink's: the XML API's reads
		// ignore the endpoint's path, and an emulator serves none.
		props[icebergio.GCSUseJSONAPI] = "true"
		if s.CredentialsFile != "" {
			props[icebergio.GCSKeyPath] = s.CredentialsFile
		}
		if s.NoAuth {
			props[icebergio.GCSNoAuth] = "true"
		}
		return Warehouse{Location: loc, IO: props, Store: s.Store}, nil
	default:
		return Warehouse{}, fmt.Errorf("iceberg warehouse: sink type %q: want %s, %s or %s", s.Type, SinkFilesystem, SinkS3, SinkGCS)
	}
}

// bucketLocation is scheme://bucket[/prefix].
func bucketLocation(scheme string, s Sink) (string, error) {
	if s.Bucket == "" || strings.ContainsAny(s.Bucket, "/") {
		return "", fmt.Errorf("iceberg warehouse: bucket %q", s.Bucket)
	}
	loc := scheme + "://" + s.Bucket
	if p := strings.Trim(s.Prefix, "/"); p != "" {
		if err := blob.ValidKey(p); err != nil {
			return "", fmt.Errorf("iceberg warehouse: prefix: %w", err)
		}
		loc += "/" + p
	}
	return loc, nil
}

// withIO is props with the warehouse's IO properties under them: a
// property set by hand (catalog.iceberg.properties) wins.
func (w Warehouse) withIO(props map[string]string) map[string]string {
	out := make(map[string]string, len(w.IO)+len(props))
	for k, v := range w.IO {
		out[k] = v
	}
	for k, v := range props {
		out[k] = v
	}
	return out
}

// TombstonesIn reads the positions of the rows whose __op is D in a file of
// the sink store (catalog.Options.Positions): a compacted base's
// tombstones, which the state table masks. A filesystem sink's file is
// read in place; an object store's is downloaded to a temporary file
// first (a footer and the __op column would do, but blob.Store reads whole
// objects).
func TombstonesIn(store blob.Store) func(context.Context, string) ([]int64, error) {
	return func(ctx context.Context, key string) ([]int64, error) {
		rc, err := store.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if f, ok := rc.(*os.File); ok {
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return nil, err
			}
			return parquetfile.OpPositions(f, st.Size(), "D")
		}
		defer rc.Close()
		f, err := os.CreateTemp("", "pgcdc-tombstones-*.parquet")
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		size, err := io.Copy(f, rc)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		return parquetfile.OpPositions(f, size, "D")
	}
}

// Tombstones is TombstonesIn the filesystem sink at root.
func Tombstones(root string) func(context.Context, string) ([]int64, error) {
	store, err := fs.New(root)
	if err != nil {
		return func(context.Context, string) ([]int64, error) { return nil, err }
	}
	return TombstonesIn(store)
}

// putBytes writes data at key in store.
func putBytes(ctx context.Context, store blob.Store, key string, data []byte) error {
	return store.Put(ctx, key, bytes.NewReader(data))
}
