package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// minimal is the smallest valid file: only the URL has no default.
const minimal = "source:\n  postgres:\n    url: postgresql://app@127.0.0.1:5432/app\n"

// full sets every key, in the shape of docs/configuration.md.
const full = `# a comment
source:
  postgres:
    url: "postgresql://user:${PGPASSWORD}@127.0.0.1:5432/app"
    provider: rds
    schemas: ["public", "sales"]
tables:
  include: [public.orders, sales.items]
  exclude:
    - "public.tmp_*"
replication:
  publication: my_pub
  slot: my_slot
  standby_interval_sec: 5
  memory_budget_bytes: 1048576
init:
  parallel_workers: 2
storage:
  type: filesystem
  path: /var/lib/pgcdc
flush:
  interval_sec: 3
  max_rows: 500
  max_bytes: 2048
  drain_timeout_sec: 7
  parallel_workers: 8
retry:
  initial_backoff: 250ms
  max_backoff: 1m
  max_attempts: 4
state:
  path: /var/tmp/pgcdc
compaction:
  interval: 15m
  minor_fanout: 4
  minor_max_bytes: 1024
  major_delta_percent: 25
  major_min_bytes: 2048
  max_delta_files: 16
  major_interval: 6h
  tombstone_ttl: 48h
  memory_budget_bytes: 4096
  target_file_bytes: 8192
gc:
  grace_period: 2h
history:
  retention: 72h
log:
  level: debug
  format: json
types:
  "public.orders.id_uuid": string
`

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(full), "pg-cdc.yml", []string{"PGPASSWORD=s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Source: SourceConfig{Postgres: PostgresConfig{
			URL:      "postgresql://user:s3cr3t@127.0.0.1:5432/app",
			Provider: "rds",
			Schemas:  []string{"public", "sales"},
			// Kept so that ResolveURL reads PGPASSWORD again per connection.
			urlTemplate: "postgresql://user:${PGPASSWORD}@127.0.0.1:5432/app",
			urlLoaded:   "postgresql://user:s3cr3t@127.0.0.1:5432/app",
		}},
		Tables:      TablesConfig{Include: []string{"public.orders", "sales.items"}, Exclude: []string{"public.tmp_*"}},
		Replication: ReplicationConfig{Publication: "my_pub", Slot: "my_slot", StandbyInterval: 5 * time.Second, MemoryBudgetBytes: 1 << 20, ReceiveTimeout: 60 * time.Second},
		Init:        InitConfig{ParallelWorkers: 2},
		Storage:     StorageConfig{Type: "filesystem", Path: "/var/lib/pgcdc", RequestTimeout: 30 * time.Second},
		AWS:         AWSConfig{MaxRetries: 5},
		Retry:       RetryConfig{InitialBackoff: 250 * time.Millisecond, MaxBackoff: time.Minute, MaxAttempts: 4},
		Flush:       FlushConfig{Interval: 3 * time.Second, MaxRows: 500, MaxBytes: 2048, DrainTimeout: 7 * time.Second, ParallelWorkers: 8, CASBreakerThreshold: 10, CASBreakerWindow: 60 * time.Second},
		State:       StateConfig{Path: "/var/tmp/pgcdc"},
		Compaction: CompactionConfig{Interval: 15 * time.Minute, MinorFanout: 4, MinorMaxBytes: 1024, MajorDeltaPercent: 25, MajorMinBytes: 2048,
			MaxDeltaFiles: 16, MajorInterval: 6 * time.Hour, TombstoneTTL: 48 * time.Hour, MemoryBudgetBytes: 4096, TargetFileBytes: 8192},
		GC:        GCConfig{GracePeriod: 2 * time.Hour},
		History:   HistoryConfig{Retention: 72 * time.Hour},
		Metrics:   MetricsConfig{Listen: "127.0.0.1:9090", LivenessTimeout: 5 * time.Minute, ReadinessMaxLag: 2 * time.Minute},
		Schema:    SchemaConfig{ReconcileInterval: 60 * time.Second},
		Backfill:  BackfillConfig{ChunkRows: 50_000, DiscoverInterval: 30 * time.Second},
		Promotion: PromotionConfig{Mode: PromotionAuto},
		Query:     Default().Query,
		Serve:     Default().Serve,
		Catalog:   Default().Catalog,
		Log:       LogConfig{Level: "debug", Format: "json"},
		Types:     map[string]string{"public.orders.id_uuid": "string"},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if c.Flush.Interval != 3*time.Second || c.Flush.DrainTimeout != 7*time.Second ||
		c.Replication.StandbyInterval != 5*time.Second {
		t.Fatal("the *_sec keys are not read as seconds")
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), "pg-cdc.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Source.Postgres.URL = "postgresql://app@127.0.0.1:5432/app"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	d := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"schemas", d.Source.Postgres.Schemas, []string{"public"}},
		{"include", d.Tables.Include, []string{}},
		{"exclude", d.Tables.Exclude, []string{}},
		{"publication", d.Replication.Publication, "pg_cdc_pub"},
		{"slot", d.Replication.Slot, "pg_cdc_slot"},
		{"standby", d.Replication.StandbyInterval, 10 * time.Second},
		{"memory budget", d.Replication.MemoryBudgetBytes, int64(67108864)},
		{"init workers", d.Init.ParallelWorkers, 4},
		{"storage type", d.Storage.Type, "filesystem"},
		{"storage path", d.Storage.Path, "./pgcdc-data"},
		{"request timeout", d.Storage.RequestTimeout, 30 * time.Second},
		{"retry backoff", d.Retry.InitialBackoff, time.Second},
		{"retry max backoff", d.Retry.MaxBackoff, 30 * time.Second},
		{"retry attempts", d.Retry.MaxAttempts, 10},
		{"flush interval", d.Flush.Interval, 10 * time.Second},
		{"flush rows", d.Flush.MaxRows, 100000},
		{"flush bytes", d.Flush.MaxBytes, int64(134217728)},
		{"drain", d.Flush.DrainTimeout, 30 * time.Second},
		{"flush workers", d.Flush.ParallelWorkers, 4},
		{"state", d.State.Path, "./.pgcdc"},
		{"level", d.Log.Level, "info"},
		{"format", d.Log.Format, "text"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	// Default() must hand out fresh slices: a caller appending to one must
	// not change the next Default().
	d.Source.Postgres.Schemas[0] = "changed"
	if Default().Source.Postgres.Schemas[0] != "public" {
		t.Fatal("Default shares its slices between calls")
	}
}

