package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// FieldError is a value that Validate refuses. Its text is "key: problem",
// the problem naming the value ("flush.max_rows: must be > 0, got 0");
// Parse puts the file and line, or the environment variable, that set the
// value in front.
type FieldError struct {
	// Key is the key ("flush.max_rows"), an item of a list key
	// ("tables.include[1]") or an entry of types ("types.public.t.c").
	Key string
	// Value is the refused value as Problem shows it ("0", `"xml"`,
	// "500ms"). It is empty for source.postgres.url and
	// source.postgres.iam_auth, whose problem lies in the URL, which may
	// hold a password and is never shown.
	Value string
	// Problem says what is wrong.
	Problem string
	// Err is the cause, when another parser refused the value.
	Err error

	// at is the key or entry whose line places the error, when not Key
	// (types: a malformed column is reported under "types" but placed at
	// its entry).
	at string
	// uses lists the other keys the check read: when one of them failed
	// to decode, the error judges a default nobody wrote, and Parse drops
	// it.
	uses []string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Problem }

func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks every field and returns all problems at once, each a
// *FieldError naming its key and the value refused ("flush.interval_sec:
// must be > 0, got 0"). It never prints the source URL's value, which may
// hold a password.
func (c Config) Validate() error {
	fes := c.validate()
	errs := make([]error, len(fes))
	for i, fe := range fes {
		errs[i] = fe
	}
	return errors.Join(errs...)
}

// validate checks each section in turn, in the order of
// docs/configuration.md.
func (c Config) validate() []*FieldError {
	var p problems
	for _, check := range []func(*problems){
		c.validateSource, c.validateTables, c.validateTypes, c.validateReplication, c.validateInit,
		c.validateStorage, c.validateAWS, c.validateFlush, c.validateRetry, c.validateState,
		c.validateCompaction, c.validateGC, c.validateHistory, c.validateMetrics, c.validateGuardrail, c.validateSchema,
		c.validateBackfill, c.validatePromotion, c.validateQuery, c.validateServe, c.validateCatalog, c.validateLog,
	} {
		check(&p)
	}
	return p
}

// problems collects the FieldErrors of one validation.
type problems []*FieldError

// got records that key's value v is refused, in the common shape
// "key: problem, got v".
func (p *problems) got(key string, v any, format string, args ...any) *FieldError {
	return p.add(key, v, "%s, got %s", fmt.Sprintf(format, args...), showValue(v))
}

// add records a problem whose text names the value itself.
func (p *problems) add(key string, v any, format string, args ...any) *FieldError {
	fe := &FieldError{Key: key, Value: showValue(v), Problem: fmt.Sprintf(format, args...)}
	*p = append(*p, fe)
	return fe
}

// wrap records a value that another parser refused with err, whose text
// names the value.
func (p *problems) wrap(key string, v any, err error) *FieldError {
	fe := &FieldError{Key: key, Value: showValue(v), Problem: err.Error(), Err: err}
	*p = append(*p, fe)
	return fe
}

// secs is a *_sec key's duration, shown as its key writes it.
type secs time.Duration

// showValue renders a value the way the problems quote it: strings and
// lists of them quoted (%q), durations as Go durations, *_sec durations as
// seconds; nil shows nothing (a secret).
func showValue(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return strconv.Quote(t)
	case []string:
		return fmt.Sprintf("%q", t)
	case secs:
		if d := time.Duration(t); d%time.Second != 0 {
			return d.String()
		}
		return strconv.FormatInt(int64(time.Duration(t)/time.Second), 10)
	default:
		return fmt.Sprint(v)
	}
}

// positive refuses a count below 1.
func (p *problems) positive(key string, n int64) {
	if n <= 0 {
		p.got(key, n, "must be > 0")
	}
}

// offOrPositive refuses a negative count, where 0 means off.
func (p *problems) offOrPositive(key string, n int64) {
	if n < 0 {
		p.got(key, n, "must be 0 (off) or positive")
	}
}

// seconds checks a *_sec key: positive, or 0 for off when zeroIsOff, and
// whole seconds, which is all the file can write (a value read is; one set
// in code may not be, and would not print back).
func (p *problems) seconds(key string, d time.Duration, zeroIsOff bool) {
	switch {
	case d%time.Second != 0:
		p.got(key, secs(d), "want a whole number of seconds")
	case zeroIsOff && d < 0:
		p.got(key, secs(d), "must be 0 (off) or positive")
	case !zeroIsOff && d <= 0:
		p.got(key, secs(d), "must be > 0")
	}
}

