package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"
)

// glueSep joins a namespace's levels into one Glue database name: Glue has
// one level of namespace (a database), pg-cdc's tables two (the prefix,
// then the PostgreSQL schema: pgcdc_changelog__public). No level may hold
// the separator or start or end with "_", so two namespaces never join to
// one database name.
const glueSep = "__"

// glueLevels is how many namespace levels pg-cdc's tables have
// (catalog.ChangelogIdent, catalog.StateIdent): the levels are one Glue
// database, and a shorter namespace, a parent level, is no database of its
// own (it is only the start of the databases' names).
const glueLevels = 2

// OpenGlue opens the AWS Glue Data Catalog as an Iceberg catalog over the
// warehouse wh, and returns the adapter and the function that
// closes the catalog. It makes no call to Glue: the first is the
// publisher's (Open wraps it in Lazy all the same, as REST, so a failure
// to build the client is retried rather than fatal).
//
// props are iceberg-go's Glue properties: glue.region, glue.endpoint (a
// Glue-compatible endpoint instead of AWS's), glue.id (the Data Catalog's
// id, default the caller's account), glue.access-key-id,
// glue.secret-access-key and glue.session-token (static credentials;
// without them the AWS SDK's default chain: environment, shared files,
// instance role), glue.max-retries, glue.retry-mode, glue.skip-archive
// (default true: no table version archived per commit); and
// PropRequestTimeout, which bounds every request; and iceberg-go's IO
// properties (s3.*, gcs.*), over wh's. The tables' files and metadata are
// under wh.Location, the sink.
//
// iceberg-go's Glue catalog reads a table's metadata (LoadTable) with an
// S3 client built on its own AWS configuration (Glue's region, endpoint
// and credentials), overridden only by the s3.* properties set: so the
// warehouse always sets s3.region, and a Glue endpoint of its own
// (glue.endpoint) needs the S3 endpoint spelled out, or the metadata would
// be asked of Glue's.
func OpenGlue(ctx context.Context, wh Warehouse, props map[string]string) (*Adapter, func() error, error) {
	timeout := DefaultRequestTimeout
	var opts []func(*awsconfig.LoadOptions) error
	aprops := glue.AwsProperties{}
	for k, v := range wh.IO {
		aprops[k] = v
	}
	for k, v := range props {
		switch k {
		case glue.Region:
			opts = append(opts, awsconfig.WithRegion(v))
		case glue.Endpoint:
			opts = append(opts, awsconfig.WithBaseEndpoint(v))
		case glue.MaxRetries:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, nil, fmt.Errorf("glue catalog: property %s: %q is not a count of attempts ≥ 1", k, v)
			}
			opts = append(opts, awsconfig.WithRetryMaxAttempts(n))
		case glue.RetryMode:
			m, err := aws.ParseRetryMode(v)
			if err != nil {
				return nil, nil, fmt.Errorf("glue catalog: property %s: %w", k, err)
			}
			opts = append(opts, awsconfig.WithRetryMode(m))
		case PropRequestTimeout:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("glue catalog: property %s: %q is not a positive duration", k, v)
			}
			timeout = d
		case "uri", "type", "warehouse":
			return nil, nil, fmt.Errorf("glue catalog: property %s is OpenGlue's to set", k)
		}
		aprops[k] = v // glue.id, glue.skip-archive and the rest are read by the catalog
	}
	if strings.HasPrefix(wh.Location, "s3://") && props[glue.Endpoint] != "" && aprops[icebergio.S3EndpointURL] == "" {
		region := aprops[icebergio.S3Region]
		if region == "" {
			return nil, nil, fmt.Errorf("glue catalog: with %s set, the S3 sink needs storage.region or storage.endpoint (else the tables' metadata would be read from the Glue endpoint)", glue.Endpoint)
		}
		aprops[icebergio.S3EndpointURL] = "https://s3." + region + ".amazonaws.com"
	}
	key, secret, token := props[glue.AccessKeyID], props[glue.SecretAccessKey], props[glue.SessionToken]
	if (key == "") != (secret == "") || (token != "" && key == "") {
		return nil, nil, fmt.Errorf("glue catalog: %s and %s go together (and %s with them)", glue.AccessKeyID, glue.SecretAccessKey, glue.SessionToken)
	}
	// The SDK's buildable client, not an http.Client: with AWS_CA_BUNDLE
	// set, LoadDefaultConfig refuses a plain one.
	opts = append(opts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(timeout)))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("glue catalog: %w", err)
	}
	if key != "" {
		cfg.Credentials = glueOnly{
			glue: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, token)),
			sink: cfg.Credentials,
		}
	}
	cat, err := glue.NewCatalog(glue.WithAwsConfig(cfg), glue.WithAwsProperties(aprops))
	if err != nil {
		return nil, nil, fmt.Errorf("glue catalog: %w", err)
	}
	return NewIn(&glueNames{cat: cat}, wh), cat.Close, nil
}

