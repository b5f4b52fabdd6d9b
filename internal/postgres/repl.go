package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// ReplConn is a logical replication connection (replication=database). One
// goroutine owns it: Receive and SendStatus must not run concurrently.
type ReplConn struct {
	conn   *pgconn.PgConn
	server string
	slot   string // the slot being streamed, once StartReplication succeeded
	// readDeadline is the socket read deadline receive last set, or zero
	// when it has expired.
	readDeadline time.Time
}

// ConnectReplication opens a replication connection, with the URL, TLS
// settings and password as spec gives them now and the session settings
// every connection uses (see sessionParams). Errors name the server, never
// the URL.
func ConnectReplication(ctx context.Context, spec ConnSpec) (*ReplConn, error) {
	connCfg, err := spec.connConfig(ctx)
	if err != nil {
		return nil, err
	}
	// The pgconn part of pgx's configuration: pgx.ParseConfig has taken its
	// own parameters (statement_cache_capacity, …) out of RuntimeParams,
	// which a replication session would otherwise send as settings.
	cfg := &connCfg.Config
	cfg.RuntimeParams["replication"] = "database"
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, replReadBuffer), w)
	}
	server := serverName(cfg)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError("open replication connection to", server, err)
	}
	return &ReplConn{conn: conn, server: server}, nil
}

// IdentifySystem runs IDENTIFY_SYSTEM: the cluster's system identifier, its
// current timeline, the connection's database, and the server's current WAL
// flush position (xlogpos). Unlike DB.Identity it needs only REPLICATION.
func (r *ReplConn) IdentifySystem(ctx context.Context) (Identity, cdc.LSN, error) {
	res, err := pglogrepl.IdentifySystem(ctx, r.conn)
	if err != nil {
		return Identity{}, 0, fmt.Errorf("identify system %s: %w", r.server, classify(err))
	}
	return Identity{SystemIdentifier: res.SystemID, Timeline: res.Timeline, Database: res.DBName}, cdc.LSN(res.XLogPos), nil
}

// CreateSlot creates a logical slot for pgoutput and exports a snapshot of
// the moment the slot becomes consistent: the snapshot sees exactly the
// transactions that committed before consistentPoint, and the slot streams
// exactly those after it.
//
// The snapshot stays importable (CopyTable's snapshot argument) only until
// the next command on this connection, StartReplication included: import it
// in every COPY transaction first, then start replication; transactions that
// imported it keep it. A slot that already exists is an error (SQLSTATE 42710).
func (r *ReplConn) CreateSlot(ctx context.Context, name string) (consistentPoint cdc.LSN, snapshotName string, err error) {
	if err := validSlotName(name); err != nil {
		return 0, "", fmt.Errorf("create replication slot: %w", err)
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, r.conn, name, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return 0, "", fmt.Errorf("create replication slot %q on %s: %w", name, r.server, err)
	}
	lsn, err := cdc.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, "", fmt.Errorf("create replication slot %q on %s: consistent point: %w", name, r.server, err)
	}
	return lsn, res.SnapshotName, nil
}

// StartReplication starts streaming slot from start with pgoutput protocol
// version 2, the given publication, logical messages, and streaming of large
// in-progress transactions. The server streams from the later of start and
// the slot's confirmed_flush_lsn.
//
// A missing or invalidated slot gives an error matching cdc.ErrSlotLost,
// here or (if the server reports it late) from the first Receive.
func (r *ReplConn) StartReplication(ctx context.Context, slot, publication string, start cdc.LSN) error {
	if err := validSlotName(slot); err != nil {
		return fmt.Errorf("start replication: %w", err)
	}
	err := pglogrepl.StartReplication(ctx, r.conn, slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '2'",
			// pgoutput splits publication_names as a list of identifiers,
			// so the name is quoted as an identifier inside a literal.
			"publication_names " + quoteLiteral(pgx.Identifier{publication}.Sanitize()),
			"messages 'true'",
			"streaming 'true'",
		},
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			if lost := slotError(pgErr, slot, r.server, true); lost != nil {
				return lost
			}
		}
		return fmt.Errorf("start replication from slot %q on %s: %w", slot, r.server, classify(err))
	}
	r.slot = slot
	// Only now: the start-up exchange is a few small messages. Without the
	// option (another OS, a proxy) the stream works the same, a little
	// slower.
	_ = setRcvLowat(r.conn.Conn(), replRcvLowat)
	return nil
}

// MessageKind says what a replication message carries.
type MessageKind int

