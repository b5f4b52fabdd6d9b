package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEveryMistakeAtOnce: a file with mistakes of every kind reports all of
// them in one error, in file order, each with its line, key and value; the
// overrides' come next, by variable, then the defaults'.
func TestEveryMistakeAtOnce(t *testing.T) {
	file := `source:
  postgres:
    url: "postgresql://app:s3cr3t@db:port/app"
    schemas: [public, public]
tables:
  include: [public.orders, orders]
flush:
  interval_sec: ten
  max_rows: -1
  intervall_sec: 5
storage:
  type: ftp
compaction:
  tombstone_ttl: 30 days
log:
  level: loud
`
	_, err := Parse([]byte(file), "pg-cdc.yml", []string{"PGCDC_FLUSH_DRAIN_TIMEOUT_SEC=0", "PGCDC_STATE_PATH="})
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	want := strings.Join([]string{
		`pg-cdc.yml:3: source.postgres.url: not a valid URL: check the host and port, and percent-encode / ? # @ : in the user name and password`,
		`pg-cdc.yml:4: source.postgres.schemas[1]: "public" is listed twice`,
		`pg-cdc.yml:6: tables.include[1]: table "orders": want a schema-qualified name such as public.orders`,
		`pg-cdc.yml:8: flush.interval_sec: want an integer, got string "ten"`, // wrong type
		`pg-cdc.yml:9: flush.max_rows: must be > 0, got -1`,                   // out of range
		`pg-cdc.yml:10: unknown key "flush.intervall_sec" (did you mean "flush.interval_sec"?)`,
		`pg-cdc.yml:12: storage.type: unknown sink type "ftp"; want "filesystem", "s3" or "gcs"`, // bad enum value
		`pg-cdc.yml:14: compaction.tombstone_ttl: want a duration such as "90s", "15m" or "720h", got "30 days"`,
		`pg-cdc.yml:16: log.level: want debug, info, warn or error, got "loud"`,
		`environment variable PGCDC_FLUSH_DRAIN_TIMEOUT_SEC (flush.drain_timeout_sec): must be > 0, got 0`,
		`environment variable PGCDC_STATE_PATH (state.path): required, got ""`,
	}, "\n")
	if err.Error() != want {
		t.Fatalf("got\n%s\nwant\n%s", err, want)
	}
	if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "db:port") {
		t.Fatalf("the error quotes the URL:\n%s", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Key != "source.postgres.url" || fe.Value != "" {
		t.Fatalf("errors.As: got %+v, want the URL's FieldError, with no value", fe)
	}
}

// TestValidationErrorPlaces: a refused value is placed where it was set: at
// its line (a list item or a types entry at its own), at the variable that
// overrode the file, or nowhere when it is a default.
func TestValidationErrorPlaces(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  []string
		want string // the whole error
	}{
		{"key line", minimal + "flush:\n  parallel_workers: 0\n", nil,
			"f.yml:5: flush.parallel_workers: must be > 0, got 0"},
		{"list item line", minimal + "tables:\n  exclude:\n    - public.a\n    - orders\n", nil,
			`f.yml:7: tables.exclude[1]: "orders" matches no table: write the schema-qualified name, e.g. public.orders`},
		{"types entry line", minimal + "types:\n  public.t.a: string\n  public.t: string\n", nil,
			`f.yml:6: types: "public.t": want schema.table.column, such as public.orders.id`},
		{"types value line", minimal + "types:\n  public.t.a: string\n  public.t.b: uuid\n", nil,
			`f.yml:6: types.public.t.b: unknown representation "uuid"; want one of string`},
		{"duration value", minimal + "retry:\n  initial_backoff: 2s\n  max_backoff: 1s\n", nil,
			"f.yml:6: retry.max_backoff: must be at least retry.initial_backoff (2s), got 1s"},
		{"flow mapping", minimal + "log: {level: debug, format: yaml}\n", nil,
			`f.yml:4: log.format: want text or json, got "yaml"`},
		{"env over the file", minimal + "flush:\n  max_rows: 5\n", []string{"PGCDC_FLUSH_MAX_ROWS=0"},
			"environment variable PGCDC_FLUSH_MAX_ROWS (flush.max_rows): must be > 0, got 0"},
		{"env list item", minimal + "tables:\n  include: [public.a]\n", []string{"PGCDC_TABLES_INCLUDE=public.a,b"},
			`environment variable PGCDC_TABLES_INCLUDE (tables.include[1]): table "b": want a schema-qualified name such as public.orders`},
		{"env seconds", minimal, []string{"PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC=-1"},
			"environment variable PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC (schema.reconcile_interval_sec): must be 0 (off) or positive, got -1"},
		{"default has no line", minimal + "storage:\n  type: s3\n", nil,
			"storage.bucket: required for the s3 sink, got \"\""},
		{"url never shown", "source:\n  postgres:\n    url: mysql://u:s3cr3t@h/db\n", nil,
			`f.yml:3: source.postgres.url: want a postgres:// or postgresql:// URL, got scheme "mysql"`},
		{"url from env never shown", "", []string{"PGCDC_SOURCE_POSTGRES_URL=postgresql://u:s3cr3t#@h/db"},
			`environment variable PGCDC_SOURCE_POSTGRES_URL (source.postgres.url): contains "#": percent-encode it as %23 (most likely in the password)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "f.yml", tc.env)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if err.Error() != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

// TestNoValidationOfAFailedKey: a key whose value did not decode keeps its
// default, which is not judged again, nor by the checks that read it.
func TestNoValidationOfAFailedKey(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  []string
		want string
	}{
		// Without the rule, the URL would also be "required".
		{"unset variable", "source:\n  postgres:\n    url: postgresql://u:${PW}@h/db\n", nil,
			"f.yml:3: source.postgres.url: environment variable PW is not set"},
		{"bad override", minimal + "flush:\n  max_rows: 0\n", []string{"PGCDC_FLUSH_MAX_ROWS=ten"},
			`environment variable PGCDC_FLUSH_MAX_ROWS (flush.max_rows): want an integer, got "ten"`},
		// The default schemas would refuse the sales table.
		{"a check that reads it", "source:\n  postgres:\n    url: postgresql://h/db\n    schemas: [public, ~]\ntables:\n  include: [sales.a]\n", nil,
			"f.yml:4: source.postgres.schemas[1]: want a string, got no value (remove the key to keep its default)"},
		{"sink type", minimal + "storage:\n  type: [s3]\n  path: \"\"\n", nil,
			"f.yml:5: storage.type: want a string, got a list"},
		{"not a mapping", "- a\n", nil,
			"f.yml:1: want a mapping of keys at the top level, got a list"},
		{"syntax error", "log: [\n", nil,
			"f.yml:1: did not find expected node content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "f.yml", tc.env)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
	// A file value that failed but an override that parsed: the override is
	// judged, at its variable.
	_, err := Parse([]byte(minimal+"flush:\n  max_rows: ten\n"), "f.yml", []string{"PGCDC_FLUSH_MAX_ROWS=0"})
	want := "f.yml:5: flush.max_rows: want an integer, got string \"ten\"\n" +
		"environment variable PGCDC_FLUSH_MAX_ROWS (flush.max_rows): must be > 0, got 0"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestValidateNamesKeyAndValue: Validate on its own (no file) names each
// key and, but for the URL, the value it refuses.
func TestValidateNamesKeyAndValue(t *testing.T) {
	c := valid()
	c.Source.Postgres.URL = "mysql://u:s3cr3t@h/db"
	c.Source.Postgres.Region = "eu-west-1"
	c.Source.Postgres.Provider = "gcp"
	c.Source.Postgres.Schemas = []string{"public", ""}
	c.Tables.Include = []string{"x"}
	c.Tables.Exclude = []string{"orders"}
	c.Types = map[string]string{"a": "string", "public.t.c": "uuid"}
	c.Replication.Slot = "S"
	c.Replication.StandbyInterval = 0
	c.Replication.HeartbeatInterval = 1500 * time.Millisecond
	c.Init.ParallelWorkers = -2
	c.Storage.Type, c.Storage.Prefix, c.Storage.Region, c.Storage.ForcePathStyle = "gcs", "/p", "eu", true
	c.Storage.RequestTimeout = -time.Second
	c.AWS.MaxRetries = 101
	c.Flush.MaxBytes = 0
	c.Retry.InitialBackoff = 0
	c.State.Path = ""
	c.Compaction.Interval = -time.Minute
	c.GC.GracePeriod = 0
	c.History.Retention = -time.Hour
	c.Metrics.Listen = "9090"
	c.Guardrail.MaxRetainedWALBytes = -1
	c.Schema.ReconcileInterval = -time.Second
	c.Backfill.ChunkRows = 0
	c.Log.Format = "xml"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate succeeded")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("the error shows the password: %v", err)
	}
	var fes []*FieldError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		fes = append(fes, fe)
	}
	if len(fes) < 24 {
		t.Fatalf("%d problems, want every one:\n%v", len(fes), err)
	}
	for _, fe := range fes {
		if !strings.HasPrefix(fe.Error(), fe.Key+": ") {
			t.Errorf("%q does not start with its key %s", fe, fe.Key)
		}
		switch {
		case fe.Key == "source.postgres.url":
			if fe.Value != "" {
				t.Errorf("the URL's error holds a value: %q", fe.Value)
			}
		case fe.Value == "" || !strings.Contains(fe.Problem, fe.Value):
			t.Errorf("%q does not name its value %q", fe, fe.Value)
		}
	}
	for _, want := range []string{
		"replication.heartbeat_interval_sec: want a whole number of seconds, got 1.5s",
		"storage.request_timeout_sec: must be > 0, got -1",
		"schema.reconcile_interval_sec: must be 0 (off) or positive, got -1",
		"history.retention: must be > 0, got -1h0m0s",
		`source.postgres.schemas[1]: must not be empty, got ""`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// secondsKeys are the *_sec keys, each with its field.
var secondsKeys = []struct {
	key   string
	field func(*Config) *time.Duration
}{
	{"replication.standby_interval_sec", func(c *Config) *time.Duration { return &c.Replication.StandbyInterval }},
	{"replication.heartbeat_interval_sec", func(c *Config) *time.Duration { return &c.Replication.HeartbeatInterval }},
	{"replication.receive_timeout_sec", func(c *Config) *time.Duration { return &c.Replication.ReceiveTimeout }},
	{"storage.request_timeout_sec", func(c *Config) *time.Duration { return &c.Storage.RequestTimeout }},
	{"flush.interval_sec", func(c *Config) *time.Duration { return &c.Flush.Interval }},
	{"flush.drain_timeout_sec", func(c *Config) *time.Duration { return &c.Flush.DrainTimeout }},
	{"flush.cas_breaker_window_sec", func(c *Config) *time.Duration { return &c.Flush.CASBreakerWindow }},
	{"schema.reconcile_interval_sec", func(c *Config) *time.Duration { return &c.Schema.ReconcileInterval }},
	{"backfill.discover_interval_sec", func(c *Config) *time.Duration { return &c.Backfill.DiscoverInterval }},
}

// TestSecondsKeys: each *_sec key reads an integer number of seconds, from
// the file and from its variable, into its time.Duration field.
func TestSecondsKeys(t *testing.T) {
	var c Config
	n := 0
	for _, l := range leaves(&c) {
		if _, ok := l.target.(seconds); ok {
			n++
		}
	}
	if n != len(secondsKeys) {
		t.Fatalf("%d seconds keys in leaves, %d in the test", n, len(secondsKeys))
	}
	for i, k := range secondsKeys {
		t.Run(k.key, func(t *testing.T) {
			want := time.Duration(i+2) * time.Second
			section, name, _ := strings.Cut(k.key, ".")
			file := fmt.Sprintf("%s%s:\n  %s: %d\n", minimal, section, name, i+2)
			if section == "storage" {
				file = strings.Replace(file, "storage:\n", "storage:\n  type: s3\n  bucket: b\n", 1)
			}
			c, err := Parse([]byte(file), "f.yml", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := *k.field(&c); got != want {
				t.Errorf("file: %s = %v, want %v", k.key, got, want)
			}
			env := "PGCDC_" + strings.ToUpper(strings.ReplaceAll(k.key, ".", "_"))
			c, err = Parse([]byte(minimal), "f.yml", []string{fmt.Sprintf("%s= %d ", env, i+20)})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := *k.field(&c), time.Duration(i+20)*time.Second; got != want {
				t.Errorf("%s: %s = %v, want %v", env, k.key, got, want)
			}
			if d := Default(); *k.field(&d) < 0 || *k.field(&d)%time.Second != 0 {
				t.Errorf("default %v is not whole seconds", *k.field(&d))
			}
		})
	}
}

// TestPrintSecondsRoundTrip: config print writes the *_sec keys as integer
// seconds, and they read back to the same durations.
func TestPrintSecondsRoundTrip(t *testing.T) {
	c := valid()
	for i, k := range secondsKeys {
		*k.field(&c) = time.Duration(3600*i+7) * time.Second
	}
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range secondsKeys {
		_, name, _ := strings.Cut(k.key, ".")
		if line := fmt.Sprintf("\n  %s: %d\n", name, 3600*i+7); !strings.Contains(string(y), line) {
			t.Errorf("printed configuration lacks %q:\n%s", line, y)
		}
	}
	back, err := Parse(y, "printed.yml", nil)
	if err != nil {
		t.Fatalf("printed configuration does not parse: %v\n%s", err, y)
	}
	for _, k := range secondsKeys {
		if got, want := *k.field(&back), *k.field(&c); got != want {
			t.Errorf("%s: %v after the round trip, want %v", k.key, got, want)
		}
	}
	if !reflect.DeepEqual(back.Settings(), c.Settings()) {
		t.Fatalf("round trip changed the settings:\n got %+v\nwant %+v", back.Settings(), c.Settings())
	}
	for _, s := range c.Settings() {
		if s.Key == "flush.interval_sec" && s.Value != 3600*4+7 {
			t.Errorf("Settings gives %s = %#v, want the int %d", s.Key, s.Value, 3600*4+7)
		}
	}
}
