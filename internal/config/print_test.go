package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestYAMLRoundTrip: what `pg-cdc config print` writes is a configuration
// file that reads back to the same values, "$" in a value included.
func TestYAMLRoundTrip(t *testing.T) {
	c, err := Parse([]byte(full), "pg-cdc.yml", []string{"PGPASSWORD=s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	c.State.Path = "/var/tmp/$pgcdc"
	c.Tables.Exclude = []string{"public.t$mp_*"}
	c.Metrics.LivenessTimeout = 90 * time.Second
	for _, cfg := range []Config{c, c.Redacted()} {
		y, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(y, "printed.yml", nil)
		if err != nil {
			t.Fatalf("printed configuration does not parse: %v\n%s", err, y)
		}
		if !reflect.DeepEqual(back.Settings(), cfg.Settings()) {
			t.Fatalf("round trip changed the configuration:\n got %+v\nwant %+v\n%s", back.Settings(), cfg.Settings(), y)
		}
	}
	y, err := c.Redacted().YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"source:\n  postgres:\n    url: \"postgresql://user:xxxxx@127.0.0.1:5432/app\"\n",
		"    schemas: [\"public\", \"sales\"]\n",
		"  interval: \"15m\"\n", "  tombstone_ttl: \"48h\"\n", "  liveness_timeout: \"1m30s\"\n",
		"  path: \"/var/tmp/$$pgcdc\"\n",
		"  max_rows: 500\n", "  accept_single_writer_risk: false\n",
		"types: {\"public.orders.id_uuid\": \"string\"}\n",
	} {
		if !strings.Contains(string(y), want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(string(y), "s3cr3t") {
		t.Errorf("the redacted configuration shows the password:\n%s", y)
	}
}

// TestSettingsCoverEveryKey: Settings lists each key once, in leaves order.
func TestSettingsCoverEveryKey(t *testing.T) {
	c := Default()
	s := c.Settings()
	ls := leaves(&c)
	if len(s) != len(ls) {
		t.Fatalf("%d settings for %d keys", len(s), len(ls))
	}
	for i := range s {
		if s[i].Key != ls[i].path {
			t.Errorf("setting %d is %s, want %s", i, s[i].Key, ls[i].path)
		}
	}
	s[2].Value.([]string)[0] = "changed"
	if c.Source.Postgres.Schemas[0] != "public" {
		t.Error("Settings shares a slice with the configuration")
	}
}

func TestRedactedKeyPassphraseAndEndpoint(t *testing.T) {
	c := Default()
	c.Source.Postgres.URL = "postgresql://u@h/app?sslmode=verify-full&sslkey=/k&sslpassword=keyphrase"
	c.Storage.Endpoint = "https://minio:miniosecret@minio.internal:9000"
	r := c.Redacted()
	if strings.Contains(r.Source.Postgres.URL, "keyphrase") || !strings.Contains(r.Source.Postgres.URL, "sslpassword=xxxxx") {
		t.Errorf("sslpassword: %s", r.Source.Postgres.URL)
	}
	if r.Storage.Endpoint != "https://minio:xxxxx@minio.internal:9000" {
		t.Errorf("endpoint: %s", r.Storage.Endpoint)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Second: "1s", 250 * time.Millisecond: "250ms", 15 * time.Minute: "15m",
		720 * time.Hour: "720h", 90 * time.Minute: "1h30m", time.Hour + time.Second: "1h0m1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("FormatDuration(%s) does not read back: %v %v", d, back, err)
		}
	}
}
