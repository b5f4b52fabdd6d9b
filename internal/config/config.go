package config

import (
	"log/slog"
	"time"
)

// Config is the whole configuration of one pg-cdc process. Field comments
// give the YAML key, the default and the environment override; the same
// facts are in docs/configuration.md.
type Config struct {
	Source      SourceConfig
	Tables      TablesConfig
	Replication ReplicationConfig
	Init        InitConfig
	Storage     StorageConfig
	AWS         AWSConfig
	Flush       FlushConfig
	Retry       RetryConfig
	State       StateConfig
	Compaction  CompactionConfig
	GC          GCConfig
	History     HistoryConfig
	Metrics     MetricsConfig
	Guardrail   GuardrailConfig
	Schema      SchemaConfig
	Backfill    BackfillConfig
	Promotion   PromotionConfig
	Query       QueryConfig
	Serve       ServeConfig
	Catalog     CatalogConfig
	Log         LogConfig
	// Types maps "schema.table.column" to a representation that replaces
	// the column's default Parquet mapping (docs/types.md), e.g. "string".
	Types map[string]string
}

// SourceConfig is the "source" section.
type SourceConfig struct {
	Postgres PostgresConfig
}

// PostgresConfig is the "source.postgres" section.
type PostgresConfig struct {
	// URL (source.postgres.url, PGCDC_SOURCE_POSTGRES_URL) is a
	// postgres:// or postgresql:// connection URL, TLS parameters
	// (sslmode, sslrootcert, sslcert, sslkey) included. Required; no
	// default. ${VAR} in the file is expanded at load, so the password can
	// stay in the environment; URL holds that expansion, and ResolveURL
	// expands the references again for each new connection. Print it only
	// through Config.Redacted.
	URL string
	// Provider (source.postgres.provider, PGCDC_SOURCE_POSTGRES_PROVIDER)
	// is where the server runs, which decides the fixes preflight and init
	// print: "auto" (default: recognised from the server), "self-managed",
	// "rds" or "aurora".
	Provider string
	// Schemas (source.postgres.schemas, PGCDC_SOURCE_POSTGRES_SCHEMAS) are
	// the schemas whose tables are captured. Default ["public"].
	Schemas []string
	// IAMAuth (source.postgres.iam_auth, PGCDC_SOURCE_POSTGRES_IAM_AUTH)
	// signs in with an RDS/Aurora IAM authentication token, minted for
	// every connection, instead of a password. The URL then names one host
	// and the user, holds no password, and sets sslmode to require,
	// verify-ca or verify-full. Default false.
	IAMAuth bool
	// Region (source.postgres.region, PGCDC_SOURCE_POSTGRES_REGION) is the
	// AWS region the IAM tokens are signed for; empty means the AWS chain's
	// (AWS_REGION, the shared config). Only with IAMAuth.
	Region string

	// urlTemplate is the URL as the file wrote it, ${VAR} references kept,
	// when it had any; urlLoaded is what it expanded to at load. See
	// ResolveURL.
	urlTemplate, urlLoaded string
}

// TablesConfig is the "tables" section.
type TablesConfig struct {
	// Include (tables.include, PGCDC_TABLES_INCLUDE) lists schema-qualified
	// tables ("public.orders"). Empty (the default) means every table of
	// source.postgres.schemas.
	Include []string
	// Exclude (tables.exclude, PGCDC_TABLES_EXCLUDE) lists exact
	// "schema.table" names or path.Match globs on them ("public.tmp_*").
	// Default empty. Exclude wins over Include.
	Exclude []string
}

