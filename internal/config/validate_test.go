package config

import (
	"strings"
	"testing"
	"time"
)

func valid() Config {
	c := Default()
	c.Source.Postgres.URL = "postgresql://app:pw@127.0.0.1:5432/app"
	return c
}

func TestValidateOK(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
	}{
		{"defaults plus url", func(*Config) {}},
		{"postgres scheme", func(c *Config) { c.Source.Postgres.URL = "postgres://h/db" }},
		{"unix socket", func(c *Config) { c.Source.Postgres.URL = "postgresql:///db?host=/var/run/postgresql" }},
		{"multi-host", func(c *Config) {
			c.Source.Postgres.URL = "postgresql://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write"
		}},
		{"include", func(c *Config) { c.Tables.Include = []string{"public.orders"} }},
		{"exclude glob", func(c *Config) { c.Tables.Exclude = []string{"public.tmp_*", "*_old", "public.exact"} }},
		{"slot starting with digit", func(c *Config) { c.Replication.Slot = "1slot" }},
		{"63-byte slot", func(c *Config) { c.Replication.Slot = strings.Repeat("s", 63) }},
		{"every level", func(c *Config) { c.Log.Level = "warn"; c.Log.Format = "json" }},
		{"audit sql hash", func(c *Config) { c.Serve.AuditSQL = "hash" }},
		{"unauthenticated rate limit off", func(c *Config) { c.Serve.UnauthRateLimit = 0 }},
		{"provider rds", func(c *Config) { c.Source.Postgres.Provider = "rds" }},
		{"provider aurora", func(c *Config) { c.Source.Postgres.Provider = "aurora" }},
		{"provider self-managed", func(c *Config) { c.Source.Postgres.Provider = "self-managed" }},
		{"odd schema names", func(c *Config) {
			c.Source.Postgres.Schemas = []string{"public", "Sales", "sales", "a.b", "x y", `we"ird`, `back\slash`, "a/b", "..", "日本😀", strings.Repeat("é", 31) + "x"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"url scheme", func(c *Config) { c.Source.Postgres.URL = "mysql://h/db" }, `source.postgres.url: want a postgres:// or postgresql:// URL, got scheme "mysql"`},
		{"url keyword form", func(c *Config) { c.Source.Postgres.URL = "host=h dbname=db" }, "source.postgres.url: want a postgres://"},
		{"url bad port", func(c *Config) { c.Source.Postgres.URL = "postgresql://u:pw@h:port/db" }, "source.postgres.url: not a valid URL"},
		{"url bad escape", func(c *Config) { c.Source.Postgres.URL = "postgresql://u:p%zzw@h/db" }, "source.postgres.url: not a valid URL: a bad %-escape"},
		{"url hash", func(c *Config) { c.Source.Postgres.URL = "postgresql://u:p#w@h/db" }, `source.postgres.url: contains "#"`},
		{"url sslmode", func(c *Config) { c.Source.Postgres.URL = "postgresql://u:pw@h/db?sslmode=bogus" }, `source.postgres.url: sslmode=bogus: want one of disable, allow, prefer, require, verify-ca, verify-full`},
		{"schemas empty", func(c *Config) { c.Source.Postgres.Schemas = nil }, "source.postgres.schemas: must name at least one schema"},
		{"request timeout zero", func(c *Config) { c.Storage.RequestTimeout = 0 }, "storage.request_timeout_sec: must be > 0, got 0"},
		{"retry backoff zero", func(c *Config) { c.Retry.InitialBackoff = 0 }, "retry.initial_backoff: must be > 0, got 0s"},
		{"retry max below initial", func(c *Config) { c.Retry.MaxBackoff = 500 * time.Millisecond }, "retry.max_backoff: must be at least retry.initial_backoff (1s), got 500ms"},
		{"retry attempts zero", func(c *Config) { c.Retry.MaxAttempts = 0 }, "retry.max_attempts: must be > 0, got 0"},
		{"provider unknown", func(c *Config) { c.Source.Postgres.Provider = "RDS" }, `source.postgres.provider: want auto, self-managed, rds or aurora, got "RDS"`},
		{"provider empty", func(c *Config) { c.Source.Postgres.Provider = "" }, `source.postgres.provider: want auto`},
		{"schema empty string", func(c *Config) { c.Source.Postgres.Schemas = []string{""} }, "source.postgres.schemas[0]: must not be empty"},
		{"schema twice", func(c *Config) { c.Source.Postgres.Schemas = []string{"a", "a"} }, `source.postgres.schemas[1]: "a" is listed twice`},
		{"schema too long", func(c *Config) { c.Source.Postgres.Schemas = []string{strings.Repeat("s", 64)} }, "source.postgres.schemas[0]: " + `"` + strings.Repeat("s", 64) + `" is 64 bytes long; PostgreSQL names are at most 63 bytes`},
		{"schema with NUL", func(c *Config) { c.Source.Postgres.Schemas = []string{"a\x00b"} }, `source.postgres.schemas[0]: "a\x00b" contains a NUL byte`},
		{"include unqualified", func(c *Config) { c.Tables.Include = []string{"public.a", "orders"} }, "tables.include[1]: table \"orders\": want a schema-qualified name"},
		{"include twice", func(c *Config) { c.Tables.Include = []string{"public.a", "public.a"} }, `tables.include[1]: "public.a" is listed twice`},
		{"include other schema", func(c *Config) { c.Tables.Include = []string{"sales.a"} }, `tables.include[0]: schema "sales" of "sales.a" is not in source.postgres.schemas`},
		{"exclude bad glob", func(c *Config) { c.Tables.Exclude = []string{"public.[a"} }, `tables.exclude[0]: invalid pattern "public.[a"`},
		{"exclude bad glob late", func(c *Config) { c.Tables.Exclude = []string{"x.y[", "public.ok"} }, `tables.exclude[0]: invalid pattern`},
		{"exclude unqualified", func(c *Config) { c.Tables.Exclude = []string{"orders"} }, `tables.exclude[0]: "orders" matches no table`},
		{"publication upper", func(c *Config) { c.Replication.Publication = "MyPub" }, `replication.publication: "MyPub"`},
		{"publication digit first", func(c *Config) { c.Replication.Publication = "1pub" }, `replication.publication: "1pub"`},
		{"publication empty", func(c *Config) { c.Replication.Publication = "" }, `replication.publication: "" must be 1 to 63 characters`},
		{"slot dash", func(c *Config) { c.Replication.Slot = "my-slot" }, `replication.slot: "my-slot": replication slot names may contain only`},
		{"slot upper", func(c *Config) { c.Replication.Slot = "Slot" }, `replication.slot: "Slot"`},
		{"slot too long", func(c *Config) { c.Replication.Slot = strings.Repeat("s", 64) }, `replication.slot:`},
		{"standby zero", func(c *Config) { c.Replication.StandbyInterval = 0 }, "replication.standby_interval_sec: must be > 0, got 0"},
		{"budget negative", func(c *Config) { c.Replication.MemoryBudgetBytes = -1 }, "replication.memory_budget_bytes: must be > 0, got -1"},
		{"init workers", func(c *Config) { c.Init.ParallelWorkers = 0 }, "init.parallel_workers: must be > 0"},
		{"flush interval", func(c *Config) { c.Flush.Interval = -5 * time.Second }, "flush.interval_sec: must be > 0, got -5"},
		// The overflow check ("4611686018427387904 seconds is too long")
		// moved to the parser, since a time.Duration cannot hold the value:
		// see TestParseErrors and TestEnvErrors.
		{"flush interval fraction", func(c *Config) { c.Flush.Interval = 1500 * time.Millisecond }, "flush.interval_sec: want a whole number of seconds, got 1.5s"},
		{"heartbeat negative", func(c *Config) { c.Replication.HeartbeatInterval = -time.Second }, "replication.heartbeat_interval_sec: must be 0 (off) or positive, got -1"},
		{"receive timeout zero", func(c *Config) { c.Replication.ReceiveTimeout = 0 }, "replication.receive_timeout_sec: must be > 0, got 0"},
		{"reconcile negative", func(c *Config) { c.Schema.ReconcileInterval = -2 * time.Second }, "schema.reconcile_interval_sec: must be 0 (off) or positive, got -2"},
		{"discover negative", func(c *Config) { c.Backfill.DiscoverInterval = -3 * time.Second }, "backfill.discover_interval_sec: must be 0 (off) or positive, got -3"},
		{"gcs force path style", func(c *Config) { c.Storage.Type, c.Storage.Bucket, c.Storage.ForcePathStyle = "gcs", "b", true }, `storage.force_path_style: region and force_path_style apply to s3 only, got true`},
		{"flush rows", func(c *Config) { c.Flush.MaxRows = 0 }, "flush.max_rows: must be > 0"},
		{"flush bytes", func(c *Config) { c.Flush.MaxBytes = 0 }, "flush.max_bytes: must be > 0"},
		{"drain", func(c *Config) { c.Flush.DrainTimeout = 0 }, "flush.drain_timeout_sec: must be > 0"},
		{"flush workers", func(c *Config) { c.Flush.ParallelWorkers = 0 }, "flush.parallel_workers: must be > 0"},
		{"breaker threshold", func(c *Config) { c.Flush.CASBreakerThreshold = 0 }, "flush.cas_breaker_threshold: must be > 0"},
		{"breaker window", func(c *Config) { c.Flush.CASBreakerWindow = 0 }, "flush.cas_breaker_window_sec: must be > 0"},
		{"storage s3", func(c *Config) { c.Storage.Type = "s3" }, `storage.bucket: required for the s3 sink`},
		{"storage gcs", func(c *Config) { c.Storage.Type = "gcs" }, `storage.bucket: required for the gcs sink`},
		{"storage prefix", func(c *Config) { c.Storage.Type, c.Storage.Bucket, c.Storage.Prefix = "s3", "b", "a/../b" }, `storage.prefix: want a relative key prefix`},
		{"storage prefix slash", func(c *Config) { c.Storage.Type, c.Storage.Bucket, c.Storage.Prefix = "gcs", "b", "/a" }, `storage.prefix: want a relative key prefix`},
		{"gcs region", func(c *Config) { c.Storage.Type, c.Storage.Bucket, c.Storage.Region = "gcs", "b", "eu" }, `storage.region: region and force_path_style apply to s3 only`},
		{"s3 credentials file", func(c *Config) { c.Storage.Type, c.Storage.Bucket, c.Storage.CredentialsFile = "s3", "b", "k.json" }, `storage.credentials_file: applies to gcs only`},
		{"aws retries", func(c *Config) { c.AWS.MaxRetries = -1 }, `aws.max_retries: want 0 to 100, got -1`},
		{"storage unknown", func(c *Config) { c.Storage.Type = "ftp" }, `storage.type: unknown sink type "ftp"`},
		{"storage path", func(c *Config) { c.Storage.Path = "" }, "storage.path: required"},
		{"state path", func(c *Config) { c.State.Path = "" }, "state.path: required"},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, `log.level: want debug, info, warn or error, got "trace"`},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, `log.format: want text or json, got "xml"`},
		{"serve audit sql", func(c *Config) { c.Serve.AuditSQL = "none" }, `serve.audit_sql: want "full"`},
		{"serve unauthenticated rate", func(c *Config) { c.Serve.UnauthRateLimit = -1 }, "serve.unauthenticated_rate_limit: must be 0 (off) or positive"},
		{"serve unauthenticated burst", func(c *Config) { c.Serve.UnauthRateBurst = -1 }, "serve.unauthenticated_rate_burst: must be > 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateNeverPrintsThePassword(t *testing.T) {
	for _, u := range []string{
		"postgresql://u:s3cr3t@h:port/db",
		"postgresql://u:s3cr3t%zz@h/db",
		"postgresql://u:s3cr3t#x@h/db",
		"mysql://u:s3cr3t@h/db",
		"postgresql://u:s3cr3t@h\x7f/db",
		"postgresql://u:s3cr3t@[::1/db",
		"postgresql://u:s3cr3t@h%zz/db",
		"postgresql://u:s3/cr3t@h/db",
		"postgresql://u:s3cr3t?x@h/db",
		"postgresql://u:s3cr3t]@h/db",
	} {
		c := valid()
		c.Source.Postgres.URL = u
		err := c.Validate()
		if err == nil {
			t.Errorf("%q: Validate succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error leaks the password: %v", u, err)
		}
	}
}

func TestValidateReportsAll(t *testing.T) {
	c := valid()
	c.Flush.MaxRows = 0
	c.Log.Level = "loud"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "flush.max_rows") || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("got %v, want both problems", err)
	}
}

