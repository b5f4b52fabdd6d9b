package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pg-cdc/pg-cdc/internal/postgres/rdsiam"
)

// countingURL is a ConnSpec.URL that counts its calls.
func countingURL(url string, calls *atomic.Int64) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		calls.Add(1)
		return url, nil
	}
}

// TestIAMTokenPerConnection: with an RDS IAM token source, every connection
// configuration gets a token minted for it, as its password; no AWS call
// is made (the credentials are a fake).
func TestIAMTokenPerConnection(t *testing.T) {
	var retrieved, urlCalls atomic.Int64
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		retrieved.Add(1)
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secretkeyexample"}, nil
	})
	tokens, err := rdsiam.New("eu-west-1", creds)
	if err != nil {
		t.Fatal(err)
	}
	spec := ConnSpec{
		URL:      countingURL("postgres://pgcdc@db.example.com:5433/app?sslmode=verify-full", &urlCalls),
		Password: tokens.Password,
	}
	token := regexp.MustCompile(`^db\.example\.com:5433/?\?Action=connect&DBUser=pgcdc&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F\d{8}%2Feu-west-1%2Frds-db%2Faws4_request&`)
	for i := 1; i <= 3; i++ {
		cfg, err := spec.connConfig(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !token.MatchString(cfg.Password) {
			t.Fatalf("connection %d: password %q is not an RDS token for pgcdc at db.example.com:5433", i, cfg.Password)
		}
		if cfg.TLSConfig == nil || cfg.RuntimeParams["application_name"] != "pg-cdc" {
			t.Fatalf("connection %d: TLS or session settings lost", i)
		}
		if retrieved.Load() != int64(i) || urlCalls.Load() != int64(i) {
			t.Fatalf("after %d connections: %d tokens, %d URL resolutions; want one of each per connection", i, retrieved.Load(), urlCalls.Load())
		}
	}
}

// TestPasswordNeverInTheClear: a password source is refused, before it is
// asked, for a connection that could go without TLS or to another host.
func TestPasswordNeverInTheClear(t *testing.T) {
	for _, url := range []string{
		"postgres://pgcdc@db.example.com/app",                                  // sslmode prefer
		"postgres://pgcdc@db.example.com/app?sslmode=prefer",                   //
		"postgres://pgcdc@db.example.com/app?sslmode=allow",                    //
		"postgres://pgcdc@db.example.com/app?sslmode=disable",                  //
		"postgres://pgcdc@/app?host=/var/run/postgresql&sslmode=require",       // Unix socket: no TLS
		"postgres://pgcdc@db1.example.com,db2.example.com/app?sslmode=require", // two hosts
	} {
		called := false
		spec := ConnSpec{
			URL: StaticURL(url).URL,
			Password: func(context.Context, string, uint16, string) (string, error) {
				called = true
				return "tok3n", nil
			},
		}
		_, err := spec.connConfig(context.Background())
		if err == nil || called {
			t.Errorf("%s: err %v, password asked %t; want a refusal before asking", url, err, called)
		}
	}
}

func TestConnSpecErrors(t *testing.T) {
	ctx := context.Background()
	resolveErr := errors.New("source.postgres.url: environment variable PW is not set")
	_, err := ConnSpec{URL: func(context.Context) (string, error) { return "", resolveErr }}.connConfig(ctx)
	if !errors.Is(err, resolveErr) {
		t.Errorf("URL error: got %v", err)
	}
	if _, err := (ConnSpec{}).connConfig(ctx); err == nil {
		t.Error("no URL: no error")
	}
	// A TLS file that cannot be read is named; the password is not.
	_, err = StaticURL("postgres://u:s3cret@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt").connConfig(ctx)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.crt") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("missing sslrootcert: %v", err)
	}
	_, err = StaticURL("postgres://u:s3cret@h/db?sslmode=verify-full&sslcert=/nonexistent/c.crt&sslkey=/nonexistent/c.key").connConfig(ctx)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/c.key") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("missing sslkey: %v", err)
	}
	_, err = StaticURL("postgres://u:s3cret@h/db?sslmode=bogus").connConfig(ctx)
	if !errors.Is(err, errBadURL) {
		t.Errorf("bad sslmode: %v", err)
	}
	// A password source's error is passed on, naming the server.
	_, err = ConnSpec{
		URL: StaticURL("postgres://pgcdc@db.example.com/app?sslmode=require").URL,
		Password: func(context.Context, string, uint16, string) (string, error) {
			return "", errors.New("no EC2 IMDS role found")
		},
	}.connConfig(ctx)
	if err == nil || !strings.Contains(err.Error(), "password for db.example.com:5432/app (user pgcdc): no EC2 IMDS role found") {
		t.Errorf("password error: %v", err)
	}
}

// TestTLSSetupErrorsAreTerminal: a certificate that does not verify, or a
// server that refuses TLS, is configuration; retrying cannot fix it. (The
// TLS tests meet the unknown CA and the refusal for real.)
func TestTLSSetupErrorsAreTerminal(t *testing.T) {
	// As pgconn meets them: the handshake fails inside a socket write, so
	// the cause arrives wrapped in a net.Error, which alone would say
	// "transient".
	inWrite := func(cause error) error {
		return fmt.Errorf("failed to write startup message: %w", &net.OpError{Op: "write", Net: "tcp", Err: cause})
	}
	for _, err := range []error{
		inWrite(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}),
		inWrite(x509.UnknownAuthorityError{}), // verify-ca's own check
		inWrite(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "db.example.com"}),
		inWrite(x509.CertificateInvalidError{Reason: x509.Expired}),
		fmt.Errorf("connect: %w", errors.New("server refused TLS connection")),
	} {
		if IsTransient(err) {
			t.Errorf("%v: transient", err)
		}
	}
}