const (
	// XLogData carries pgoutput bytes in Data.
	XLogData MessageKind = iota + 1
	// Keepalive carries only the server's position and clock, and may ask
	// for an immediate status update (ReplyRequested).
	Keepalive
)

func (k MessageKind) String() string {
	switch k {
	case XLogData:
		return "XLogData"
	case Keepalive:
		return "Keepalive"
	}
	return fmt.Sprintf("MessageKind(%d)", int(k))
}

// Message is one message of the replication stream.
type Message struct {
	Kind MessageKind
	// WALStart is the WAL position of Data (XLogData only).
	WALStart cdc.LSN
	// ServerWALEnd is the end of the WAL on the server when it sent this.
	ServerWALEnd cdc.LSN
	ServerTime   time.Time
	// ReplyRequested: the server asks for a status update now (Keepalive).
	ReplyRequested bool
	// Data is the pgoutput message (XLogData). It points into the
	// connection's read buffer: valid only until the next Receive.
	Data []byte
}

// Receive waits for the next replication message until ctx is done. When
// ctx's deadline passes first, the error matches context.DeadlineExceeded
// and the connection stays usable: poll with a short deadline to interleave
// status updates. Notices are skipped.
//
// A server error about the slot matches cdc.ErrSlotLost; other server errors
// come back as *pgconn.PgError (classify with IsTransient). The server ending
// the stream gives ErrReplicationEnded.
func (r *ReplConn) Receive(ctx context.Context) (Message, error) {
	if r.slot == "" {
		return Message{}, errors.New("receive replication message: replication has not started")
	}
	for {
		msg, err := r.receive(ctx)
		if err != nil {
			// A FATAL server error arrives here rather than as a message:
			// pgconn closes the connection and returns it as an error.
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				if lost := slotError(pgErr, r.slot, r.server, false); lost != nil {
					return Message{}, lost
				}
			}
			return Message{}, fmt.Errorf("receive from replication slot %q on %s: %w", r.slot, r.server, classify(err))
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			out, err := parseCopyData(m.Data)
			if err != nil {
				return Message{}, fmt.Errorf("receive from replication slot %q on %s: %w", r.slot, r.server, err)
			}
			return out, nil
		case *pgproto3.ErrorResponse:
			pgErr := pgconn.ErrorResponseToPgError(m)
			if lost := slotError(pgErr, r.slot, r.server, false); lost != nil {
				return Message{}, lost
			}
			return Message{}, fmt.Errorf("replication slot %q on %s: %w", r.slot, r.server, classify(pgErr))
		case *pgproto3.CopyDone, *pgproto3.CommandComplete, *pgproto3.ReadyForQuery:
			// The walsender ends the stream this way when the server shuts
			// down; pgconn may hand over the CommandComplete that follows
			// CopyDone first.
			return Message{}, fmt.Errorf("replication slot %q on %s: %w (%T)", r.slot, r.server, classify(ErrReplicationEnded), msg)
		case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
			continue
		default:
			return Message{}, fmt.Errorf("replication slot %q on %s: unexpected protocol message %T", r.slot, r.server, msg)
		}
	}
}

// Socket tuning of the replication connection, measured in BENCHMARKS.md
// (issue 3). Reading the stream in large batches matters on both sides: a
// client that wakes for every message makes the walsender send (and spend
// CPU on) small packets, and costs the client a system call per 8 KiB.
const (
	// replRcvLowat (SO_RCVLOWAT) lets the kernel wake the reader only once
	// this much is queued...
	replRcvLowat = 64 << 10
	// ...and replPoll bounds how long a shorter tail (the end of a burst, a
	// keepalive) waits before it is read anyway.
	replPoll = 100 * time.Millisecond
	// replReadBuffer is what one read(2) may take (pgconn reads 8 KiB).
	replReadBuffer = 256 << 10
)