// ReplicationConfig is the "replication" section.
type ReplicationConfig struct {
	// Publication (replication.publication, PGCDC_REPLICATION_PUBLICATION).
	// Default "pg_cdc_pub".
	Publication string
	// Slot (replication.slot, PGCDC_REPLICATION_SLOT) is the logical
	// replication slot. Default "pg_cdc_slot".
	Slot string
	// StandbyInterval (replication.standby_interval_sec,
	// PGCDC_REPLICATION_STANDBY_INTERVAL_SEC, whole seconds) is how often
	// the confirmed LSN is reported to PostgreSQL. Default 10s.
	StandbyInterval time.Duration
	// MemoryBudgetBytes (replication.memory_budget_bytes,
	// PGCDC_REPLICATION_MEMORY_BUDGET_BYTES) bounds the in-progress
	// (streamed) transactions held in memory before they spill to
	// state.path. Default 64 MiB.
	MemoryBudgetBytes int64
	// HeartbeatInterval (replication.heartbeat_interval_sec,
	// PGCDC_REPLICATION_HEARTBEAT_INTERVAL_SEC, whole seconds): while
	// streaming, emit a non-transactional pg_logical_emit_message this
	// often, so the slot advances (and freshness shows) on a source with no
	// captured traffic. Default 0: off.
	HeartbeatInterval time.Duration
	// ReceiveTimeout (replication.receive_timeout_sec,
	// PGCDC_REPLICATION_RECEIVE_TIMEOUT_SEC, whole seconds): a replication
	// connection on which nothing arrives for this long, even after asking
	// the server for a reply half-way, is dropped and a new session
	// started. Raised to the server's wal_sender_timeout when that is
	// longer. Default 60s.
	ReceiveTimeout time.Duration
}

// InitConfig is the "init" section.
type InitConfig struct {
	// ParallelWorkers (init.parallel_workers, PGCDC_INIT_PARALLEL_WORKERS)
	// is how many tables the initial snapshot copies at once. Default 4.
	ParallelWorkers int
}

// Source providers (source.postgres.provider).
const (
	ProviderAuto        = "auto"
	ProviderSelfManaged = "self-managed"
	ProviderRDS         = "rds"
	ProviderAurora      = "aurora"
)

// Storage types.
const (
	StorageFilesystem = "filesystem"
	StorageS3         = "s3"
	StorageGCS        = "gcs"
)

// StorageConfig is the "storage" section.
type StorageConfig struct {
	// Type (storage.type, PGCDC_STORAGE_TYPE) is the sink kind:
	// "filesystem" (default), "s3" or "gcs".
	Type string
	// Path (storage.path, PGCDC_STORAGE_PATH) is the sink root directory for
	// the filesystem sink. Default "./pgcdc-data".
	Path string
	// Bucket and Prefix (storage.bucket, storage.prefix) place an object
	// store sink: every key lives under bucket/prefix/.
	Bucket string
	Prefix string
	// Region (storage.region) is the S3 region; empty means the AWS chain's
	// (AWS_REGION, the shared config), else us-east-1.
	Region string
	// Endpoint (storage.endpoint) is an S3-compatible endpoint URL, or a GCS
	// endpoint for an emulator; empty means the provider's own.
	Endpoint string
	// ForcePathStyle (storage.force_path_style) addresses S3 buckets as
	// endpoint/bucket/key, which most S3-compatible stores need.
	ForcePathStyle bool
	// CredentialsFile (storage.credentials_file) is a GCS service account
	// key file; empty means application default credentials.
	CredentialsFile string
	// AcceptSingleWriterRisk (storage.accept_single_writer_risk) lets pg-cdc
	// run on a store whose start-up probe shows that it ignores conditional
	// writes: two writers on one prefix would then go undetected.
	AcceptSingleWriterRisk bool
	// RequestTimeout (storage.request_timeout_sec,
	// PGCDC_STORAGE_REQUEST_TIMEOUT_SEC, whole seconds) bounds one attempt
	// of an S3 request: a data upload or download fails when it makes no
	// progress for this long, any other request when it takes this long.
	// Default 30s. The GCS client has no such setting (docs/decisions.md).
	RequestTimeout time.Duration
}

// AWSConfig is the "aws" section.
type AWSConfig struct {
	// MaxRetries (aws.max_retries, PGCDC_AWS_MAX_RETRIES) is how often the
	// S3 client retries a failed request (the SDK's standard retryer with
	// its backoff). Default 5.
	MaxRetries int
}