func (c Config) validateSource(p *problems) {
	pg := c.Source.Postgres
	if pg.URL == "" {
		// The read path's commands (query, serve, mcp, …) need only the
		// sink; the others ask for the source with RequireSource.
	} else if err := validatePostgresURL(pg.URL); err != nil {
		p.wrap("source.postgres.url", nil, err) // nil: the URL is never shown
	} else if pg.IAMAuth {
		if err := validateIAMURL(pg.URL); err != nil {
			p.wrap("source.postgres.iam_auth", nil, err) // the problem is in the URL
		}
	}
	if pg.Region != "" && !pg.IAMAuth {
		p.got("source.postgres.region", pg.Region, "applies only with source.postgres.iam_auth: true").uses = []string{"source.postgres.iam_auth"}
	}
	switch pg.Provider {
	case ProviderAuto, ProviderSelfManaged, ProviderRDS, ProviderAurora:
	default:
		p.got("source.postgres.provider", pg.Provider, "want %s, %s, %s or %s", ProviderAuto, ProviderSelfManaged, ProviderRDS, ProviderAurora)
	}
	if len(pg.Schemas) == 0 {
		p.got("source.postgres.schemas", pg.Schemas, "must name at least one schema")
	}
	for i, s := range pg.Schemas {
		key := fmt.Sprintf("source.postgres.schemas[%d]", i)
		switch {
		// Any other name PostgreSQL allows is taken as it is, in its exact
		// case and without quotes: "Sales", "a.b", "x y" and `we"ird` name
		// the schemas of those names (pg-cdc quotes them in SQL itself).
		case s == "":
			p.got(key, s, "must not be empty")
		case len(s) > 63:
			// PostgreSQL truncates longer names to 63 bytes (NAMEDATALEN-1),
			// so no schema can have this name.
			p.add(key, s, "%q is %d bytes long; PostgreSQL names are at most 63 bytes", s, len(s))
		case strings.IndexByte(s, 0) >= 0:
			p.add(key, s, "%q contains a NUL byte, which no PostgreSQL name can hold", s)
		case slices.Index(pg.Schemas, s) < i:
			p.add(key, s, "%q is listed twice", s)
		}
	}
}

