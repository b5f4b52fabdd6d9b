// Package rdsiam mints Amazon RDS and Aurora IAM authentication tokens: the
// password of every source connection when source.postgres.iam_auth is on
// (Tokens.Password is a postgres.ConnSpec.Password).
//
// A token is a SigV4-presigned "connect" request for one host:port and
// database user, valid for 15 minutes. It is built locally from the AWS
// credentials; the only network traffic is what the credentials provider
// itself needs (its cache refreshes them before they expire).
//
// Invariants:
//
//   - A fresh token per call, so per connection: an expired token never
//     needs a restart, and a token is never kept.
//   - A token is a credential: it is returned to the caller only, never put
//     in an error or a log line.
package rdsiam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
)

// ErrNoRegion means neither the configuration nor the AWS chain names a
// region, which a token is signed for.
var ErrNoRegion = errors.New("no AWS region for RDS IAM authentication: set source.postgres.region or AWS_REGION")

// Tokens mints tokens for one region with one credentials provider. It is
// safe for concurrent use.
type Tokens struct {
	region string
	creds  aws.CredentialsProvider
}

// New returns Tokens signing for region with creds (tests pass a fake
// provider; pg-cdc uses Load).
func New(region string, creds aws.CredentialsProvider) (*Tokens, error) {
	if region == "" {
		return nil, ErrNoRegion
	}
	if creds == nil {
		return nil, errors.New("RDS IAM authentication: no AWS credentials provider")
	}
	return &Tokens{region: region, creds: creds}, nil
}

// Load returns Tokens with the credentials and, when region is empty, the
// region of the standard AWS chain (environment, shared config and
// credentials files, web identity, container and instance roles).
func Load(ctx context.Context, region string) (*Tokens, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration for RDS IAM authentication: %w", err)
	}
	return New(cfg.Region, cfg.Credentials)
}

// Region is the region tokens are signed for.
func (t *Tokens) Region() string { return t.region }

// Password mints a token for user at host:port: what PostgreSQL on RDS
// takes as the password of that sign-in.
func (t *Tokens) Password(ctx context.Context, host string, port uint16, user string) (string, error) {
	endpoint := net.JoinHostPort(host, strconv.Itoa(int(port)))
	token, err := auth.BuildAuthToken(ctx, endpoint, t.region, user, t.creds)
	if err != nil {
		// BuildAuthToken's errors come before a token exists: credentials
		// that could not be retrieved, a malformed endpoint.
		return "", fmt.Errorf("build RDS IAM token for user %s at %s in %s: %w", user, endpoint, t.region, err)
	}
	return token, nil
}