// FlushConfig is the "flush" section.
type FlushConfig struct {
	// Interval (flush.interval_sec, PGCDC_FLUSH_INTERVAL_SEC, whole
	// seconds): flush at least this often when changes are buffered.
	// Default 10s.
	Interval time.Duration
	// MaxRows (flush.max_rows, PGCDC_FLUSH_MAX_ROWS): flush when this many
	// rows are buffered. Default 100000.
	MaxRows int
	// MaxBytes (flush.max_bytes, PGCDC_FLUSH_MAX_BYTES): flush when this many
	// bytes are buffered. Default 128 MiB.
	MaxBytes int64
	// DrainTimeout (flush.drain_timeout_sec, PGCDC_FLUSH_DRAIN_TIMEOUT_SEC,
	// whole seconds) bounds the final flush on SIGTERM/SIGINT. Default 30s.
	DrainTimeout time.Duration
	// ParallelWorkers (flush.parallel_workers, PGCDC_FLUSH_PARALLEL_WORKERS)
	// is how many tables are written at once in one flush. Default 4.
	ParallelWorkers int
	// CASBreakerThreshold and CASBreakerWindow
	// (flush.cas_breaker_threshold, flush.cas_breaker_window_sec in whole
	// seconds): this many manifest conflicts with a writer that moved the
	// stream within the window stop the streamer (exit 13). Defaults 10
	// and 60s.
	CASBreakerThreshold int
	CASBreakerWindow    time.Duration
}

// RetryConfig is the "retry" section: how `start` retries a replication
// session that failed with a transient error (a connection reset, a
// restarting PostgreSQL, a sink request that failed after its own
// retries).
type RetryConfig struct {
	// InitialBackoff (retry.initial_backoff, PGCDC_RETRY_INITIAL_BACKOFF) is
	// the wait before the first retry; each further retry waits twice as
	// long, up to MaxBackoff. Default 1s.
	InitialBackoff time.Duration
	// MaxBackoff (retry.max_backoff, PGCDC_RETRY_MAX_BACKOFF) caps the wait
	// between retries. Default 30s.
	MaxBackoff time.Duration
	// MaxAttempts (retry.max_attempts, PGCDC_RETRY_MAX_ATTEMPTS) is how
	// many times in a row a failed session is retried; the next failure
	// exits with "retries exhausted" (3). A session that moved the manifest
	// starts the count again. Default 10.
	MaxAttempts int
}

// StateConfig is the "state" section.
type StateConfig struct {
	// Path (state.path, PGCDC_STATE_PATH) is the local working directory:
	// spilled transactions and other scratch data. Default "./.pgcdc".
	Path string
}

// CompactionConfig is the "compaction" section (design.md §7).
type CompactionConfig struct {
	// Interval (compaction.interval, PGCDC_COMPACTION_INTERVAL) is how
	// often start looks at every table, beside the stream, and compacts
	// the ones the thresholds below name (design.md §7); a Go duration
	// such as "15m". Default "10s"; "0s" turns compaction inside start
	// off (run pg-cdc compact from a timer instead).
	Interval time.Duration
	// MinorFanout (compaction.minor_fanout) is how many consecutive deltas
	// of one level a minor compaction merges into one of the next level.
	// Default 8.
	MinorFanout int64
	// MinorMaxBytes (compaction.minor_max_bytes) leaves deltas larger than
	// this to major compactions. Default 64 MiB.
	MinorMaxBytes int64
	// MajorDeltaPercent (compaction.major_delta_percent) starts a major
	// compaction (a new base) once a table's deltas reach this share of
	// its base's bytes, and MajorMinBytes (compaction.major_min_bytes)
	// bytes. Defaults 50 and 256 KiB.
	MajorDeltaPercent int64
	MajorMinBytes     int64
	// MaxDeltaFiles (compaction.max_delta_files) starts a major compaction
	// of a table holding more delta files than this. Default 48.
	MaxDeltaFiles int64
	// MajorInterval (compaction.major_interval) also starts one for a
	// table with deltas whose base is older than this. Default "0s": size
	// and count only.
	MajorInterval time.Duration
	// TombstoneTTL (compaction.tombstone_ttl, PGCDC_COMPACTION_TOMBSTONE_TTL)
	// is how long a delete stays in a base as a tombstone. Default 720h.
	TombstoneTTL time.Duration
	// MemoryBudgetBytes (compaction.memory_budget_bytes,
	// PGCDC_COMPACTION_MEMORY_BUDGET_BYTES) bounds the rows a compaction
	// sorts in memory before it spills a sorted run to state.path. Default
	// 64 MiB.
	MemoryBudgetBytes int64
	// TargetFileBytes (compaction.target_file_bytes,
	// PGCDC_COMPACTION_TARGET_FILE_BYTES) starts a new base file once the
	// current one reaches about this size. Default 256 MiB.
	TargetFileBytes int64
}

