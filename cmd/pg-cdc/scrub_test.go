package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/config"
)

// TestScrubberKnowsTheSecrets: the source password, as loaded and as its
// ${VAR} resolves now, the key passphrase, the endpoint's password and the
// AWS secrets from the environment are all scrubbed.
func TestScrubberKnowsTheSecrets(t *testing.T) {
	t.Setenv("TEST_SOURCE_PW", "rotated-password-2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG")
	t.Setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE")
	yml := `source:
  postgres:
    url: "postgres://app:${TEST_SOURCE_PW}@db/app?sslkey=/k&sslpassword=key-passphrase"
storage:
  type: s3
  bucket: b
  endpoint: "https://minio:minio-secret-9@minio:9000"
`
	cfg, err := config.Parse([]byte(yml), "x.yml", []string{"TEST_SOURCE_PW=loaded-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	s := scrubberFor(cfg)
	for _, secret := range []string{"loaded-password-1", "rotated-password-2", "key-passphrase", "minio-secret-9",
		"wJalrXUtnFEMIK7MDENG", "FwoGZXIvYXdzEXAMPLE"} {
		if got := s.Scrub("value " + secret + " here"); strings.Contains(got, secret) {
			t.Errorf("%s is not scrubbed: %s", secret, got)
		}
	}
	var buf bytes.Buffer
	newLogger(cfg, &buf).Info("connecting", "err", errors.New("auth failed for rotated-password-2"))
	if strings.Contains(buf.String(), "rotated") {
		t.Errorf("the logger shows the password: %s", buf.String())
	}
}