// TestRequireSource: a configuration without a source URL is valid (the
// read path's commands need only the sink), and RequireSource is the
// error of the commands that read the source, naming the key.
func TestRequireSource(t *testing.T) {
	c := valid()
	c.Source.Postgres.URL = ""
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate without a source URL: %v", err)
	}
	if err := c.RequireSource(); err == nil || !strings.HasPrefix(err.Error(), "source.postgres.url: required") {
		t.Errorf("RequireSource = %v", err)
	}
	if err := valid().RequireSource(); err != nil {
		t.Errorf("RequireSource with a URL = %v", err)
	}
}

// One trailing slash of storage.prefix, as typed after an s3:// URL, is
// dropped; any other stray slash is still refused.
func TestPrefixTrailingSlash(t *testing.T) {
	for _, c := range []struct{ prefix, want, err string }{
		{"cdc/app/", "cdc/app", ""},
		{"cdc/app", "cdc/app", ""},
		{"cdc/app//", "", "storage.prefix: want a relative key prefix"},
		{"/cdc/app/", "", "storage.prefix: want a relative key prefix"},
		{"cdc//app", "", "storage.prefix: want a relative key prefix"},
	} {
		cfg, err := Parse([]byte("storage:\n  type: s3\n  bucket: b\n  region: eu-west-1\n  prefix: \""+c.prefix+"\"\n"), "f.yml", nil)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("prefix %q: %v", c.prefix, err)
		case c.err == "" && cfg.Storage.Prefix != c.want:
			t.Errorf("prefix %q read as %q, want %q", c.prefix, cfg.Storage.Prefix, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("prefix %q: %v, want %q", c.prefix, err, c.err)
		}
	}
}
