package config

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// leaf is one settable key: its dotted path in the file and a pointer to the
// field it sets. target is one of *string, *int, *int64, *bool,
// *time.Duration (written as a Go duration, "15m"), seconds (a
// time.Duration written as an integer number of seconds), *[]string or
// *map[string]string (a mapping whose keys are data, not names); the set is
// closed and every user switches over it.
type leaf struct {
	path   string
	target any
}

// seconds is the target of a *_sec key: the file, the override and the
// printed form hold an integer number of seconds, the field a
// time.Duration, so that no caller converts. Read values are whole seconds
// between -maxSeconds and maxSeconds.
type seconds struct{ d *time.Duration }

// maxSeconds is the largest number of seconds a time.Duration holds.
const maxSeconds = int64(1<<63-1) / int64(time.Second)

// secondsDuration turns a *_sec value into its duration; ok is false when
// the duration cannot hold it.
func secondsDuration(n int64) (d time.Duration, ok bool) {
	if n > maxSeconds || n < -maxSeconds {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// secondsRangeError is the problem of a *_sec value that secondsDuration
// refuses, worded as Validate worded it when the fields were integers.
func secondsRangeError(n int64) string {
	if n > 0 {
		return fmt.Sprintf("%d seconds is too long", n)
	}
	return fmt.Sprintf("integer %d is out of range", n)
}

// envPrefix starts every override variable.
const envPrefix = "PGCDC_"

// envName is the override variable of a key: PGCDC_ and the path upper-cased
// with dots turned into underscores.
func (l leaf) envName() string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(l.path, ".", "_"))
}

// leaves lists every key of c. Adding a key to Config means adding one line
// here (and to docs/configuration.md, which a test checks); the file walker
// and the environment overrides follow from it.
func leaves(c *Config) []leaf {
	return []leaf{
		{"source.postgres.url", &c.Source.Postgres.URL},
		{"source.postgres.provider", &c.Source.Postgres.Provider},
		{"source.postgres.schemas", &c.Source.Postgres.Schemas},
		{"source.postgres.iam_auth", &c.Source.Postgres.IAMAuth},
		{"source.postgres.region", &c.Source.Postgres.Region},
		{"tables.include", &c.Tables.Include},
		{"tables.exclude", &c.Tables.Exclude},
		{"replication.publication", &c.Replication.Publication},
		{"replication.slot", &c.Replication.Slot},
		{"replication.standby_interval_sec", seconds{&c.Replication.StandbyInterval}},
		{"replication.memory_budget_bytes", &c.Replication.MemoryBudgetBytes},
		{"replication.heartbeat_interval_sec", seconds{&c.Replication.HeartbeatInterval}},
		{"replication.receive_timeout_sec", seconds{&c.Replication.ReceiveTimeout}},
		{"init.parallel_workers", &c.Init.ParallelWorkers},
		{"storage.type", &c.Storage.Type},
		{"storage.path", &c.Storage.Path},
		{"storage.bucket", &c.Storage.Bucket},
		{"storage.prefix", &c.Storage.Prefix},
		{"storage.region", &c.Storage.Region},
		{"storage.endpoint", &c.Storage.Endpoint},
		{"storage.force_path_style", &c.Storage.ForcePathStyle},
		{"storage.credentials_file", &c.Storage.CredentialsFile},
		{"storage.accept_single_writer_risk", &c.Storage.AcceptSingleWriterRisk},
		{"storage.request_timeout_sec", seconds{&c.Storage.RequestTimeout}},
		{"aws.max_retries", &c.AWS.MaxRetries},
		{"flush.interval_sec", seconds{&c.Flush.Interval}},
		{"flush.max_rows", &c.Flush.MaxRows},
		{"flush.max_bytes", &c.Flush.MaxBytes},
		{"flush.drain_timeout_sec", seconds{&c.Flush.DrainTimeout}},
		{"flush.parallel_workers", &c.Flush.ParallelWorkers},
		{"flush.cas_breaker_threshold", &c.Flush.CASBreakerThreshold},
		{"flush.cas_breaker_window_sec", seconds{&c.Flush.CASBreakerWindow}},
		{"retry.initial_backoff", &c.Retry.InitialBackoff},
		{"retry.max_backoff", &c.Retry.MaxBackoff},
		{"retry.max_attempts", &c.Retry.MaxAttempts},
		{"state.path", &c.State.Path},
		{"compaction.interval", &c.Compaction.Interval},
		{"compaction.minor_fanout", &c.Compaction.MinorFanout},
		{"compaction.minor_max_bytes", &c.Compaction.MinorMaxBytes},
		{"compaction.major_delta_percent", &c.Compaction.MajorDeltaPercent},
		{"compaction.major_min_bytes", &c.Compaction.MajorMinBytes},
		{"compaction.max_delta_files", &c.Compaction.MaxDeltaFiles},
		{"compaction.major_interval", &c.Compaction.MajorInterval},
		{"compaction.tombstone_ttl", &c.Compaction.TombstoneTTL},
		{"compaction.memory_budget_bytes", &c.Compaction.MemoryBudgetBytes},
		{"compaction.target_file_bytes", &c.Compaction.TargetFileBytes},
		{"gc.grace_period", &c.GC.GracePeriod},
		{"history.retention", &c.History.Retention},
		{"promotion.mode", &c.Promotion.Mode},
		{"query.memory_bytes", &c.Query.MemoryBytes},
		{"query.threads", &c.Query.Threads},
		{"query.timeout", &c.Query.Timeout},
		{"query.max_rows", &c.Query.MaxRows},
		{"query.max_bytes", &c.Query.MaxBytes},
		{"query.cache_bytes", &c.Query.CacheBytes},
		{"query.isolation", &c.Query.Isolation},
		{"serve.listen", &c.Serve.Listen},
		{"serve.tokens", &c.Serve.Tokens},
		{"serve.tokens_file", &c.Serve.TokensFile},
		{"serve.rate_limit", &c.Serve.RateLimit},
		{"serve.rate_burst", &c.Serve.RateBurst},
		{"serve.unauthenticated_rate_limit", &c.Serve.UnauthRateLimit},
		{"serve.unauthenticated_rate_burst", &c.Serve.UnauthRateBurst},
		{"serve.audit_sql", &c.Serve.AuditSQL},
		{"serve.max_concurrent", &c.Serve.MaxConcurrent},
		{"serve.max_body_bytes", &c.Serve.MaxBodyBytes},
		{"serve.stale_after", &c.Serve.StaleAfter},
		{"serve.queue_wait", &c.Serve.QueueWait},
		{"serve.max_streams", &c.Serve.MaxStreams},
		{"serve.version_grace", &c.Serve.VersionGrace},
		{"serve.allowed_origins", &c.Serve.AllowedOrigins},
		{"serve.allowed_hosts", &c.Serve.AllowedHosts},
		{"catalog.type", &c.Catalog.Type},
		{"catalog.iceberg.type", &c.Catalog.Iceberg.Type},
		{"catalog.iceberg.uri", &c.Catalog.Iceberg.URI},
		{"catalog.iceberg.properties", &c.Catalog.Iceberg.Properties},
		{"catalog.iceberg.namespace", &c.Catalog.Iceberg.Namespace},
		{"catalog.iceberg.mode", &c.Catalog.Iceberg.Mode},
		{"catalog.iceberg.snapshot_max_age", &c.Catalog.Iceberg.SnapshotMaxAge},
		{"catalog.iceberg.snapshot_min_keep", &c.Catalog.Iceberg.SnapshotMinKeep},
		{"catalog.iceberg.commit_interval", &c.Catalog.Iceberg.CommitInterval},
		{"catalog.iceberg.state_max_age", &c.Catalog.Iceberg.StateMaxAge},
		{"metrics.listen", &c.Metrics.Listen},
		{"metrics.liveness_timeout", &c.Metrics.LivenessTimeout},
		{"metrics.readiness_max_lag", &c.Metrics.ReadinessMaxLag},
		{"guardrail.max_retained_wal_bytes", &c.Guardrail.MaxRetainedWALBytes},
		{"schema.reconcile_interval_sec", seconds{&c.Schema.ReconcileInterval}},
		{"backfill.chunk_rows", &c.Backfill.ChunkRows},
		{"backfill.discover_interval_sec", seconds{&c.Backfill.DiscoverInterval}},
		{"log.level", &c.Log.Level},
		{"log.format", &c.Log.Format},
		{"types", &c.Types},
	}
}