func TestParseEmptyInputs(t *testing.T) {
	env := []string{"PGCDC_SOURCE_POSTGRES_URL=postgresql://h/db"}
	for _, data := range []string{"", "# only a comment\n", "---\n", "~\n", "source:\n", "flush:\n  # nothing\n"} {
		c, err := Parse([]byte(data), "x.yml", env)
		if err != nil {
			t.Errorf("Parse(%q): %v", data, err)
			continue
		}
		if c.Flush.Interval != 10*time.Second || c.Source.Postgres.URL != "postgresql://h/db" {
			t.Errorf("Parse(%q): defaults not kept: %+v", data, c)
		}
	}
}

// TestParseErrors covers the file rules: every error names the key and the
// line, and nothing is silently ignored.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  []string
		want []string // substrings of the error, all required
	}{
		{"unknown key with line", minimal + "flush:\n  intervall_sec: 5\n", nil,
			[]string{`pg-cdc.yml:5: unknown key "flush.intervall_sec"`, `did you mean "flush.interval_sec"`}},
		{"unknown section", minimal + "sink:\n  path: x\n", nil,
			[]string{`pg-cdc.yml:4: unknown key "sink"`}},
		{"unknown nested key", "source:\n  postgres:\n    url: postgresql://h/db\n    host: x\n", nil,
			[]string{`pg-cdc.yml:4: unknown key "source.postgres.host"`}},
		{"every unknown key reported", minimal + "a: 1\nb: 2\n", nil,
			[]string{`pg-cdc.yml:4: unknown key "a"`, `pg-cdc.yml:5: unknown key "b"`}},
		{"bare number for a duration", minimal + "compaction:\n  interval: 15\n", nil,
			[]string{`pg-cdc.yml:5: compaction.interval: want a duration such as "90s", "15m" or "720h", got integer 15`}},
		{"bad duration", minimal + "gc:\n  grace_period: 1 hour\n", nil,
			[]string{`pg-cdc.yml:5: gc.grace_period: want a duration such as "90s", "15m" or "720h", got "1 hour"`}},
		{"string for int", minimal + "flush:\n  interval_sec: ten\n", nil,
			[]string{`pg-cdc.yml:5: flush.interval_sec: want an integer, got string "ten"`}},
		{"quoted number is a string", minimal + "flush:\n  max_rows: \"10\"\n", nil,
			[]string{`pg-cdc.yml:5: flush.max_rows: want an integer, got string "10"`}},
		{"float for int", minimal + "flush:\n  max_bytes: 1.5\n", nil,
			[]string{`pg-cdc.yml:5: flush.max_bytes: want an integer, got number 1.5`}},
		{"int out of range", minimal + "flush:\n  max_bytes: 99999999999999999999\n", nil,
			[]string{`pg-cdc.yml:5: flush.max_bytes:`}},
		{"octal surprise", minimal + "flush:\n  max_rows: 0100\n", nil,
			[]string{`pg-cdc.yml:5: flush.max_rows: 0100 has a leading zero`}},
		{"list for int", minimal + "init:\n  parallel_workers: [1]\n", nil,
			[]string{`pg-cdc.yml:5: init.parallel_workers: want an integer, got a list`}},
		{"null for int", minimal + "log:\n  level:\n", nil,
			[]string{`pg-cdc.yml:5: log.level: want a string, got no value`}},
		{"scalar for list", "source:\n  postgres:\n    url: postgresql://h/db\n    schemas: public\n", nil,
			[]string{`pg-cdc.yml:4: source.postgres.schemas: want a list of strings`}},
		{"mapping in list", minimal + "tables:\n  include:\n    - public.a\n    - {x: 1}\n", nil,
			[]string{`pg-cdc.yml:7: tables.include[1]: want a string, got a mapping`}},
		{"scalar for section", minimal + "flush: 10\n", nil,
			[]string{`pg-cdc.yml:4: want a mapping of keys for flush, got integer 10`}},
		{"list at top", "- a\n", nil,
			[]string{`pg-cdc.yml:1: want a mapping of keys at the top level, got a list`}},
		{"duplicate key", minimal + "flush:\n  max_rows: 1\n  max_rows: 2\n", nil,
			[]string{`pg-cdc.yml:6: duplicate key "flush.max_rows" (first set at line 5)`}},
		{"merge key", minimal + "flush:\n  <<: {max_rows: 1}\n", nil,
			[]string{`pg-cdc.yml:5: merge keys (<<) are not supported in flush`}},
		{"two documents", minimal + "---\nflush: {}\n", nil,
			[]string{`pg-cdc.yml:4: more than one YAML document`}},
		{"syntax error", minimal + "flush:\n  max_rows: [1\n", nil,
			[]string{`pg-cdc.yml:`}},
		// yaml.v3 reports where the enclosing block started, not the bad line.
		{"bad indentation", "source:\n  postgres:\n    url: x\n   bad: 1\n", nil,
			[]string{`pg-cdc.yml:1: did not find expected key`}},
		{"unset variable", "source:\n  postgres:\n    url: postgresql://u:${PGPASSWORD}@h/db\n", nil,
			[]string{`pg-cdc.yml:3: source.postgres.url: environment variable PGPASSWORD is not set`}},
		{"unset variable in list", minimal + "tables:\n  include: [public.a, \"${T}\"]\n", nil,
			[]string{`pg-cdc.yml:5: tables.include[1]: environment variable T is not set`}},
		{"bare dollar", minimal + "storage:\n  path: /data/$HOME\n", nil,
			[]string{`pg-cdc.yml:5: storage.path: "$" must start ${NAME}`}},
		{"unterminated reference", minimal + "storage:\n  path: /data/${HOME\n", []string{"HOME=/h"},
			[]string{`pg-cdc.yml:5: storage.path: unterminated "${"`}},
		{"default syntax unsupported", minimal + "storage:\n  path: ${D:-x}\n", nil,
			[]string{`pg-cdc.yml:5: storage.path: invalid variable reference ${D:-x}`}},
		{"invalid after parse", minimal + "flush:\n  max_rows: 0\n", nil,
			[]string{`pg-cdc.yml:5: flush.max_rows: must be > 0, got 0`}},
		{"seconds overflow", minimal + "flush:\n  interval_sec: 4611686018427387904\n", nil,
			[]string{`pg-cdc.yml:5: flush.interval_sec: 4611686018427387904 seconds is too long`}},
		{"negative seconds overflow", minimal + "schema:\n  reconcile_interval_sec: -4611686018427387904\n", nil,
			[]string{`pg-cdc.yml:5: schema.reconcile_interval_sec: integer -4611686018427387904 is out of range`}},
		{"seconds are integers", minimal + "flush:\n  drain_timeout_sec: 30s\n", nil,
			[]string{`pg-cdc.yml:5: flush.drain_timeout_sec: want an integer, got string "30s"`}},
		{"seconds octal surprise", minimal + "replication:\n  receive_timeout_sec: 060\n", nil,
			[]string{`pg-cdc.yml:5: replication.receive_timeout_sec: 060 has a leading zero`}},
		// yaml.v3 tags an integer beyond int64 as a float, as for any key.
		{"seconds beyond int64", minimal + "storage:\n  request_timeout_sec: 99999999999999999999\n", nil,
			[]string{`pg-cdc.yml:5: storage.request_timeout_sec: want an integer, got number 99999999999999999999`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "pg-cdc.yml", tc.env)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "x", "EMPTY": "", "B_2": "y$z"}
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "x"},
		{"a${A}b${B_2}c", "axby$zc"}, // a value's "$" is not expanded again
		{"$$", "$"},
		{"$${A}", "${A}"},
		{"p$$w", "p$w"},
		{"[${EMPTY}]", "[]"}, // set but empty is empty, not an error
	}
	for _, tc := range cases {
		got, err := expand(tc.in, mapLookup(env))
		if err != nil || got != tc.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"$", "a$", "$A", "${}", "${1A}", "${A", "${A-B}", "${UNSET}"} {
		if _, err := expand(in, mapLookup(env)); err == nil {
			t.Errorf("expand(%q) succeeded, want an error", in)
		}
	}
}