// GCConfig is the "gc" section.
type GCConfig struct {
	// GracePeriod (gc.grace_period, PGCDC_GC_GRACE_PERIOD): a data file no
	// manifest references is deleted only once it has been unreferenced
	// (or, for an upload no manifest ever named, written) this long ago.
	// It must exceed the longest flush, compaction and reader. Default 1h.
	GracePeriod time.Duration
}

// HistoryConfig is the "history" section: committed manifest versions
// stay readable (design.md §11).
type HistoryConfig struct {
	// Retention (history.retention, PGCDC_HISTORY_RETENTION): every
	// committed manifest version stays readable this long, across
	// compactions, and garbage collection keeps the files and log entries
	// they need. It bounds gc.grace_period from below: a retired file is
	// deleted only once both have passed. Default 168h.
	Retention time.Duration
}

// Promotion modes (promotion.mode).
const (
	PromotionAuto   = "auto"
	PromotionManual = "manual"
)

// PromotionConfig is the "promotion" section: how the branch main moves
// (design.md §11).
type PromotionConfig struct {
	// Mode (promotion.mode, PGCDC_PROMOTION_MODE): "auto" (default), main
	// follows every flush as staging does; "manual", main moves only with
	// pg-cdc promote.
	Mode string
}

// QueryConfig is the "query" section: the read path's limits (pg-cdc
// query, design.md §11).
type QueryConfig struct {
	// MemoryBytes (query.memory_bytes, PGCDC_QUERY_MEMORY_BYTES) bounds the
	// query engine's memory; it spills to state.path beyond. Default 1 GiB.
	MemoryBytes int64
	// Threads (query.threads, PGCDC_QUERY_THREADS) is the engine's worker
	// threads. Default 2.
	Threads int
	// Timeout (query.timeout, PGCDC_QUERY_TIMEOUT) interrupts a query that
	// runs longer. Default 60s.
	Timeout time.Duration
	// MaxRows and MaxBytes (query.max_rows, query.max_bytes) cap a result;
	// a result cut short says it is truncated. Defaults 100000 and 64 MiB.
	MaxRows  int
	MaxBytes int64
	// CacheBytes (query.cache_bytes, PGCDC_QUERY_CACHE_BYTES) bounds the
	// local copies of an object store's files under state.path/cache (a
	// filesystem sink is read in place). Default 10 GiB.
	CacheBytes int64
	// Isolation (query.isolation, PGCDC_QUERY_ISOLATION) is where queries
	// run: "landlock" (default: a worker process the kernel confines to
	// reading the data), "process" (a worker process with its memory
	// bounded, for a kernel without Landlock, accepting that DuckDB's own
	// sandbox alone keeps it from writing), "none" (in the calling
	// process; tests and benchmarks of the engine alone).
	Isolation string
}

// CatalogConfig is the "catalog" section (design.md §12): the sink's
// tables published as Apache Iceberg tables.
type CatalogConfig struct {
	// Type (catalog.type) is "" (default: none) or "iceberg".
	Type    string
	Iceberg IcebergConfig
}

// Catalog types.
const (
	CatalogNone    = ""
	CatalogIceberg = "iceberg"
	IcebergSQL     = "sql"
	IcebergREST    = "rest"
	IcebergGlue    = "glue"
	CopyOnWrite    = "copy-on-write"
)

