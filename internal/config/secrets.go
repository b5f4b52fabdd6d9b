package config

import (
	"net/url"
	"strings"
	"time"
)

// SecretEnv are the environment variables whose values are secrets
// wherever they appear: libpq's password, the AWS secret key and session
// token (the S3 sink and RDS IAM tokens read them).
var SecretEnv = []string{"PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}

// Secrets are the secret values c and the environment (lookup) know, for a
// scrubber to remove from every log line and message: the source URL's
// password (as loaded, and as its ${VAR} references resolve now), its
// password= and sslpassword= parameters, storage.endpoint's password, the
// catalog's secret properties (a credential's client secret on its own
// too) and the values of SecretEnv. Empty strings may be among them.
func (c Config) Secrets(lookup func(string) (string, bool)) []string {
	var secrets []string
	urls := []string{c.Source.Postgres.URL, c.Storage.Endpoint}
	if u, err := c.Source.Postgres.ResolveURL(lookup); err == nil {
		urls = append(urls, u)
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || raw == "" {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
		q := u.Query()
		secrets = append(secrets, q.Get("password"), q.Get("sslpassword"))
	}
	for _, name := range SecretEnv {
		v, _ := lookup(name)
		secrets = append(secrets, v)
	}
	for k, v := range c.Catalog.Iceberg.Properties {
		if SecretCatalogProperty(k) {
			secrets = append(secrets, v)
			if _, secret, ok := strings.Cut(v, ":"); ok && k == "credential" {
				secrets = append(secrets, secret) // client_id:client_secret
			}
		}
	}
	return secrets
}

// Name names the sink for messages: the directory, or the object store's
// URL (s3://bucket/prefix, gs://bucket/prefix).
func (s StorageConfig) Name() string {
	scheme := map[string]string{StorageS3: "s3", StorageGCS: "gs"}[s.Type]
	if scheme == "" {
		return s.Path
	}
	u := scheme + "://" + s.Bucket
	if s.Prefix != "" {
		u += "/" + s.Prefix
	}
	return u
}

// RunSettings is the redacted configuration as run.json records it: key to
// value, durations in their configuration form, strings passed through
// scrub.
func (c Config) RunSettings(scrub func(string) string) map[string]any {
	all := c.Redacted().Settings()
	out := make(map[string]any, len(all))
	for _, s := range all {
		switch v := s.Value.(type) {
		case time.Duration:
			out[s.Key] = FormatDuration(v)
		case string:
			out[s.Key] = scrub(v)
		default:
			out[s.Key] = v
		}
	}
	return out
}
