package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestResolveURLExpandsAgain(t *testing.T) {
	file := "source:\n  postgres:\n    url: postgresql://app:${PW}@${HOST}:5432/app?x=$$\n"
	c, err := Parse([]byte(file), "f.yml", []string{"PW=old", "HOST=h1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgresql://app:old@h1:5432/app?x=$"; c.Source.Postgres.URL != want {
		t.Fatalf("URL = %q, want the load-time expansion %q", c.Source.Postgres.URL, want)
	}
	got, err := c.Source.Postgres.ResolveURL(mapLookup(map[string]string{"PW": "new", "HOST": "h2"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgresql://app:new@h2:5432/app?x=$"; got != want {
		t.Fatalf("ResolveURL = %q, want %q", got, want)
	}

	// A variable unset since load is an error naming it, not its old value.
	_, err = c.Source.Postgres.ResolveURL(mapLookup(map[string]string{"HOST": "h2"}))
	if err == nil || !strings.Contains(err.Error(), "source.postgres.url: environment variable PW is not set") {
		t.Fatalf("got %v, want an error naming PW", err)
	}
	if strings.Contains(err.Error(), "old") || strings.Contains(err.Error(), "new") {
		t.Fatalf("error shows a password: %v", err)
	}
}

func TestResolveURLLiteral(t *testing.T) {
	newEnv := mapLookup(map[string]string{"PW": "new"})
	templated := "source:\n  postgres:\n    url: postgresql://app:${PW}@h/app\n"
	cases := []struct {
		name    string
		file    string
		env     []string
		mutate  func(*Config)
		wantURL string
	}{
		{"no reference", minimal, nil, nil, "postgresql://app@127.0.0.1:5432/app"},
		// The override is literal at load (applyEnv), and stays so.
		{"override", templated, []string{"PW=old", "PGCDC_SOURCE_POSTGRES_URL=postgresql://o:p$w@h/db"}, nil, "postgresql://o:p$w@h/db"},
		// A URL changed in code after load is what the caller wants.
		{"changed after load", templated, []string{"PW=old"}, func(c *Config) { c.Source.Postgres.URL = "postgresql://x@h/db" }, "postgresql://x@h/db"},
		// A printed copy keeps no template.
		{"redacted", templated, []string{"PW=old"}, func(c *Config) { *c = c.Redacted() }, "postgresql://app:xxxxx@h/app"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.file), "f.yml", tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if tc.mutate != nil {
				tc.mutate(&c)
			}
			got, err := c.Source.Postgres.ResolveURL(newEnv)
			if err != nil || got != tc.wantURL {
				t.Fatalf("ResolveURL = %q, %v; want %q", got, err, tc.wantURL)
			}
		})
	}
	// A Config built in code resolves to its URL.
	c := valid()
	if got, err := c.Source.Postgres.ResolveURL(newEnv); err != nil || got != c.Source.Postgres.URL {
		t.Fatalf("ResolveURL = %q, %v; want URL", got, err)
	}
}

func TestRedactedHidesTheTemplate(t *testing.T) {
	file := "source:\n  postgres:\n    url: postgresql://app:l1teral@${HOST}/app\n"
	c, err := Parse([]byte(file), "f.yml", []string{"HOST=h"})
	if err != nil {
		t.Fatal(err)
	}
	// %+v prints unexported fields too.
	if s := fmt.Sprintf("%+v", c.Redacted()); strings.Contains(s, "l1teral") {
		t.Fatalf("Redacted leaks the password: %s", s)
	}
}

func TestIAMAuthKeys(t *testing.T) {
	const iamURL = "postgresql://app@db.example.com:5432/app?sslmode=verify-full"
	file := "source:\n  postgres:\n    url: " + iamURL + "\n    iam_auth: true\n    region: eu-west-1\n"
	c, err := Parse([]byte(file), "f.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Source.Postgres; !p.IAMAuth || p.Region != "eu-west-1" {
		t.Fatalf("iam_auth, region = %v, %q", p.IAMAuth, p.Region)
	}
	c, err = Parse([]byte(minimal), "f.yml", []string{
		"PGCDC_SOURCE_POSTGRES_URL=" + iamURL,
		"PGCDC_SOURCE_POSTGRES_IAM_AUTH=true",
		"PGCDC_SOURCE_POSTGRES_REGION=us-east-2",
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Source.Postgres; !p.IAMAuth || p.Region != "us-east-2" {
		t.Fatalf("iam_auth, region from the environment = %v, %q", p.IAMAuth, p.Region)
	}
	if d := Default().Source.Postgres; d.IAMAuth || d.Region != "" {
		t.Fatalf("defaults: iam_auth %v, region %q; want off and empty", d.IAMAuth, d.Region)
	}
	if _, err := Parse([]byte(minimal+"    iam_auth: yes\n"), "f.yml", nil); err == nil ||
		!strings.Contains(err.Error(), "f.yml:4: source.postgres.iam_auth: want true or false") {
		t.Fatalf("got %v, want a type error", err)
	}
}

func TestValidateIAMAuth(t *testing.T) {
	ok := []string{
		"postgresql://app@db.example.com/app?sslmode=require",
		"postgresql://app@db.example.com:5433/app?sslmode=verify-ca&sslrootcert=/etc/rds.pem",
		"postgresql://db.example.com/app?user=app&sslmode=verify-full",
		"postgresql:///app?host=db.example.com&user=app&sslmode=verify-full",
	}
	for _, u := range ok {
		c := valid()
		c.Source.Postgres.URL, c.Source.Postgres.IAMAuth, c.Source.Postgres.Region = u, true, "eu-west-1"
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	bad := []struct{ url, want string }{
		{"postgresql://db.example.com/app?sslmode=require", "must name the database user"},
		{"postgresql://app:s3cr3t@db.example.com/app?sslmode=require", "must not hold a password"},
		{"postgresql://app@db.example.com/app?sslmode=require&password=s3cr3t", "must not hold a password"},
		{"postgresql://app@/app?sslmode=require", "must name a TCP host"},
		{"postgresql://app@/app?host=/var/run/postgresql&sslmode=require", "must name a TCP host"},
		{"postgresql://app@h1,h2/app?sslmode=require", "must name one host"},
		{"postgresql://app@h1/app?sslmode=require&hostaddr=10.0.0.1", "must name one host"},
		{"postgresql://app@db.example.com/app", "needs TLS: add sslmode=verify-full"},
		{"postgresql://app@db.example.com/app?sslmode=prefer", "needs TLS: sslmode=prefer"},
		{"postgresql://app@db.example.com/app?sslmode=disable", "needs TLS: sslmode=disable"},
	}
	for _, tc := range bad {
		c := valid()
		c.Source.Postgres.URL, c.Source.Postgres.IAMAuth = tc.url, true
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "source.postgres.iam_auth: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error leaks the password: %v", tc.url, err)
		}
	}
	c := valid()
	c.Source.Postgres.Region = "eu-west-1"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "source.postgres.region: applies only with source.postgres.iam_auth: true") {
		t.Fatalf("region without iam_auth: got %v", err)
	}
}