// IcebergConfig is the "catalog.iceberg" section.
type IcebergConfig struct {
	// Type (catalog.iceberg.type) is the Iceberg catalog: "sql" (default),
	// the embedded SQL catalog on SQLite, "rest", an Iceberg REST catalog,
	// or "glue", the AWS Glue Data Catalog.
	Type string
	// URI (catalog.iceberg.uri) is the SQL catalog's SQLite file (default
	// state.path/iceberg-catalog.db) or the REST catalog's base URL
	// (required; without /v1). Glue takes none (its endpoint is the
	// property glue.endpoint).
	URI string
	// Properties (catalog.iceberg.properties) are passed to the REST
	// client: token, credential, scope, warehouse, prefix, header.<Name>,
	// pgcdc.request-timeout, ... token, credential and headers are secrets.
	// Or to the Glue client: glue.region, glue.endpoint, glue.id,
	// glue.access-key-id, glue.secret-access-key and glue.session-token
	// (secrets), glue.max-retries, glue.retry-mode, pgcdc.request-timeout.
	Properties map[string]string
	// Namespace (catalog.iceberg.namespace) is the first namespace level of
	// every published table. Default "pgcdc".
	Namespace string
	// Mode (catalog.iceberg.mode) is how the state tables follow the sink:
	// "copy-on-write" (default), replaced at each compaction.
	Mode string
	// SnapshotMaxAge and SnapshotMinKeep (catalog.iceberg.snapshot_max_age,
	// catalog.iceberg.snapshot_min_keep) expire Iceberg snapshots older
	// than the age, keeping the newest few. Defaults 24h and 10. Garbage
	// collection keeps a retired file history.retention + the age.
	SnapshotMaxAge  time.Duration
	SnapshotMinKeep int
	// CommitInterval (catalog.iceberg.commit_interval) is the least time
	// between two publications: the versions committed meanwhile become
	// one Iceberg snapshot of the newest. Default 60s; 0 publishes every
	// manifest version.
	CommitInterval time.Duration
	// StateMaxAge (catalog.iceberg.state_max_age) bounds how stale a
	// copy-on-write state table may get: the compaction inside start
	// writes a new base (which the publisher publishes) for a table with
	// changes whose base is older than this, whatever the size
	// thresholds. Default 1h; 0 leaves it to the thresholds.
	StateMaxAge time.Duration
}

// ServeConfig is the "serve" section: pg-cdc serve and pg-cdc mcp (REST,
// MCP and server-sent events over the read path; docs/serve.md).
type ServeConfig struct {
	// Listen (serve.listen, PGCDC_SERVE_LISTEN) is the host:port served.
	// Default "127.0.0.1:8080". Any address but loopback needs Tokens.
	Listen string
	// Tokens (serve.tokens) maps each principal's name to the SHA-256 of
	// its bearer token, "sha256:<64 hex digits>" (pg-cdc serve token NAME
	// prints one); TokensFile (serve.tokens_file) is a file of
	// "name sha256:<hex>" lines, for tokens kept out of the configuration.
	Tokens     map[string]string
	TokensFile string
	// RateLimit and RateBurst (serve.rate_limit, serve.rate_burst) bound
	// each principal's requests per second and their bursts. Defaults 20
	// and 40.
	RateLimit int
	RateBurst int
	// UnauthRateLimit and UnauthRateBurst
	// (serve.unauthenticated_rate_limit, serve.unauthenticated_rate_burst)
	// bound, per remote address, the requests that fail authentication;
	// past them, 429 before the token is checked. Defaults 1 and 10;
	// a rate of 0 turns the limit off (behind a proxy every client shares
	// the proxy's address, and one client's failures refuse them all).
	UnauthRateLimit int
	UnauthRateBurst int
	// AuditSQL (serve.audit_sql) is how a query's SQL goes into its audit
	// record: AuditSQLFull, its text (and hash and length), or
	// AuditSQLHash, its SHA-256 and length only. Default full.
	AuditSQL string
	// MaxConcurrent (serve.max_concurrent) bounds the requests running at
	// once (each may run a query). Default 4. QueueWait (serve.queue_wait)
	// is how long a request waits for one of them before a 503. Default 5s.
	MaxConcurrent int
	QueueWait     time.Duration
	// MaxStreams (serve.max_streams) bounds the event streams open at once;
	// each stream's reads take one of MaxConcurrent. Default 64.
	MaxStreams int
	// VersionGrace (serve.version_grace) is how long after a new version
	// lands requests for the newest may still be answered from the
	// previous one, while the new one's engine builds. Default 10s.
	VersionGrace time.Duration
	// MaxBodyBytes (serve.max_body_bytes) caps a request body. Default 1 MiB.
	MaxBodyBytes int64
	// StaleAfter (serve.stale_after) is the freshness objective: the sink
	// is_stale when it holds the source's commits up to longer ago than
	// this. Default 5m.
	StaleAfter time.Duration
	// AllowedOrigins (serve.allowed_origins) are the browser origins MCP
	// and the API accept cross-origin requests from. Default none.
	AllowedOrigins []string
	// AllowedHosts (serve.allowed_hosts) are the Host header values /mcp
	// answers (DNS rebinding protection): empty, the loopback names, the
	// machine's host name and the listen address's own host.
	AllowedHosts []string
}