// receive reads the next protocol message, honouring ctx's deadline with the
// socket's read deadline rather than pgconn's context watcher: the watcher
// costs a timer registration and a few allocations on every call, most of
// which return a message already buffered (several percent of pg-cdc's CPU
// when it drained a backlog). The socket deadline is the earlier of ctx's
// deadline and replPoll from when it was set, and is set again only when it
// expires or ctx's deadline moves before it, so the replication loop (which
// passes the same deadline for many calls) sets it a few times a second.
//
// Cancelling ctx is noticed when the socket deadline expires, within
// replPoll. The deadline stays on the socket after Receive returns; nothing
// else reads from a streaming connection, and a method that does must clear
// it first.
func (r *ReplConn) receive(ctx context.Context) (pgproto3.BackendMessage, error) {
	deadline, hasDeadline := ctx.Deadline()
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("receive message: %w", err)
		}
		if r.readDeadline.IsZero() || (hasDeadline && r.readDeadline.After(deadline)) {
			if err := r.setReadDeadline(deadline, hasDeadline); err != nil {
				return nil, err
			}
		}
		msg, err := r.conn.ReceiveMessage(context.Background())
		if err == nil || !isTimeout(err) || r.conn.IsClosed() {
			return msg, err
		}
		// The socket deadline expired; the connection stays usable, and a
		// message cut short is completed by the next read. Either ctx's
		// deadline has passed (its timer may not have fired yet) or a new
		// poll starts.
		r.readDeadline = time.Time{}
		if hasDeadline && !time.Now().Before(deadline) {
			return nil, fmt.Errorf("receive message: %w", context.DeadlineExceeded)
		}
	}
}

// isTimeout is apart from receive so that its error target does not escape
// to the heap on every call.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

func (r *ReplConn) setReadDeadline(deadline time.Time, hasDeadline bool) error {
	d := time.Now().Add(replPoll)
	if hasDeadline && deadline.Before(d) {
		d = deadline
	}
	if err := r.conn.Conn().SetReadDeadline(d); err != nil {
		return fmt.Errorf("set read deadline: %w", err)
	}
	r.readDeadline = d
	return nil
}

// parseCopyData decodes one CopyData payload of the replication stream.
func parseCopyData(b []byte) (Message, error) {
	if len(b) == 0 {
		return Message{}, errors.New("empty replication message")
	}
	switch b[0] {
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(b[1:])
		if err != nil {
			return Message{}, fmt.Errorf("parse XLogData: %w", err)
		}
		return Message{Kind: XLogData, WALStart: cdc.LSN(x.WALStart), ServerWALEnd: cdc.LSN(x.ServerWALEnd),
			ServerTime: x.ServerTime.UTC(), Data: x.WALData}, nil
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(b[1:])
		if err != nil {
			return Message{}, fmt.Errorf("parse keepalive: %w", err)
		}
		return Message{Kind: Keepalive, ServerWALEnd: cdc.LSN(k.ServerWALEnd), ServerTime: k.ServerTime.UTC(),
			ReplyRequested: k.ReplyRequested}, nil
	}
	return Message{}, fmt.Errorf("unknown replication message type %q", b[0])
}

// SendStatus sends a standby status update reporting pos as written, flushed
// and applied, all three set explicitly (pglogrepl would copy the write
// position into a zero flush position). PostgreSQL advances the slot's
// confirmed_flush_lsn to pos, so pos must be durable downstream (design.md
// §1). With replyRequested the server answers with a keepalive at once.
//
// The write honours ctx's deadline. A failed write leaves the protocol stream
// in an unknown state, so the connection is closed and the error is
// transient.
func (r *ReplConn) SendStatus(ctx context.Context, pos cdc.LSN, replyRequested bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send standby status to %s: %w", r.server, err)
	}
	if d, ok := ctx.Deadline(); ok {
		if err := r.conn.Conn().SetWriteDeadline(d); err != nil {
			return fmt.Errorf("send standby status to %s: %w", r.server, err)
		}
		// pgconn clears deadlines only after using one to cancel a call;
		// ours must not outlive this write and fail a later one.
		defer func() { _ = r.conn.Conn().SetWriteDeadline(time.Time{}) }()
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pglogrepl.LSN(pos),
		WALFlushPosition: pglogrepl.LSN(pos),
		WALApplyPosition: pglogrepl.LSN(pos),
		ClientTime:       time.Now(),
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.conn.Close(closeCtx) // already failing; the write error is the one to report
		return fmt.Errorf("send standby status to %s: %w", r.server, classify(err))
	}
	return nil
}

// Close ends the session; send a last status update before, if one is due.
// It also waits (until ctx is done) for pgconn to finish closing a
// connection that an earlier error broke, so nothing outlives the ReplConn.
func (r *ReplConn) Close(ctx context.Context) error {
	err := r.conn.Close(ctx)
	select {
	case <-r.conn.CleanupDone():
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("close replication connection to %s: %w", r.server, err)
	}
	return nil
}

// validSlotName applies PostgreSQL's rule for slot names (lower-case
// letters, digits and underscores, at most 63 bytes). Replication commands
// take the name unquoted, so nothing else may reach them.
func validSlotName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("slot name %q: want 1 to 63 characters", name)
	}
	for _, r := range name {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			return fmt.Errorf("slot name %q: want lower-case letters, digits and underscores", name)
		}
	}
	return nil
}

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
