package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConnSpec says how to open a connection to the source server. It is asked
// anew for every physical connection this package opens (DB's, including
// the snapshot's COPY sessions and SnapshotTx, and every ReplConn), so a
// credential that changed since the previous connection is used by the next
// one without a restart: a rotated password in the environment or in a
// passfile, a renewed certificate, a fresh IAM token. A connection already
// open is not affected: PostgreSQL checks credentials only at sign-in.
type ConnSpec struct {
	// URL returns the postgres:// connection URL. It is parsed for each
	// connection, so the files its parameters name (passfile, sslrootcert,
	// sslcert, sslkey) are read again too; TLS comes from those libpq
	// parameters (sslmode, …), which this package never drops or
	// overrides. Required. Its errors must not hold the URL or a password:
	// they are passed on.
	URL func(ctx context.Context) (string, error)
	// Password, when set, returns the password of one connection as user
	// to host:port, replacing any that the URL, PGPASSWORD or a passfile
	// gives: an RDS IAM token (package rdsiam). It is called only for a
	// connection that cannot fall back to plain text and goes to one
	// host:port, so what it returns is never sent in the clear, nor to a
	// server it was not made for. Its result is never logged or put in an
	// error.
	Password func(ctx context.Context, host string, port uint16, user string) (string, error)
}

// defaultConnectTimeout bounds a connection attempt (TCP, TLS and sign-in)
// whose URL sets no connect_timeout.
const defaultConnectTimeout = 30 * time.Second

// StaticURL is a ConnSpec for a URL that does not change: tests and tools.
func StaticURL(url string) ConnSpec {
	return ConnSpec{URL: func(context.Context) (string, error) { return url, nil }}
}

// connConfig builds the configuration of one physical connection: the URL
// parsed now, the session settings every connection sends, and the
// password from Password. The result is for one connect call.
func (s ConnSpec) connConfig(ctx context.Context) (*pgx.ConnConfig, error) {
	if s.URL == nil {
		return nil, errors.New("connect to PostgreSQL: no connection URL")
	}
	url, err := s.URL(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve PostgreSQL connection URL: %w", err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, parseError(err)
	}
	applySessionParams(&cfg.Config)
	if cfg.ConnectTimeout == 0 {
		// Without connect_timeout in the URL a sign-in into a silent
		// network (a blackholed route, a proxy that stopped forwarding)
		// would wait forever; libpq's own default is no better.
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if s.Password != nil {
		if err := passwordSafe(&cfg.Config); err != nil {
			return nil, err
		}
		pw, err := s.Password(ctx, cfg.Host, cfg.Port, cfg.User)
		if err != nil {
			return nil, fmt.Errorf("password for %s: %w", serverName(&cfg.Config), err)
		}
		cfg.Password = pw
	}
	return cfg, nil
}

// passwordSafe refuses what would send a minted password somewhere it must
// not go: in the clear (sslmode disable, allow or prefer, or a Unix
// socket, where pgx uses no TLS), or to another host than the one it was
// made for (a multi-host URL).
func passwordSafe(cfg *pgconn.Config) error {
	plain := cfg.TLSConfig == nil
	for _, fb := range cfg.Fallbacks {
		plain = plain || fb.TLSConfig == nil
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			return fmt.Errorf("connect to %s: a token is made for one host, and the URL names several", serverName(cfg))
		}
	}
	if plain {
		return fmt.Errorf("connect to %s: refusing to send a token without TLS: set sslmode=verify-full (or verify-ca, require) and a TCP host", serverName(cfg))
	}
	return nil
}

// errBadURL deliberately says nothing about the URL: pgconn's parse errors
// quote it, and redacting a malformed URL is only best effort.
var errBadURL = errors.New("parse PostgreSQL connection URL: the URL is malformed (not shown: it may contain a password)")

// parseError is what a failed parse reports. A file the URL names that
// cannot be read (sslrootcert, sslcert, sslkey, service file) is named
// with its path, which is no secret and says what to fix; anything else is
// errBadURL.
func parseError(err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("parse PostgreSQL connection URL: %w", pathErr)
	}
	return errBadURL
}