// Values of serve.audit_sql.
const (
	AuditSQLFull = "full"
	AuditSQLHash = "hash"
)

// MetricsConfig is the "metrics" section: the HTTP endpoint of start
// (docs/metrics.md).
type MetricsConfig struct {
	// Listen (metrics.listen, PGCDC_METRICS_LISTEN) is the host:port that
	// serves /metrics, /livez and /readyz. Default "127.0.0.1:9090"; empty
	// turns the endpoint off; port 0 picks a free port (logged).
	Listen string
	// LivenessTimeout (metrics.liveness_timeout,
	// PGCDC_METRICS_LIVENESS_TIMEOUT): /livez fails (and the systemd
	// watchdog stops being fed) when the replication loop has not turned
	// for this long outside a planned retry wait. Default 5m.
	LivenessTimeout time.Duration
	// ReadinessMaxLag (metrics.readiness_max_lag,
	// PGCDC_METRICS_READINESS_MAX_LAG): /readyz fails when the oldest
	// received change not yet durable is older than this. Default 2m.
	ReadinessMaxLag time.Duration
}

// GuardrailConfig is the "guardrail" section: alarms on the source.
type GuardrailConfig struct {
	// MaxRetainedWALBytes (guardrail.max_retained_wal_bytes,
	// PGCDC_GUARDRAIL_MAX_RETAINED_WAL_BYTES): warn, and set
	// pgcdc_guardrail_retained_wal_exceeded, when the slot pins more WAL
	// than this on the source. Default 0: off.
	MaxRetainedWALBytes int64
}

// SchemaConfig is the "schema" section: following schema changes.
type SchemaConfig struct {
	// ReconcileInterval (schema.reconcile_interval_sec,
	// PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC, whole seconds): how often start
	// compares the captured tables' catalog with their recorded schema
	// versions and records changes no row change has announced yet (pg-cdc
	// reconcile runs it once). Default 60s; 0 turns the background
	// reconciler off.
	ReconcileInterval time.Duration
}

// BackfillConfig is the "backfill" section: copying tables while streaming
// (a table added to the configuration, a resumed init, a resnapshot).
type BackfillConfig struct {
	// ChunkRows (backfill.chunk_rows, PGCDC_BACKFILL_CHUNK_ROWS): rows per
	// chunk, each read in its own short transaction and held in memory
	// until the stream places it. Default 50000.
	ChunkRows int
	// DiscoverInterval (backfill.discover_interval_sec,
	// PGCDC_BACKFILL_DISCOVER_INTERVAL_SEC, whole seconds): how often start
	// looks for tables created in the watched schemas (or named in
	// tables.include) that it does not capture yet, to publish and backfill
	// them without a restart. Default 30s; 0 turns it off (start still adds
	// them when it starts).
	DiscoverInterval time.Duration
}

// Log levels and formats.
const (
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelWarn  = "warn"
	LogLevelError = "error"

	LogFormatText = "text"
	LogFormatJSON = "json"
)

// LogConfig is the "log" section.
type LogConfig struct {
	// Level (log.level, PGCDC_LOG_LEVEL): debug, info, warn or error.
	// Default "info".
	Level string
	// Format (log.format, PGCDC_LOG_FORMAT): text or json. Default "text".
	Format string
}