// glueOnly signs Glue's calls with the static glue.* keys and everything
// else with the default chain, the sink's credentials. iceberg-go's Glue
// catalog hands its AWS configuration to the S3 IO that reads a table's
// metadata (LoadTable, and the read before each commit), while the IO that
// writes the metadata, the manifests and the sink itself sign with the
// default chain: with the static keys in that configuration, a deployment
// whose Glue identity is not its bucket's would write the metadata and
// fail to read it back. The service is the one the SDK records in the
// request's context (awsmiddleware.GetServiceID); only S3's take the
// chain, so a Glue call can never go out with the sink's keys.
type glueOnly struct {
	glue, sink aws.CredentialsProvider
}

func (g glueOnly) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if awsmiddleware.GetServiceID(ctx) == "S3" {
		if g.sink == nil {
			return aws.Credentials{}, errors.New("no credentials for the sink's bucket: the AWS SDK's default chain found none")
		}
		return g.sink.Retrieve(ctx)
	}
	return g.glue.Retrieve(ctx)
}

// glueNames is iceberg-go's Glue catalog under pg-cdc's identifiers: a
// table [prefix, schema, name] is the Glue table name in the database
// prefix__schema. The tables it returns carry pg-cdc's identifier and
// commit through it, so the Adapter never sees a Glue name.
type glueNames struct {
	cat *glue.Catalog
}

var _ icecat.Catalog = (*glueNames)(nil)

// glueName checks one level or table name: Glue folds names to lower case
// (two PostgreSQL names differing in case would be one table), and the
// separator must stay unambiguous.
func glueName(s string) error {
	switch {
	case s == "":
		return errors.New("an empty name")
	case strings.ToLower(s) != s:
		return fmt.Errorf("%q has upper case, which Glue folds to lower case", s)
	case strings.Contains(s, glueSep) || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_"):
		return fmt.Errorf("%q holds %q or starts or ends with _, which would make the Glue database name ambiguous", s, glueSep)
	}
	return nil
}

// database is the Glue database of a namespace.
func glueDatabase(ns table.Identifier) (string, error) {
	if len(ns) == 0 {
		return "", errors.New("glue: an empty namespace")
	}
	for _, l := range ns {
		if err := glueName(l); err != nil {
			return "", fmt.Errorf("glue: namespace %s: %w", strings.Join(ns, "."), err)
		}
	}
	return strings.Join(ns, glueSep), nil
}

// glueIdent is the Glue identifier [database, table] of a table.
func glueIdent(id table.Identifier) (table.Identifier, error) {
	if len(id) < 2 {
		return nil, fmt.Errorf("glue: table %s has no namespace", strings.Join(id, "."))
	}
	db, err := glueDatabase(id[:len(id)-1])
	if err != nil {
		return nil, err
	}
	if err := glueName(id[len(id)-1]); err != nil {
		return nil, fmt.Errorf("glue: table %s: %w", strings.Join(id, "."), err)
	}
	return table.Identifier{db, id[len(id)-1]}, nil
}

// ours is a Glue identifier as pg-cdc's.
func ours(gid table.Identifier) table.Identifier {
	return append(strings.Split(gid[0], glueSep), gid[1:]...)
}

// rewrap is t under pg-cdc's identifier, committing through g.
func (g *glueNames) rewrap(id table.Identifier, t *table.Table, err error) (*table.Table, error) {
	if err != nil {
		return nil, err
	}
	return table.New(id, t.Metadata(), t.MetadataLocation(), t.FS, g), nil
}

func (g *glueNames) CatalogType() icecat.Type { return g.cat.CatalogType() }

func (g *glueNames) CreateTable(ctx context.Context, id table.Identifier, s *iceberg.Schema, opts ...icecat.CreateTableOpt) (*table.Table, error) {
	gid, err := glueIdent(id)
	if err != nil {
		return nil, err
	}
	t, err := g.cat.CreateTable(ctx, gid, s, opts...)
	return g.rewrap(id, t, err)
}

