package rdsiam

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

var tokenForm = regexp.MustCompile(`^db\.example\.com:5432/?\?Action=connect&DBUser=pgcdc&X-Amz-Algorithm=`)

// fakeCreds counts retrievals; it never calls AWS.
type fakeCreds struct {
	calls atomic.Int64
	err   error
}

func (f *fakeCreds) Retrieve(context.Context) (aws.Credentials, error) {
	f.calls.Add(1)
	if f.err != nil {
		return aws.Credentials{}, f.err
	}
	return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "sess", Source: "fake"}, nil
}

func TestPasswordIsAnRDSToken(t *testing.T) {
	creds := &fakeCreds{}
	tokens, err := New("eu-west-1", creds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := tokens.Password(ctx, "db.example.com", 5432, "pgcdc")
	if err != nil {
		t.Fatal(err)
	}
	// The SDK writes host:port?Action=…; the AWS CLI host:port/?Action=….
	// RDS takes both.
	if !tokenForm.MatchString(first) {
		t.Fatalf("token %q does not match %s", first, tokenForm)
	}
	u, err := url.Parse("https://" + first)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"X-Amz-Algorithm":      "AWS4-HMAC-SHA256",
		"X-Amz-Expires":        "900",
		"X-Amz-Security-Token": "sess",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if c := q.Get("X-Amz-Credential"); !strings.HasPrefix(c, "AKIDEXAMPLE/") || !strings.HasSuffix(c, "/eu-west-1/rds-db/aws4_request") {
		t.Errorf("X-Amz-Credential = %q, want AKIDEXAMPLE/<date>/eu-west-1/rds-db/aws4_request", c)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("no signature")
	}
	if strings.Contains(first, "wJalrXUtnFEMI") {
		t.Error("the token holds the secret key")
	}

	// Every call is a fresh token from freshly retrieved credentials: one
	// per connection.
	if _, err := tokens.Password(ctx, "db.example.com", 5433, "other"); err != nil {
		t.Fatal(err)
	}
	if n := creds.calls.Load(); n != 2 {
		t.Fatalf("credentials retrieved %d times for 2 tokens, want 2", n)
	}
}

func TestPasswordErrors(t *testing.T) {
	if _, err := New("", &fakeCreds{}); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("no region: %v", err)
	}
	if _, err := New("eu-west-1", nil); err == nil {
		t.Fatal("no credentials provider: no error")
	}
	tokens, err := New("eu-west-1", &fakeCreds{err: errors.New("no EC2 IMDS role found")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tokens.Password(context.Background(), "db.example.com", 5432, "pgcdc")
	if err == nil || !strings.Contains(err.Error(), "build RDS IAM token for user pgcdc at db.example.com:5432 in eu-west-1: no EC2 IMDS role found") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadRegion(t *testing.T) {
	// No shared files and no region anywhere: ErrNoRegion, before any
	// credentials are looked for.
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	if _, err := Load(context.Background(), ""); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("no region: %v", err)
	}
	tokens, err := Load(context.Background(), "ap-south-1")
	if err != nil {
		t.Fatal(err)
	}
	if tokens.Region() != "ap-south-1" {
		t.Fatalf("region %q", tokens.Region())
	}
	t.Setenv("AWS_REGION", "us-east-2")
	if tokens, err = Load(context.Background(), ""); err != nil || tokens.Region() != "us-east-2" {
		t.Fatalf("region from the chain: %v, %v", tokens, err)
	}
}