func TestExpansionOnValuesOnly(t *testing.T) {
	// A key is never expanded: "${K}" stays an unknown key even when K names
	// a real one.
	_, err := Parse([]byte(minimal+"flush:\n  ${K}: 5\n"), "f.yml", []string{"K=max_rows"})
	if err == nil || !strings.Contains(err.Error(), `unknown key "flush.${K}"`) {
		t.Fatalf("got %v, want an unknown key error", err)
	}
}

func TestEnvOverrides(t *testing.T) {
	cases := []struct {
		name  string
		env   []string
		check func(c Config) bool
	}{
		{"int", []string{"PGCDC_FLUSH_INTERVAL_SEC=42"}, func(c Config) bool { return c.Flush.Interval == 42*time.Second }},
		{"int with spaces", []string{"PGCDC_FLUSH_MAX_ROWS= 7 "}, func(c Config) bool { return c.Flush.MaxRows == 7 }},
		{"int64", []string{"PGCDC_FLUSH_MAX_BYTES=9000000000"}, func(c Config) bool { return c.Flush.MaxBytes == 9000000000 }},
		{"nested string", []string{"PGCDC_SOURCE_POSTGRES_URL=postgresql://other/db"},
			func(c Config) bool { return c.Source.Postgres.URL == "postgresql://other/db" }},
		{"string is literal", []string{"PGCDC_STORAGE_PATH=/d/${X}$$"}, func(c Config) bool { return c.Storage.Path == "/d/${X}$$" }},
		{"list", []string{"PGCDC_TABLES_INCLUDE=public.a, public.b"},
			func(c Config) bool { return slices.Equal(c.Tables.Include, []string{"public.a", "public.b"}) }},
		{"empty list", []string{"PGCDC_TABLES_EXCLUDE="}, func(c Config) bool { return len(c.Tables.Exclude) == 0 }},
		{"env beats file", []string{"PGCDC_LOG_LEVEL=warn"}, func(c Config) bool { return c.Log.Level == "warn" }},
		{"last entry wins", []string{"PGCDC_LOG_LEVEL=warn", "PGCDC_LOG_LEVEL=error"}, func(c Config) bool { return c.Log.Level == "error" }},
		{"allow-listed", []string{"PGCDC_FAILPOINTS=x=kill", "PGCDC_CONFIG=/etc/pg-cdc.yml"}, func(c Config) bool { return true }},
		{"other prefixes ignored", []string{"PGCDCX=1", "pgcdc_flush_max_rows=x", "NOEQUALS"}, func(c Config) bool { return true }},
	}
	file := minimal + "tables:\n  exclude: [public.x]\nlog:\n  level: debug\n"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(file), "f.yml", tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("override not applied: %+v", c)
			}
		})
	}
}