// SlogLevel maps Level to a slog.Level. Call it on a validated Config; an
// unknown level maps to info.
func (l LogConfig) SlogLevel() slog.Level {
	switch l.Level {
	case LogLevelDebug:
		return slog.LevelDebug
	case LogLevelWarn:
		return slog.LevelWarn
	case LogLevelError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Default returns the configuration used for every key the file and the
// environment leave out. It is not valid on its own: source.postgres.url has
// no default.
func Default() Config {
	return Config{
		Source: SourceConfig{Postgres: PostgresConfig{Schemas: []string{"public"}, Provider: ProviderAuto}},
		Tables: TablesConfig{Include: []string{}, Exclude: []string{}},
		Replication: ReplicationConfig{
			Publication:       "pg_cdc_pub",
			Slot:              "pg_cdc_slot",
			StandbyInterval:   10 * time.Second,
			MemoryBudgetBytes: 64 << 20,
			ReceiveTimeout:    60 * time.Second,
		},
		Init:    InitConfig{ParallelWorkers: 4},
		Storage: StorageConfig{Type: StorageFilesystem, Path: "./pgcdc-data", RequestTimeout: 30 * time.Second},
		AWS:     AWSConfig{MaxRetries: 5},
		Retry:   RetryConfig{InitialBackoff: time.Second, MaxBackoff: 30 * time.Second, MaxAttempts: 10},
		Flush: FlushConfig{
			Interval:            10 * time.Second,
			MaxRows:             100000,
			MaxBytes:            128 << 20,
			DrainTimeout:        30 * time.Second,
			ParallelWorkers:     4,
			CASBreakerThreshold: 10,
			CASBreakerWindow:    60 * time.Second,
		},
		State: StateConfig{Path: "./.pgcdc"},
		Compaction: CompactionConfig{
			Interval:          10 * time.Second,
			MinorFanout:       8,
			MinorMaxBytes:     64 << 20,
			MajorDeltaPercent: 50,
			MajorMinBytes:     256 << 10,
			MaxDeltaFiles:     48,
			TombstoneTTL:      720 * time.Hour,
			MemoryBudgetBytes: 64 << 20,
			TargetFileBytes:   256 << 20,
		},
		GC:        GCConfig{GracePeriod: time.Hour},
		History:   HistoryConfig{Retention: 168 * time.Hour},
		Promotion: PromotionConfig{Mode: PromotionAuto},
		Query: QueryConfig{MemoryBytes: 1 << 30, Threads: 2, Timeout: time.Minute, MaxRows: 100_000,
			MaxBytes: 64 << 20, CacheBytes: 10 << 30, Isolation: "landlock"},
		Catalog: CatalogConfig{Iceberg: IcebergConfig{Type: IcebergSQL, Namespace: "pgcdc", Mode: CopyOnWrite, Properties: map[string]string{}, SnapshotMaxAge: 24 * time.Hour, SnapshotMinKeep: 10, CommitInterval: time.Minute, StateMaxAge: time.Hour}},
		Serve: ServeConfig{Listen: "127.0.0.1:8080", Tokens: map[string]string{}, RateLimit: 20, RateBurst: 40,
			UnauthRateLimit: 1, UnauthRateBurst: 10, AuditSQL: AuditSQLFull,
			MaxConcurrent: 4, QueueWait: 5 * time.Second, MaxStreams: 64, VersionGrace: 10 * time.Second, MaxBodyBytes: 1 << 20, StaleAfter: 5 * time.Minute, AllowedOrigins: []string{}, AllowedHosts: []string{}},
		Metrics: MetricsConfig{
			Listen:          "127.0.0.1:9090",
			LivenessTimeout: 5 * time.Minute,
			ReadinessMaxLag: 2 * time.Minute,
		},
		Schema:   SchemaConfig{ReconcileInterval: 60 * time.Second},
		Backfill: BackfillConfig{ChunkRows: 50_000, DiscoverInterval: 30 * time.Second},
		Log:      LogConfig{Level: LogLevelInfo, Format: LogFormatText},
		Types:    map[string]string{},
	}
}