func (c Config) validateTables(p *problems) {
	schemas := c.Source.Postgres.Schemas
	for i, s := range c.Tables.Include {
		key := fmt.Sprintf("tables.include[%d]", i)
		id, err := cdc.ParseTableID(s)
		switch {
		case err != nil:
			p.wrap(key, s, err)
		case slices.Index(c.Tables.Include, s) < i:
			p.add(key, s, "%q is listed twice", s)
		case len(schemas) > 0 && !slices.Contains(schemas, id.Schema):
			// Capturing it would silently do nothing: the schema is not read.
			p.add(key, s, "schema %q of %q is not in source.postgres.schemas %q", id.Schema, s, schemas).uses = []string{"source.postgres.schemas"}
		}
	}
	for i, pat := range c.Tables.Exclude {
		key := fmt.Sprintf("tables.exclude[%d]", i)
		if _, err := path.Match(pat, ""); err != nil {
			p.add(key, pat, "invalid pattern %q: %v", pat, err)
			continue
		}
		// "orders" can never match "schema.table", so it would exclude
		// nothing; a glob such as "*_tmp" may still match across the dot.
		if !strings.Contains(pat, ".") && !strings.ContainsAny(pat, `*?[\`) {
			p.add(key, pat, "%q matches no table: write the schema-qualified name, e.g. public.%s", pat, pat)
		}
	}
}

func (c Config) validateTypes(p *problems) {
	for _, col := range slices.Sorted(maps.Keys(c.Types)) {
		key := "types." + col
		if _, _, _, err := cdc.ParseColumnRef(col); err != nil {
			// Under "types": the entry's name is the mistake, so
			// "types.<name>" would not name a key.
			p.wrap("types", col, err).at = key
		} else if r := c.Types[col]; !slices.Contains(Representations, r) {
			p.add(key, r, "unknown representation %q; want one of %s", r, strings.Join(Representations, ", "))
		}
	}
}

func (c Config) validateReplication(p *problems) {
	r := c.Replication
	if err := validIdentifier(r.Publication); err != nil {
		p.wrap("replication.publication", r.Publication, err)
	}
	if err := validSlotName(r.Slot); err != nil {
		p.wrap("replication.slot", r.Slot, err)
	}
	p.seconds("replication.standby_interval_sec", r.StandbyInterval, false)
	p.positive("replication.memory_budget_bytes", r.MemoryBudgetBytes)
	p.seconds("replication.heartbeat_interval_sec", r.HeartbeatInterval, true)
	p.seconds("replication.receive_timeout_sec", r.ReceiveTimeout, false)
}

func (c Config) validateInit(p *problems) {
	p.positive("init.parallel_workers", int64(c.Init.ParallelWorkers))
}

func (c Config) validateStorage(p *problems) {
	s := c.Storage
	p.seconds("storage.request_timeout_sec", s.RequestTimeout, false)
	var sink problems // the checks that follow from storage.type
	switch s.Type {
	case StorageFilesystem:
		if s.Path == "" {
			sink.got("storage.path", s.Path, "required for the filesystem sink")
		}
	case StorageS3, StorageGCS:
		if s.Bucket == "" {
			sink.got("storage.bucket", s.Bucket, "required for the %s sink", s.Type)
		}
		if pf := s.Prefix; pf != "" && (strings.HasPrefix(pf, "/") || strings.HasSuffix(pf, "/") || slices.Contains(strings.Split(pf, "/"), "..") || slices.Contains(strings.Split(pf, "/"), "")) {
			sink.got("storage.prefix", pf, "want a relative key prefix such as \"cdc/app\" (no leading or trailing /, no empty or .. parts)")
		}
		if s.Type == StorageGCS && s.Region != "" {
			sink.got("storage.region", s.Region, "region and force_path_style apply to s3 only")
		}
		if s.Type == StorageGCS && s.ForcePathStyle {
			sink.got("storage.force_path_style", s.ForcePathStyle, "region and force_path_style apply to s3 only")
		}
		if s.Type == StorageS3 && s.CredentialsFile != "" {
			sink.got("storage.credentials_file", s.CredentialsFile, "applies to gcs only; S3 credentials come from the standard AWS chain")
		}
	default:
		p.add("storage.type", s.Type, "unknown sink type %q; want %q, %q or %q", s.Type, StorageFilesystem, StorageS3, StorageGCS)
	}
	for _, fe := range sink {
		fe.uses = []string{"storage.type"}
	}
	*p = append(*p, sink...)
}

func (c Config) validateAWS(p *problems) {
	if n := c.AWS.MaxRetries; n < 0 || n > 100 {
		p.got("aws.max_retries", n, "want 0 to 100")
	}
}

func (c Config) validateFlush(p *problems) {
	f := c.Flush
	p.seconds("flush.interval_sec", f.Interval, false)
	p.positive("flush.max_rows", int64(f.MaxRows))
	p.positive("flush.max_bytes", f.MaxBytes)
	p.seconds("flush.drain_timeout_sec", f.DrainTimeout, false)
	p.positive("flush.parallel_workers", int64(f.ParallelWorkers))
	p.positive("flush.cas_breaker_threshold", int64(f.CASBreakerThreshold))
	p.seconds("flush.cas_breaker_window_sec", f.CASBreakerWindow, false)
}

func (c Config) validateRetry(p *problems) {
	r := c.Retry
	switch {
	case r.InitialBackoff <= 0:
		p.got("retry.initial_backoff", r.InitialBackoff, "must be > 0")
	case r.MaxBackoff < r.InitialBackoff:
		p.got("retry.max_backoff", r.MaxBackoff, "must be at least retry.initial_backoff (%s)", r.InitialBackoff).uses = []string{"retry.initial_backoff"}
	}
	p.positive("retry.max_attempts", int64(r.MaxAttempts))
}

func (c Config) validateState(p *problems) {
	if c.State.Path == "" {
		p.got("state.path", c.State.Path, "required")
	}
}

func (c Config) validateCompaction(p *problems) {
	cc := c.Compaction
	if cc.Interval < 0 {
		p.got("compaction.interval", cc.Interval, "must be 0 (off) or positive")
	}
	if cc.TombstoneTTL <= 0 {
		p.got("compaction.tombstone_ttl", cc.TombstoneTTL, "must be > 0")
	}
	if cc.MinorFanout < 2 {
		p.got("compaction.minor_fanout", cc.MinorFanout, "must be ≥ 2 (the deltas one merge takes)")
	}
	p.positive("compaction.minor_max_bytes", cc.MinorMaxBytes)
	p.positive("compaction.major_delta_percent", cc.MajorDeltaPercent)
	p.positive("compaction.major_min_bytes", cc.MajorMinBytes)
	if cc.MaxDeltaFiles < cc.MinorFanout {
		p.got("compaction.max_delta_files", cc.MaxDeltaFiles, "must be ≥ compaction.minor_fanout (%d): minor compaction keeps up to fanout-1 deltas per level", cc.MinorFanout)
	}
	if cc.MajorInterval < 0 {
		p.got("compaction.major_interval", cc.MajorInterval, "must be 0 (size and count only) or positive")
	}
	p.positive("compaction.memory_budget_bytes", cc.MemoryBudgetBytes)
	p.positive("compaction.target_file_bytes", cc.TargetFileBytes)
}

func (c Config) validateGC(p *problems) {
	if c.GC.GracePeriod <= 0 {
		p.got("gc.grace_period", c.GC.GracePeriod, "must be > 0 (and longer than any flush, compaction or reader)")
	}
}

func (c Config) validateHistory(p *problems) {
	if c.History.Retention <= 0 {
		p.got("history.retention", c.History.Retention, "must be > 0")
	}
}

func (c Config) validatePromotion(p *problems) {
	switch c.Promotion.Mode {
	case PromotionAuto, PromotionManual:
	default:
		p.got("promotion.mode", c.Promotion.Mode, "want %s or %s", PromotionAuto, PromotionManual)
	}
}

func (c Config) validateServe(p *problems) {
	s := c.Serve
	if s.Listen == "" {
		p.got("serve.listen", s.Listen, "must be host:port")
	} else if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		p.got("serve.listen", s.Listen, "must be host:port")
	}
	for _, name := range slices.Sorted(maps.Keys(s.Tokens)) {
		if !tokenHash.MatchString(s.Tokens[name]) {
			// Never the value: it may be a token pasted in clear.
			p.add("serve.tokens", "(hidden)", "token %q: want sha256: and 64 hex digits, the token's hash (pg-cdc serve token %s prints one), not the token", name, name)
		}
	}
	p.positive("serve.rate_limit", int64(s.RateLimit))
	p.positive("serve.rate_burst", int64(s.RateBurst))
	p.offOrPositive("serve.unauthenticated_rate_limit", int64(s.UnauthRateLimit))
	p.positive("serve.unauthenticated_rate_burst", int64(s.UnauthRateBurst))
	switch s.AuditSQL {
	case AuditSQLFull, AuditSQLHash:
	default:
		p.got("serve.audit_sql", s.AuditSQL, `want "full" (the query's text in its audit record) or "hash" (its SHA-256 and length only)`)
	}
	p.positive("serve.max_concurrent", int64(s.MaxConcurrent))
	p.positive("serve.max_streams", int64(s.MaxStreams))
	p.positive("serve.max_body_bytes", s.MaxBodyBytes)
	if s.StaleAfter <= 0 {
		p.got("serve.stale_after", s.StaleAfter, "must be > 0")
	}
	if s.QueueWait <= 0 {
		p.got("serve.queue_wait", s.QueueWait, "must be > 0")
	}
	if s.VersionGrace < 0 {
		p.got("serve.version_grace", s.VersionGrace, "must be ≥ 0 (0: every request waits for the newest version)")
	}
}

func (c Config) validateCatalog(p *problems) {
	cc := c.Catalog
	switch cc.Type {
	case CatalogNone:
		return
	case CatalogIceberg:
	case IcebergGlue:
		// Glue is one of the catalogs that hold Iceberg tables, not a kind
		// of table of its own (a plain Glue table over the sink's prefix
		// would show superseded files too).
		p.got("catalog.type", cc.Type, `Glue holds the Iceberg tables: set catalog.type: iceberg and catalog.iceberg.type: glue`)
		return
	default:
		p.got("catalog.type", cc.Type, `must be "iceberg" or empty (none)`)
		return
	}
	ic := cc.Iceberg
	switch ic.Type {
	case IcebergSQL:
	case IcebergREST:
		if u, err := url.Parse(ic.URI); ic.URI == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.got("catalog.iceberg.uri", ic.URI, "catalog.iceberg.type rest needs the catalog's http(s):// base URL (without /v1)")
		}
	case IcebergGlue:
		if ic.URI != "" {
			p.got("catalog.iceberg.uri", ic.URI, "catalog.iceberg.type glue takes no uri: set the property glue.endpoint for an endpoint other than AWS's")
		}
		// Glue has one namespace level, a database, and folds names to
		// lower case: the namespace is the start of the databases' names
		// (<namespace>__<schema>, <namespace>_changelog__<schema>).
		if ns := ic.Namespace; ns != strings.ToLower(ns) || strings.Contains(ns, "__") || strings.HasPrefix(ns, "_") || strings.HasSuffix(ns, "_") {
			p.got("catalog.iceberg.namespace", ns, "catalog.iceberg.type glue needs a lower-case namespace without __ that neither starts nor ends with _")
		}
	default:
		p.got("catalog.iceberg.type", ic.Type, `must be "sql" (the embedded SQLite catalog), "rest" or "glue"`)
	}
	for k := range ic.Properties {
		if k == "uri" || k == "type" {
			p.got("catalog.iceberg.properties", k, "set catalog.iceberg.uri and catalog.iceberg.type instead")
		}
	}
	// Every sink publishes (its s3:// or gs:// locations), but Glue's
	// readers (Athena, EMR, Glue jobs) read S3 only: a GCS sink publishes
	// through the sql or rest catalog.
	if ic.Type == IcebergGlue && c.Storage.Type == StorageGCS {
		p.got("storage.type", c.Storage.Type, "catalog.iceberg.type glue publishes a filesystem or s3 sink (Glue's readers read S3, not GCS); use the sql or rest catalog")
	}
	if ic.Namespace == "" || strings.ContainsAny(ic.Namespace, "./") {
		p.got("catalog.iceberg.namespace", ic.Namespace, "must be a non-empty name without . or /")
	}
	if ic.Mode != CopyOnWrite {
		p.got("catalog.iceberg.mode", ic.Mode, `must be "copy-on-write" (the state tables replaced at each compaction); merge-on-read is not built yet`)
	}
	if ic.SnapshotMaxAge <= 0 {
		p.got("catalog.iceberg.snapshot_max_age", ic.SnapshotMaxAge, "must be > 0")
	}
	p.positive("catalog.iceberg.snapshot_min_keep", int64(ic.SnapshotMinKeep))
	if ic.CommitInterval < 0 {
		p.got("catalog.iceberg.commit_interval", ic.CommitInterval, "must be >= 0 (0 publishes every manifest version)")
	}
	if ic.StateMaxAge < 0 {
		p.got("catalog.iceberg.state_max_age", ic.StateMaxAge, "must be >= 0 (0 leaves the state tables to compaction's size thresholds)")
	}
}

// tokenHash is a serve token's hash as the configuration holds it.
var tokenHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func (c Config) validateQuery(p *problems) {
	q := c.Query
	p.positive("query.memory_bytes", q.MemoryBytes)
	p.positive("query.threads", int64(q.Threads))
	p.positive("query.max_rows", int64(q.MaxRows))
	p.positive("query.max_bytes", q.MaxBytes)
	p.positive("query.cache_bytes", q.CacheBytes)
	if q.Timeout <= 0 {
		p.got("query.timeout", q.Timeout, "must be > 0")
	}
	switch q.Isolation {
	case "landlock", "process", "none":
	default:
		p.got("query.isolation", q.Isolation, "must be landlock (a worker process the kernel confines; the default), process (a worker process without Landlock, for a kernel that lacks it) or none (in process)")
	}
}

func (c Config) validateMetrics(p *problems) {
	m := c.Metrics
	if m.Listen != "" {
		if _, _, err := net.SplitHostPort(m.Listen); err != nil {
			p.got("metrics.listen", m.Listen, "must be host:port (or empty for off)")
		}
	}
	if m.LivenessTimeout <= 0 {
		p.got("metrics.liveness_timeout", m.LivenessTimeout, "must be > 0")
	}
	if m.ReadinessMaxLag <= 0 {
		p.got("metrics.readiness_max_lag", m.ReadinessMaxLag, "must be > 0")
	}
}

func (c Config) validateGuardrail(p *problems) {
	p.offOrPositive("guardrail.max_retained_wal_bytes", c.Guardrail.MaxRetainedWALBytes)
}

func (c Config) validateSchema(p *problems) {
	p.seconds("schema.reconcile_interval_sec", c.Schema.ReconcileInterval, true)
}

func (c Config) validateBackfill(p *problems) {
	p.positive("backfill.chunk_rows", int64(c.Backfill.ChunkRows))
	p.seconds("backfill.discover_interval_sec", c.Backfill.DiscoverInterval, true)
}

func (c Config) validateLog(p *problems) {
	switch c.Log.Level {
	case LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError:
	default:
		p.got("log.level", c.Log.Level, "want debug, info, warn or error")
	}
	switch c.Log.Format {
	case LogFormatText, LogFormatJSON:
	default:
		p.got("log.format", c.Log.Format, "want text or json")
	}
}

// RequireSource is the error of a command that reads the source when
// source.postgres.url is not set (nil when it is): the read path's
// commands run without it, so Parse accepts a configuration without one.
func (c Config) RequireSource() error {
	if c.Source.Postgres.URL != "" {
		return nil
	}
	return &FieldError{Key: "source.postgres.url", Problem: "required (a postgresql:// URL) by every command that reads the source; only query, diff, refs, promote, serve and mcp run without it"}
}

// validatePostgresURL accepts postgres:// and postgresql:// URLs. Its errors
// never quote the URL or parts of it, which may hold the password.
func validatePostgresURL(raw string) error {
	if raw == "" {
		return errors.New("required (a postgresql:// URL)")
	}
	if strings.Contains(raw, "#") {
		// Almost always an unescaped "#" in the password: it would start a
		// fragment and cut the password short.
		return errors.New(`contains "#": percent-encode it as %23 (most likely in the password)`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's own messages quote the port or host it choked on,
		// which is part of the password when the password holds a "/" or
		// "?", so they are not passed on.
		if ee := url.EscapeError(""); errors.As(err, &ee) {
			return errors.New("not a valid URL: a bad %-escape (percent-encode special characters in the user name and password)")
		}
		return errors.New("not a valid URL: check the host and port, and percent-encode / ? # @ : in the user name and password")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("want a postgres:// or postgresql:// URL, got scheme %q", u.Scheme)
	}
	if u.Opaque != "" {
		return errors.New("want postgresql://host/db, not postgresql:host/db")
	}
	if q, err := url.ParseQuery(u.RawQuery); err == nil && q.Has("sslmode") && !slices.Contains(sslModes, q.Get("sslmode")) {
		return fmt.Errorf("sslmode=%s: want one of %s", q.Get("sslmode"), strings.Join(sslModes, ", "))
	}
	return nil
}

// sslModes are libpq's sslmode values (pgx's too).
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// validateIAMURL checks what an RDS IAM token needs of a URL that
// validatePostgresURL accepted: the token is signed for one host:port and
// user, it is the password (so the URL holds none), and it must travel over
// TLS (RDS refuses IAM sign-in without it, and a token sent in the clear is a
// credential for 15 minutes). sslmode must be in the URL itself, not only in
// PGSSLMODE, so the file alone shows that TLS is required. Errors never
// quote the URL.
func validateIAMURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("source.postgres.url does not parse")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errors.New("the query of source.postgres.url does not parse")
	}
	host := u.Hostname()
	if q.Has("host") {
		host = q.Get("host")
	}
	switch {
	case (u.User == nil || u.User.Username() == "") && q.Get("user") == "":
		return errors.New("source.postgres.url must name the database user the token is for (postgresql://user@host/db)")
	case q.Has("password") || u.User != nil && hasPassword(u):
		return errors.New("source.postgres.url must not hold a password: the IAM token is the password")
	case host == "" || strings.HasPrefix(host, "/"):
		return errors.New("source.postgres.url must name a TCP host (postgresql://user@host:5432/db): the token is signed for it, and a Unix socket has no TLS")
	case strings.Contains(u.Host, ",") || strings.Contains(q.Get("host"), ",") || q.Has("hostaddr"):
		return errors.New("source.postgres.url must name one host (and no hostaddr): a token is signed for one host:port")
	}
	switch mode := q.Get("sslmode"); mode {
	case "require", "verify-ca", "verify-full":
	case "":
		return errors.New("needs TLS: add sslmode=verify-full (or verify-ca, require) to source.postgres.url")
	default:
		return fmt.Errorf("needs TLS: sslmode=%s in source.postgres.url may send the token in the clear; use verify-full (or verify-ca, require)", truncate(mode))
	}
	return nil
}

