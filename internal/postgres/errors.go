package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// ErrPreflight is the class of a *cdc.Error saying the source is not set up
// for pg-cdc (wal_level, role, slots, a table's replica identity, a
// publication that does not publish every operation). Restarting does not
// help; the hint says what to change. main should map it to the usage or
// configuration exit code. It lives here rather than in cdc because only this
// adapter produces it; moving it to cdc is a one-line change.
var ErrPreflight = errors.New("source database is not ready for pg-cdc")

// ErrReplicationEnded: the server ended the replication stream (CopyDone)
// without an error, as it does when it shuts down or its timeline ends.
// Reconnecting is the remedy, so IsTransient is true for it.
var ErrReplicationEnded = errors.New("server ended replication")

// slotLostHint is what the operator can do when the slot is gone.
const slotLostHint = "the changes needed to continue are gone; rebuild the data as a new generation " +
	"(it creates a new slot and snapshot) rather than restarting from the current position"

// slotError turns a server error about the slot into a cdc.ErrSlotLost error,
// or returns nil when pgErr is about something else. duringStart is true for
// errors answering START_REPLICATION, where 42704 can only mean the slot (a
// missing publication is reported later, while decoding, with the same code).
func slotError(pgErr *pgconn.PgError, slot, server string, duringStart bool) error {
	lost := false
	switch pgErr.Code {
	case "42704": // undefined_object: replication slot "x" does not exist
		lost = duringStart || strings.Contains(pgErr.Message, "replication slot")
	case "55000": // object_not_in_prerequisite_state
		// "can no longer get changes from replication slot" (invalidated),
		// "This slot has been invalidated because ..." (detail, PG 16+).
		lost = strings.Contains(pgErr.Message, "can no longer get changes") ||
			strings.Contains(pgErr.Message, "invalidated") || strings.Contains(pgErr.Detail, "invalidated")
	case "58P01": // undefined_file: "requested WAL segment ... has already been removed"
		lost = strings.Contains(pgErr.Message, "has already been removed")
	}
	if !lost {
		return nil
	}
	return &cdc.Error{
		Class: cdc.ErrSlotLost,
		Msg:   fmt.Sprintf("replication slot %q on %s: %s (SQLSTATE %s)", slot, server, pgErr.Message, pgErr.Code),
		Hint:  slotLostHint,
	}
}

// IsTransient reports whether err may go away by retrying (after
// reconnecting): network failures, a closed or reset connection, timeouts, a
// server that is shutting down, starting up, or out of connection slots.
// It is false for slot loss and every other *cdc.Error, for authentication
// and permission errors, for TLS setup errors (a server certificate that
// does not verify, a server without TLS when sslmode requires it), for
// context.Canceled (the caller is stopping), and for any other server error.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var ce *cdc.Error
	if errors.As(err, &ce) || errors.Is(err, cdc.ErrSlotLost) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	// A server error decides by its code, whatever wraps it: pgconn marks
	// some failed connects as safe to retry even when the server refused the
	// password.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", // admin_shutdown
			pgErr.Code == "57P02", // crash_shutdown
			pgErr.Code == "57P03", // cannot_connect_now (starting up, recovery)
			pgErr.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	if tlsSetupError(err) {
		return false
	}
	if errors.Is(err, ErrReplicationEnded) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return pgconn.SafeToRetry(err)
}

// connectError is a failed connect to server. When the server answered
// with an error (a refused password, a database that does not exist), the
// message leads with that answer: pgconn's own message lists every
// attempt first, and with sslmode=prefer against a server without TLS the
// first is "tls error: server refused TLS connection", which is noise
// before the cause. The error underneath is kept (errors.As finds the
// *pgconn.PgError), and the hint says what to check.
func connectError(what, server string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("%s %s: %w", what, server, classify(err))
	}
	e := &refusedError{msg: fmt.Sprintf("%s %s: %s: %s (SQLSTATE %s)", what, server, pgErr.Severity, pgErr.Message, pgErr.Code), err: classify(err)}
	switch {
	case pgErr.Code == "28P01" || pgErr.Code == "28000":
		e.hint = "check the user and password: source.postgres.url's user info (percent-encoded), PGPASSWORD or ~/.pgpass; the server's pg_hba.conf decides which users, databases and addresses may sign in and how"
	case pgErr.Code == "3D000":
		e.hint = "check the database name at the end of source.postgres.url (postgresql://user@host:5432/DATABASE)"
	case pgErr.Code == "42501":
		e.hint = "grant the role what pg-cdc needs (docs/preflight.md): LOGIN, REPLICATION (or rds_replication), CONNECT on the database"
	}
	return e
}

// refusedError is a connect the server answered with an error.
type refusedError struct {
	msg, hint string
	err       error
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.err }
func (e *refusedError) Hint() string  { return e.hint }

// classify gives err the behaviour cdc.IsTransient reads: marked transient
// when IsTransient says a new attempt may get past it. Errors that already
// say (a *cdc.Error, an earlier classification) are returned as they are.
// The adapter applies it where its errors leave a connection (DB.with,
// connect, the replication connection's calls), so callers never have to
// ask this package what an error means.
func classify(err error) error {
	var says interface{ Transient() bool }
	if err == nil || errors.As(err, &says) || !IsTransient(err) {
		return err
	}
	return cdc.Transient(err)
}

// tlsSetupError reports a TLS failure that is configuration, not the
// network: a server certificate that does not verify against sslrootcert
// (or the host name), or a server without TLS when sslmode requires it.
// Retrying cannot fix either; without this they would pass for network
// errors, and start would retry a misconfiguration until its budget ran out.
func tlsSetupError(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknownCA) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) ||
		// pgconn's startTLS has no sentinel for the server's "N".
		strings.Contains(err.Error(), "server refused TLS connection")
}
