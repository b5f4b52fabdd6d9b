package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Validate checks every field and returns all problems at once, each naming
// its key ("flush.interval_sec: must be > 0, got 0"). It never prints the
// source URL's value, which may hold a password.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if err := validatePostgresURL(c.Source.Postgres.URL); err != nil {
		errs = append(errs, fmt.Errorf("source.postgres.url: %w", err))
	} else if c.Source.Postgres.IAMAuth {
		if err := validateIAMURL(c.Source.Postgres.URL); err != nil {
			errs = append(errs, fmt.Errorf("source.postgres.iam_auth: %w", err))
		}
	}
	if c.Source.Postgres.Region != "" && !c.Source.Postgres.IAMAuth {
		bad("source.postgres.region", "applies only with source.postgres.iam_auth: true")
	}
	if len(c.Source.Postgres.Schemas) == 0 {
		bad("source.postgres.schemas", "must name at least one schema")
	}
	for i, s := range c.Source.Postgres.Schemas {
		key := fmt.Sprintf("source.postgres.schemas[%d]", i)
		switch {
		// Any other name PostgreSQL allows is taken as it is, in its exact
		// case and without quotes: "Sales", "a.b", "x y" and `we"ird` name
		// the schemas of those names (pg-cdc quotes them in SQL itself).
		case s == "":
			bad(key, "must not be empty")
		case len(s) > 63:
			// PostgreSQL truncates longer names to 63 bytes (NAMEDATALEN-1),
			// so no schema can have this name.
			bad(key, "%q is %d bytes long; PostgreSQL names are at most 63 bytes", s, len(s))
		case strings.IndexByte(s, 0) >= 0:
			bad(key, "%q contains a NUL byte, which no PostgreSQL name can hold", s)
		case slices.Index(c.Source.Postgres.Schemas, s) < i:
			bad(key, "%q is listed twice", s)
		}
	}

	switch c.Source.Postgres.Provider {
	case ProviderAuto, ProviderSelfManaged, ProviderRDS, ProviderAurora:
	default:
		bad("source.postgres.provider", "want %s, %s, %s or %s, got %q", ProviderAuto, ProviderSelfManaged, ProviderRDS, ProviderAurora, c.Source.Postgres.Provider)
	}

	for _, col := range slices.Sorted(maps.Keys(c.Types)) {
		key := "types." + col
		if _, _, _, err := ParseColumnRef(col); err != nil {
			errs = append(errs, fmt.Errorf("types: %w", err))
		} else if r := c.Types[col]; !slices.Contains(Representations, r) {
			bad(key, "unknown representation %q; want one of %s", r, strings.Join(Representations, ", "))
		}
	}

	for i, s := range c.Tables.Include {
		key := fmt.Sprintf("tables.include[%d]", i)
		id, err := cdc.ParseTableID(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		case slices.Index(c.Tables.Include, s) < i:
			bad(key, "%q is listed twice", s)
		case len(c.Source.Postgres.Schemas) > 0 && !slices.Contains(c.Source.Postgres.Schemas, id.Schema):
			// Capturing it would silently do nothing: the schema is not read.
			bad(key, "schema %q of %q is not in source.postgres.schemas %q", id.Schema, s, c.Source.Postgres.Schemas)
		}
	}
	for i, p := range c.Tables.Exclude {
		key := fmt.Sprintf("tables.exclude[%d]", i)
		if _, err := path.Match(p, ""); err != nil {
			bad(key, "invalid pattern %q: %v", p, err)
			continue
		}
		// "orders" can never match "schema.table", so it would exclude
		// nothing; a glob such as "*_tmp" may still match across the dot.
		if !strings.Contains(p, ".") && !strings.ContainsAny(p, `*?[\`) {
			bad(key, "%q matches no table: write the schema-qualified name, e.g. public.%s", p, p)
		}
	}

	if err := validIdentifier(c.Replication.Publication); err != nil {
		errs = append(errs, fmt.Errorf("replication.publication: %w", err))
	}
	if err := validSlotName(c.Replication.Slot); err != nil {
		errs = append(errs, fmt.Errorf("replication.slot: %w", err))
	}

	seconds := []struct {
		key string
		v   int
	}{
		{"replication.standby_interval_sec", c.Replication.StandbyIntervalSec},
		{"flush.interval_sec", c.Flush.IntervalSec},
		{"flush.drain_timeout_sec", c.Flush.DrainTimeoutSec},
		{"flush.cas_breaker_window_sec", c.Flush.CASBreakerWindowSec},
		{"storage.request_timeout_sec", c.Storage.RequestTimeoutSec},
	}
	for _, s := range seconds {
		switch {
		case s.v <= 0:
			bad(s.key, "must be > 0, got %d", s.v)
		case int64(s.v) > math.MaxInt64/int64(time.Second):
			bad(s.key, "%d seconds is too long", s.v)
		}
	}
	counts := []struct {
		key string
		v   int64
	}{
		{"replication.memory_budget_bytes", c.Replication.MemoryBudgetBytes},
		{"init.parallel_workers", int64(c.Init.ParallelWorkers)},
		{"flush.max_rows", int64(c.Flush.MaxRows)},
		{"flush.max_bytes", c.Flush.MaxBytes},
		{"flush.parallel_workers", int64(c.Flush.ParallelWorkers)},
		{"flush.cas_breaker_threshold", int64(c.Flush.CASBreakerThreshold)},
		{"retry.max_attempts", int64(c.Retry.MaxAttempts)},
		{"compaction.memory_budget_bytes", c.Compaction.MemoryBudgetBytes},
		{"compaction.target_file_bytes", c.Compaction.TargetFileBytes},
	}
	for _, n := range counts {
		if n.v <= 0 {
			bad(n.key, "must be > 0, got %d", n.v)
		}
	}

	if c.Compaction.Interval < 0 {
		bad("compaction.interval", "must be 0 (off) or positive, got %s", c.Compaction.Interval)
	}
	if c.Compaction.TombstoneTTL <= 0 {
		bad("compaction.tombstone_ttl", "must be > 0, got %s", c.Compaction.TombstoneTTL)
	}
	if c.GC.GracePeriod <= 0 {
		bad("gc.grace_period", "must be > 0 (and longer than any flush, compaction or reader), got %s", c.GC.GracePeriod)
	}
	if c.Replication.ReceiveTimeoutSec <= 0 {
		bad("replication.receive_timeout_sec", "must be > 0, got %d", c.Replication.ReceiveTimeoutSec)
	}
	if c.Replication.HeartbeatIntervalSec < 0 {
		bad("replication.heartbeat_interval_sec", "must be 0 (off) or positive, got %d", c.Replication.HeartbeatIntervalSec)
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", "must be host:port (or empty for off), got %q", c.Metrics.Listen)
		}
	}
	if c.Metrics.LivenessTimeout <= 0 {
		bad("metrics.liveness_timeout", "must be > 0, got %s", c.Metrics.LivenessTimeout)
	}
	if c.Metrics.ReadinessMaxLag <= 0 {
		bad("metrics.readiness_max_lag", "must be > 0, got %s", c.Metrics.ReadinessMaxLag)
	}
	if c.Backfill.ChunkRows <= 0 {
		bad("backfill.chunk_rows", "must be > 0, got %d", c.Backfill.ChunkRows)
	}
	if c.Backfill.DiscoverIntervalSec < 0 {
		bad("backfill.discover_interval_sec", "must be 0 (off) or positive, got %d", c.Backfill.DiscoverIntervalSec)
	}
	if c.Schema.ReconcileIntervalSec < 0 {
		bad("schema.reconcile_interval_sec", "must be 0 (off) or positive, got %d", c.Schema.ReconcileIntervalSec)
	}
	if c.Guardrail.MaxRetainedWALBytes < 0 {
		bad("guardrail.max_retained_wal_bytes", "must be 0 (off) or positive, got %d", c.Guardrail.MaxRetainedWALBytes)
	}

	switch c.Storage.Type {
	case StorageFilesystem:
		if c.Storage.Path == "" {
			bad("storage.path", "required for the filesystem sink")
		}
	case StorageS3, StorageGCS:
		if c.Storage.Bucket == "" {
			bad("storage.bucket", "required for the %s sink", c.Storage.Type)
		}
		if p := c.Storage.Prefix; p != "" && (strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") || slices.Contains(strings.Split(p, "/"), "")) {
			bad("storage.prefix", "want a relative key prefix such as \"cdc/app\" (no leading or trailing /, no empty or .. parts), got %q", p)
		}
		if c.Storage.Type == StorageGCS && (c.Storage.Region != "" || c.Storage.ForcePathStyle) {
			bad("storage.region", "region and force_path_style apply to s3 only")
		}
		if c.Storage.Type == StorageS3 && c.Storage.CredentialsFile != "" {
			bad("storage.credentials_file", "applies to gcs only; S3 credentials come from the standard AWS chain")
		}
	default:
		bad("storage.type", "unknown sink type %q; want %q, %q or %q", c.Storage.Type, StorageFilesystem, StorageS3, StorageGCS)
	}
	switch {
	case c.Retry.InitialBackoff <= 0:
		bad("retry.initial_backoff", "must be > 0, got %s", c.Retry.InitialBackoff)
	case c.Retry.MaxBackoff < c.Retry.InitialBackoff:
		bad("retry.max_backoff", "must be at least retry.initial_backoff (%s), got %s", c.Retry.InitialBackoff, c.Retry.MaxBackoff)
	}
	if c.AWS.MaxRetries < 0 || c.AWS.MaxRetries > 100 {
		bad("aws.max_retries", "want 0 to 100, got %d", c.AWS.MaxRetries)
	}
	if c.State.Path == "" {
		bad("state.path", "required")
	}

	switch c.Log.Level {
	case LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError:
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case LogFormatText, LogFormatJSON:
	default:
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	return errors.Join(errs...)
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
	return nil
}

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
	c.Source.Postgres.URL = redactURL(c.Source.Postgres.URL)
	c.Storage.Endpoint = redactURL(c.Storage.Endpoint)
	// The template may hold a literal password too; a printed copy never
	// connects, so it has no use for it.
	c.Source.Postgres.urlTemplate, c.Source.Postgres.urlLoaded = "", ""
	return c
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

// ParseColumnRef splits a types: key "schema.table.column". A schema or
// table name holding a dot cannot be named here (as in tables.include); the
// column, the last part, may not either.
func ParseColumnRef(s string) (schema, table, column string, err error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("%q: want schema.table.column, such as public.orders.id", s)
	}
	return parts[0], parts[1], parts[2], nil
}