// schema indexes the leaves of one Config for lookups by path.
type schema struct {
	leaves   map[string]leaf
	sections map[string]bool // every proper prefix of a leaf path: "source", "source.postgres"
	paths    []string        // every leaf and section path, for suggestions
}

func newSchema(c *Config) schema {
	s := schema{leaves: map[string]leaf{}, sections: map[string]bool{}}
	for _, l := range leaves(c) {
		s.leaves[l.path] = l
		s.paths = append(s.paths, l.path)
		parts := strings.Split(l.path, ".")
		for i := 1; i < len(parts); i++ {
			sec := strings.Join(parts[:i], ".")
			if !s.sections[sec] {
				s.sections[sec] = true
				s.paths = append(s.paths, sec)
			}
		}
	}
	sort.Strings(s.paths)
	return s
}

// kindName names what a target wants, for "want ..." messages.
func kindName(target any) string {
	switch target.(type) {
	case *int, *int64:
		return "an integer"
	case seconds:
		return "an integer number of seconds"
	case *time.Duration:
		return "a duration"
	case *bool:
		return "true or false"
	case *[]string:
		return "a list of strings"
	case *map[string]string:
		return "a mapping of strings"
	default:
		return "a string"
	}
}

// suggest returns ` (did you mean "x"?)` when one candidate is close to
// got, so that a typo is answered with its fix.
func suggest(got string, candidates []string) string {
	best, bestDist := "", 3 // at most two edits away
	for _, c := range candidates {
		if d := editDistance(got, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return ` (did you mean "` + best + `"?)`
}

// editDistance is the Levenshtein distance of a and b in bytes. Keys are
// short ASCII, so the quadratic table is cheap; long inputs (fuzzing, junk)
// are cut off early because they cannot be typos of a key.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