func hasPassword(u *url.URL) bool {
	_, has := u.User.Password()
	return has
}

// validIdentifier accepts the names that need no quoting in SQL: a letter or
// underscore, then lower-case letters, digits and underscores, at most 63
// bytes (NAMEDATALEN-1). This is stricter than PostgreSQL, which also takes
// quoted names, so that the name reads the same in SQL, in logs and here.
func validIdentifier(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%q must be 1 to 63 characters", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("%q: want lower-case letters, digits and _, not starting with a digit", s)
		}
	}
	return nil
}

// validSlotName is PostgreSQL's own rule (ReplicationSlotValidateName):
// lower-case letters, digits and underscore, at most 63 bytes.
func validSlotName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%q must be 1 to 63 characters", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("%q: replication slot names may contain only lower-case letters, digits and _", s)
		}
	}
	return nil
}

// IncludeIDs parses tables.include. An empty list means every table of the
// configured schemas and gives an empty (non-nil) slice.
func (c Config) IncludeIDs() ([]cdc.TableID, error) {
	ids := make([]cdc.TableID, 0, len(c.Tables.Include))
	for i, s := range c.Tables.Include {
		id, err := cdc.ParseTableID(s)
		if err != nil {
			return nil, fmt.Errorf("tables.include[%d]: %w", i, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// redactedPassword replaces a password in printed configuration.
const redactedPassword = "xxxxx"

// Redacted returns a copy that is safe to print or log: the password in the
// source URL (in the user info, or a password= or sslpassword= query
// parameter, the client key's passphrase) and in storage.endpoint's user
// info is replaced by "xxxxx". A URL that does not parse is replaced whole,
// since where its password sits cannot be known.
func (c Config) Redacted() Config {
	c.Source.Postgres.Schemas = slices.Clone(c.Source.Postgres.Schemas)
	c.Tables.Include = slices.Clone(c.Tables.Include)
	c.Tables.Exclude = slices.Clone(c.Tables.Exclude)
	c.Types = maps.Clone(c.Types)
	c.Catalog.Iceberg.Properties = maps.Clone(c.Catalog.Iceberg.Properties)
	for k := range c.Catalog.Iceberg.Properties {
		if SecretCatalogProperty(k) {
			c.Catalog.Iceberg.Properties[k] = redactedPassword
		}
	}
	c.Source.Postgres.URL = redactURL(c.Source.Postgres.URL)
	c.Storage.Endpoint = redactURL(c.Storage.Endpoint)
	// The template may hold a literal password too; a printed copy never
	// connects, so it has no use for it.
	c.Source.Postgres.urlTemplate, c.Source.Postgres.urlLoaded = "", ""
	return c
}

// SecretCatalogProperty reports whether a catalog.iceberg.properties key
// holds a secret (never printed or logged): REST's token, credential and
// headers, Glue's secret access key and session token.
func SecretCatalogProperty(k string) bool {
	switch k {
	case "token", "credential", "glue.secret-access-key", "glue.session-token",
		// iceberg-go's IO credentials, when set by hand
		"s3.secret-access-key", "s3.session-token", "gcs.jsonkey", "gcs.oauth2.token":
		return true
	}
	return strings.HasPrefix(k, "header.")
}

func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redactedPassword
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedPassword)
		}
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redactedPassword
		} else if q.Has("password") || q.Has("sslpassword") {
			for _, k := range []string{"password", "sslpassword"} {
				if q.Has(k) {
					q.Set(k, redactedPassword)
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// Representations are the values a types: entry may take: "string" stores
// the column as PostgreSQL's text form (docs/types.md). It mirrors
// parquetfile.Representations, which config may not import.
var Representations = []string{"string"}