// CommitTable commits through Glue's UpdateTable, conditional on the
// VersionId read. Glue answers a stale one with a
// ConcurrentModificationException, which iceberg-go wraps as
// table.ErrCommitFailed: "not applied, refresh and replay". Here it is no
// proof of that: the AWS SDK retries an UpdateTable answered 5xx, and
// when the first try was applied, the retry's VersionId is stale. So the
// conflict is passed on without ErrCommitFailed, which iceberg-go never
// replays whatever a table's commit.retry.num-retries says (a replay
// would rebase the applied snapshot on itself; v0.7.0 then fails with
// "snapshot already exists", hiding the cause), and the publisher replans
// from what the table holds, which is its one reconciliation for every
// catalog.
func (g *glueNames) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	gid, err := glueIdent(id)
	if err != nil {
		return nil, "", err
	}
	meta, loc, err := g.cat.CommitTable(ctx, gid, reqs, ups)
	var conflict *gluetypes.ConcurrentModificationException
	if errors.As(err, &conflict) {
		return nil, "", fmt.Errorf("glue table %s.%s changed since it was read, or an earlier try of this update applied: %w", gid[0], gid[1], conflict)
	}
	return meta, loc, err
}

func (g *glueNames) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		db, err := glueDatabase(ns)
		if err != nil {
			yield(nil, err)
			return
		}
		for gid, err := range g.cat.ListTables(ctx, table.Identifier{db}) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ours(gid), nil) {
				return
			}
		}
	}
}

func (g *glueNames) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	gid, err := glueIdent(id)
	if err != nil {
		return nil, err
	}
	t, err := g.cat.LoadTable(ctx, gid)
	return g.rewrap(id, t, err)
}

func (g *glueNames) DropTable(ctx context.Context, id table.Identifier) error {
	gid, err := glueIdent(id)
	if err != nil {
		return err
	}
	return g.cat.DropTable(ctx, gid)
}

func (g *glueNames) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	gfrom, err := glueIdent(from)
	if err != nil {
		return nil, err
	}
	gto, err := glueIdent(to)
	if err != nil {
		return nil, err
	}
	t, err := g.cat.RenameTable(ctx, gfrom, gto)
	return g.rewrap(to, t, err)
}

func (g *glueNames) CheckTableExists(ctx context.Context, id table.Identifier) (bool, error) {
	gid, err := glueIdent(id)
	if err != nil {
		return false, err
	}
	return g.cat.CheckTableExists(ctx, gid)
}

// ListNamespaces lists the databases as pg-cdc's namespaces; Glue has no
// parents to list under.
func (g *glueNames) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	if len(parent) > 0 {
		return nil, errors.New("glue: databases have no parent namespace")
	}
	dbs, err := g.cat.ListNamespaces(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]table.Identifier, len(dbs))
	for i, db := range dbs {
		out[i] = strings.Split(db[0], glueSep)
	}
	return out, nil
}

// CreateNamespace creates the database of a namespace of glueLevels
// levels; a parent level is no database, so there is nothing to create.
func (g *glueNames) CreateNamespace(ctx context.Context, ns table.Identifier, props iceberg.Properties) error {
	if len(ns) < glueLevels {
		return nil
	}
	db, err := glueDatabase(ns)
	if err != nil {
		return err
	}
	return g.cat.CreateNamespace(ctx, table.Identifier{db}, props)
}

func (g *glueNames) DropNamespace(ctx context.Context, ns table.Identifier) error {
	db, err := glueDatabase(ns)
	if err != nil {
		return err
	}
	return g.cat.DropNamespace(ctx, table.Identifier{db})
}

// CheckNamespaceExists reports a parent level (shorter than glueLevels)
// present: it is part of its databases' names, not a database.
func (g *glueNames) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	if len(ns) < glueLevels {
		return true, nil
	}
	db, err := glueDatabase(ns)
	if err != nil {
		return false, err
	}
	return g.cat.CheckNamespaceExists(ctx, table.Identifier{db})
}

func (g *glueNames) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (iceberg.Properties, error) {
	db, err := glueDatabase(ns)
	if err != nil {
		return nil, err
	}
	return g.cat.LoadNamespaceProperties(ctx, table.Identifier{db})
}

func (g *glueNames) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates iceberg.Properties) (icecat.PropertiesUpdateSummary, error) {
	db, err := glueDatabase(ns)
	if err != nil {
		return icecat.PropertiesUpdateSummary{}, err
	}
	return g.cat.UpdateNamespaceProperties(ctx, table.Identifier{db}, removals, updates)
}