func TestEnvErrors(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"bad int", []string{"PGCDC_FLUSH_INTERVAL_SEC=ten"},
			[]string{`environment variable PGCDC_FLUSH_INTERVAL_SEC (flush.interval_sec): want an integer, got "ten"`}},
		{"empty int is not a default", []string{"PGCDC_FLUSH_INTERVAL_SEC="},
			[]string{`PGCDC_FLUSH_INTERVAL_SEC`, `want an integer, got ""`}},
		{"int overflow", []string{"PGCDC_FLUSH_MAX_BYTES=99999999999999999999"}, []string{`PGCDC_FLUSH_MAX_BYTES`}},
		{"seconds overflow", []string{"PGCDC_FLUSH_INTERVAL_SEC=4611686018427387904"},
			[]string{`environment variable PGCDC_FLUSH_INTERVAL_SEC (flush.interval_sec): 4611686018427387904 seconds is too long`}},
		{"seconds are integers", []string{"PGCDC_FLUSH_DRAIN_TIMEOUT_SEC=30s"},
			[]string{`environment variable PGCDC_FLUSH_DRAIN_TIMEOUT_SEC (flush.drain_timeout_sec): want an integer, got "30s"`}},
		{"unknown variable", []string{"PGCDC_FLUSH_INTERVALL_SEC=5"},
			[]string{`environment variable PGCDC_FLUSH_INTERVALL_SEC: unknown pg-cdc setting (did you mean "PGCDC_FLUSH_INTERVAL_SEC"?)`}},
		{"section is not a leaf", []string{"PGCDC_FLUSH=5"}, []string{`PGCDC_FLUSH: unknown`}},
		{"empty list item", []string{"PGCDC_TABLES_INCLUDE=public.a,,public.b"},
			[]string{`PGCDC_TABLES_INCLUDE (tables.include): item 1 of the comma-separated list is empty`}},
		{"invalid after override", []string{"PGCDC_LOG_FORMAT=xml"},
			[]string{`environment variable PGCDC_LOG_FORMAT (log.format): want text or json, got "xml"`}},
		{"all reported", []string{"PGCDC_A=1", "PGCDC_B=2"}, []string{"PGCDC_A", "PGCDC_B"}},
		{"bool is true or false", []string{"PGCDC_STORAGE_FORCE_PATH_STYLE=yes"},
			[]string{`PGCDC_STORAGE_FORCE_PATH_STYLE (storage.force_path_style): want true or false, got "yes"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal), "f.yml", tc.env)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestEveryLeafHasAnOverride sets every key through its variable, so a new
// key cannot be added without one, and no two keys share a variable.
func TestEveryLeafHasAnOverride(t *testing.T) {
	var c Config
	seen := map[string]string{}
	for _, l := range leaves(&c) {
		name := l.envName()
		if prev, dup := seen[name]; dup {
			t.Fatalf("%s and %s share the variable %s", prev, l.path, name)
		}
		seen[name] = l.path
		val := "1"
		if _, isStr := l.target.(*string); isStr {
			val = "v"
		}
		if _, isMap := l.target.(*map[string]string); isMap {
			val = "s.t.c=v"
		}
		if _, isDur := l.target.(*time.Duration); isDur {
			val = "1s"
		}
		if _, isBool := l.target.(*bool); isBool {
			val = "true"
		}
		if err := setFromEnv(l, val); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !reflect.DeepEqual(c, Config{
		Source:      SourceConfig{Postgres: PostgresConfig{URL: "v", Provider: "v", Schemas: []string{"1"}, IAMAuth: true, Region: "v"}},
		Tables:      TablesConfig{Include: []string{"1"}, Exclude: []string{"1"}},
		Replication: ReplicationConfig{Publication: "v", Slot: "v", StandbyInterval: time.Second, MemoryBudgetBytes: 1, HeartbeatInterval: time.Second, ReceiveTimeout: time.Second},
		Init:        InitConfig{ParallelWorkers: 1},
		Storage: StorageConfig{Type: "v", Path: "v", Bucket: "v", Prefix: "v", Region: "v", Endpoint: "v",
			ForcePathStyle: true, CredentialsFile: "v", AcceptSingleWriterRisk: true, RequestTimeout: time.Second},
		AWS:   AWSConfig{MaxRetries: 1},
		Retry: RetryConfig{InitialBackoff: time.Second, MaxBackoff: time.Second, MaxAttempts: 1},
		Flush: FlushConfig{Interval: time.Second, MaxRows: 1, MaxBytes: 1, DrainTimeout: time.Second, ParallelWorkers: 1, CASBreakerThreshold: 1, CASBreakerWindow: time.Second},
		State: StateConfig{Path: "v"},
		Compaction: CompactionConfig{Interval: time.Second, MinorFanout: 1, MinorMaxBytes: 1, MajorDeltaPercent: 1, MajorMinBytes: 1, MaxDeltaFiles: 1,
			MajorInterval: time.Second, TombstoneTTL: time.Second, MemoryBudgetBytes: 1, TargetFileBytes: 1},
		GC:        GCConfig{GracePeriod: time.Second},
		History:   HistoryConfig{Retention: time.Second},
		Metrics:   MetricsConfig{Listen: "v", LivenessTimeout: time.Second, ReadinessMaxLag: time.Second},
		Guardrail: GuardrailConfig{MaxRetainedWALBytes: 1},
		Schema:    SchemaConfig{ReconcileInterval: time.Second},
		Backfill:  BackfillConfig{ChunkRows: 1, DiscoverInterval: time.Second},
		Promotion: PromotionConfig{Mode: "v"},
		Query:     QueryConfig{MemoryBytes: 1, Threads: 1, Timeout: time.Second, MaxRows: 1, MaxBytes: 1, CacheBytes: 1, Isolation: "v"},
		Serve: ServeConfig{Listen: "v", Tokens: map[string]string{"s.t.c": "v"}, TokensFile: "v", RateLimit: 1, RateBurst: 1,
			UnauthRateLimit: 1, UnauthRateBurst: 1, AuditSQL: "v",
			MaxConcurrent: 1, QueueWait: time.Second, MaxStreams: 1, VersionGrace: time.Second, MaxBodyBytes: 1, StaleAfter: time.Second, AllowedOrigins: []string{"1"}, AllowedHosts: []string{"1"}},
		Catalog: CatalogConfig{Type: "v", Iceberg: IcebergConfig{Type: "v", URI: "v", Properties: map[string]string{"s.t.c": "v"}, Namespace: "v", Mode: "v", SnapshotMaxAge: time.Second, SnapshotMinKeep: 1, CommitInterval: time.Second, StateMaxAge: time.Second}},
		Log:     LogConfig{Level: "v", Format: "v"},
		Types:   map[string]string{"s.t.c": "v"},
	}) {
		t.Fatalf("some field has no leaf: %+v", c)
	}
}

// TestDocumented keeps docs/configuration.md in step with the keys.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	for _, l := range leaves(&c) {
		for _, s := range []string{"`" + l.path + "`", "`" + l.envName() + "`"} {
			if !strings.Contains(string(doc), s) {
				t.Errorf("docs/configuration.md does not mention %s", s)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pg-cdc.yml")
	if err := os.WriteFile(p, []byte(minimal+"flush:\n  bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, nil)
	if err == nil || !strings.Contains(err.Error(), p+":5: unknown key \"flush.bogus\"") {
		t.Fatalf("got %v, want an error naming %s:5", err, p)
	}
	missing := filepath.Join(dir, "nope.yml")
	_, err = Load(missing, nil)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("got %v, want an error naming the missing file", err)
	}
	if _, err := Load("", nil); err == nil {
		t.Fatal("Load(\"\") succeeded")
	}
}

func TestIncludeIDs(t *testing.T) {
	c := Default()
	c.Tables.Include = []string{"public.orders", "public.items"}
	ids, err := c.IncludeIDs()
	if err != nil {
		t.Fatal(err)
	}
	want := []cdc.TableID{{Schema: "public", Name: "orders"}, {Schema: "public", Name: "items"}}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("got %v, want %v", ids, want)
	}
	c.Tables.Include = []string{"orders"}
	if _, err := c.IncludeIDs(); err == nil || !strings.Contains(err.Error(), "tables.include[0]") {
		t.Fatalf("got %v, want an error naming tables.include[0]", err)
	}
	c.Tables.Include = nil
	if ids, err := c.IncludeIDs(); err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("empty include: got %#v, %v", ids, err)
	}
}

func TestRedacted(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgresql://user:s3cr3t@127.0.0.1:5432/app", "postgresql://user:xxxxx@127.0.0.1:5432/app"},
		{"postgresql://user@h/app", "postgresql://user@h/app"},
		{"postgresql://h/app?password=s3cr3t&sslmode=require", "postgresql://h/app?password=xxxxx&sslmode=require"},
		{"postgresql://u:p%40ss@h/app", "postgresql://u:xxxxx@h/app"},
		{"postgresql://u:s3cr3t@h:bad/app", "xxxxx"},
		{"", ""},
	}
	for _, tc := range cases {
		c := Default()
		c.Source.Postgres.URL = tc.in
		c.Tables.Include = []string{"public.a"}
		r := c.Redacted()
		if r.Source.Postgres.URL != tc.want {
			t.Errorf("Redacted(%q) = %q, want %q", tc.in, r.Source.Postgres.URL, tc.want)
		}
		if strings.Contains(r.Source.Postgres.URL, "s3cr3t") {
			t.Errorf("Redacted(%q) leaks the password", tc.in)
		}
		if c.Source.Postgres.URL != tc.in {
			t.Error("Redacted changed its receiver")
		}
		r.Tables.Include[0] = "changed"
		if c.Tables.Include[0] != "public.a" {
			t.Error("Redacted shares slices with its receiver")
		}
	}
}

func TestTypesOverrides(t *testing.T) {
	c, err := Parse([]byte(minimal+"types: {\"public.t.u\": string}\n"), "f.yml", []string{"PGCDC_TYPES=public.t.a=string, public.t.b=string"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Types, map[string]string{"public.t.a": "string", "public.t.b": "string"}) {
		t.Errorf("environment override: got %v", c.Types)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"types: {\"public.t\": string}\n", `"public.t": want schema.table.column`},
		{"types: {\"public.t.c\": uuid}\n", `types.public.t.c: unknown representation "uuid"`},
		{"types: [a]\n", "types: want a mapping"},
		{"types: {\"public.t.c\": [a]}\n", "types.public.t.c: want a string"},
	} {
		_, err := Parse([]byte(minimal+tc.yaml), "f.yml", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestObjectStoreSinks parses the keys of the s3 and gcs sinks; booleans
// accept only true and false.
func TestObjectStoreSinks(t *testing.T) {
	c, err := Parse([]byte(`source:
  postgres:
    url: postgresql://u@h/db
storage:
  type: s3
  bucket: lake
  prefix: cdc/app
  region: eu-west-1
  endpoint: http://127.0.0.1:7070
  force_path_style: true
  accept_single_writer_risk: false
  request_timeout_sec: 5
aws:
  max_retries: 7
`), "f.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := StorageConfig{Type: "s3", Path: "./pgcdc-data", Bucket: "lake", Prefix: "cdc/app", Region: "eu-west-1",
		Endpoint: "http://127.0.0.1:7070", ForcePathStyle: true, RequestTimeout: 5 * time.Second}
	if c.Storage != want || c.AWS.MaxRetries != 7 {
		t.Fatalf("got %+v %+v", c.Storage, c.AWS)
	}
	for _, v := range []string{"yes", "1", `"true"`, "~"} {
		_, err := Parse([]byte("source:\n  postgres:\n    url: postgresql://u@h/db\nstorage:\n  force_path_style: "+v+"\n"), "f.yml", nil)
		if err == nil || !strings.Contains(err.Error(), "f.yml:5: storage.force_path_style: want true or false") {
			t.Errorf("force_path_style: %s: got %v", v, err)
		}
	}
}

// TestCatalogConfig: rest needs an http(s) URL, glue takes none and a
// namespace Glue can hold; catalog.type glue points to catalog.iceberg.type;
// merge-on-read is refused by key until built; REST, Glue and IO secrets
// never print; every sink publishes, but Glue not a GCS sink.
func TestCatalogConfig(t *testing.T) {
	base := "source:\n  postgres:\n    url: postgres://u@h/db\ncatalog:\n  type: iceberg\n  iceberg:\n"
	for _, c := range []struct{ yaml, want string }{
		{"    type: rest\n", "catalog.iceberg.uri"},
		{"    type: rest\n    uri: ftp://x\n", "catalog.iceberg.uri"},
		{"    type: glue\n    uri: https://glue.eu-west-1.amazonaws.com\n", "catalog.iceberg.uri"},
		{"    type: glue\n    namespace: PgCdc\n", "catalog.iceberg.namespace"},
		{"    type: glue\n    namespace: cdc__x\n", "catalog.iceberg.namespace"},
		{"    type: hive\n", "catalog.iceberg.type"},
		{"    mode: merge-on-read\n", "catalog.iceberg.mode"},
		{"    commit_interval: -1s\n", "catalog.iceberg.commit_interval"},
		{"    type: rest\n    uri: http://127.0.0.1:8181\n    properties:\n      uri: x\n", "catalog.iceberg.properties"},
	} {
		_, err := Parse([]byte(base+c.yaml), "t.yml", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %s", c.yaml, err, c.want)
		}
	}
	cfg, err := Parse([]byte(base+"    type: rest\n    uri: https://cat.example/api\n    properties:\n      token: s3cr3t-tok\n      header.X-Key: s3cr3t-hdr\n      warehouse: wh\n"), "t.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := fmt.Sprintf("%+v", cfg.Redacted())
	if strings.Contains(r, "s3cr3t") || !strings.Contains(r, "warehouse:wh") {
		t.Errorf("redacted: %s", r)
	}
	if cfg.Catalog.Iceberg.Properties["token"] != "s3cr3t-tok" {
		t.Errorf("Redacted changed the configuration it was called on")
	}

	_, err = Parse([]byte("source:\n  postgres:\n    url: postgres://u@h/db\ncatalog:\n  type: glue\n"), "t.yml", nil)
	if err == nil || !strings.Contains(err.Error(), "catalog.type") || !strings.Contains(err.Error(), "catalog.iceberg.type: glue") {
		t.Errorf("catalog.type glue: %v, want an error pointing to catalog.iceberg.type glue", err)
	}
	cfg, err = Parse([]byte(base+"    type: glue\n    properties:\n      glue.region: eu-west-1\n      glue.access-key-id: AKIDEXAMPLE\n      glue.secret-access-key: s3cr3t-key\n      glue.session-token: s3cr3t-session\n"), "t.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	r = fmt.Sprintf("%+v", cfg.Redacted())
	if strings.Contains(r, "s3cr3t") || !strings.Contains(r, "glue.region:eu-west-1") || !strings.Contains(r, "glue.access-key-id:AKIDEXAMPLE") {
		t.Errorf("redacted: %s", r)
	}
	if s := cfg.Secrets(func(string) (string, bool) { return "", false }); !slices.Contains(s, "s3cr3t-key") || !slices.Contains(s, "s3cr3t-session") {
		t.Errorf("secrets scrubbed from logs: %q", s)
	}
	if cfg.Storage.Type != "" && cfg.Storage.Type != "filesystem" {
		t.Errorf("storage %q", cfg.Storage.Type)
	}
	// Object-store sinks publish (s3:// and gs:// locations); Glue over a
	// GCS sink is refused, by name.
	for _, sink := range []string{"storage:\n  type: s3\n  bucket: b\n  region: eu-west-1\n", "storage:\n  type: gcs\n  bucket: b\n"} {
		for _, kind := range []string{"    type: sql\n", "    type: rest\n    uri: https://cat.example/api\n", "    type: glue\n"} {
			_, err = Parse([]byte(base+kind+sink), "t.yml", nil)
			if refused := strings.Contains(sink, "gcs") && strings.Contains(kind, "glue"); refused != (err != nil) ||
				refused && !strings.Contains(err.Error(), "storage.type") {
				t.Errorf("%q over %q: %v (refused: %v)", kind, sink, err, refused)
			}
		}
	}
	cfg, err = Parse([]byte(base+"    properties:\n      s3.access-key-id: AKIDEXAMPLE\n      s3.secret-access-key: s3cr3t-key\nstorage:\n  type: s3\n  bucket: b\n"), "t.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := fmt.Sprintf("%+v", cfg.Redacted()); strings.Contains(r, "s3cr3t") {
		t.Errorf("redacted: %s", r)
	}
}
