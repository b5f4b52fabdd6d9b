package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// DrainOptions configure Drain.
type DrainOptions struct {
	URL         string
	Slot        string
	Publication string
	// Start is the LSN to start from; 0 starts at the slot's confirmed
	// position.
	Start pglogrepl.LSN
	// End stops the drain at the first non-transactional logical message
	// (pg_logical_emit_message(false, …)) at or past End, or a keepalive
	// reporting the server past End.
	End    pglogrepl.LSN
	Socket Socket
	// Poll bounds one wait for data (default 20 ms). With SO_RCVLOWAT a
	// tail shorter than the low-water mark is read only when a wait ends.
	Poll time.Duration
	// Binary asks pgoutput for values in binary (send/recv) format
	// ("binary 'true'"), to measure it against text (issue 4, item 7).
	Binary bool
}

// DrainResult counts what Drain received.
type DrainResult struct {
	Messages int64 // XLogData messages
	Rows     int64 // Insert, Update and Delete messages
	Txns     int64 // Commit and StreamCommit messages
	Bytes    int64 // pgoutput payload bytes
	Elapsed  time.Duration
}

// Drain streams a slot from opts.Start to opts.End, parsing every message
// and discarding it, and confirms each transaction's end LSN as it goes
// (every second, and at once when the server asks). It is the ceiling a
// streaming consumer is measured against.
func Drain(ctx context.Context, opts DrainOptions) (DrainResult, error) {
	var res DrainResult
	if opts.Poll <= 0 {
		opts.Poll = 20 * time.Millisecond
	}
	started := time.Now()
	conn, err := connect(ctx, opts.URL, "database", opts.Socket, 0)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	args := []string{
		"proto_version '2'",
		"publication_names '" + strings.ReplaceAll(opts.Publication, "'", "''") + "'",
		"messages 'true'",
		"streaming 'true'",
	}
	if opts.Binary {
		args = append(args, "binary 'true'")
	}
	err = pglogrepl.StartReplication(ctx, conn, opts.Slot, opts.Start, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: args,
	})
	if err != nil {
		return res, fmt.Errorf("start replication: %w", err)
	}

	var (
		inStream   bool
		ack        pglogrepl.LSN // end LSN of the last transaction received
		lastStatus = time.Now()
		deadline   time.Time
		netConn    = conn.Conn()
	)
	status := func() error {
		lastStatus = time.Now()
		return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: ack, WALFlushPosition: ack, WALApplyPosition: ack, ClientTime: lastStatus,
		})
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		// A read deadline on the socket, refreshed at most every few
		// milliseconds, instead of a context per message: a context with a
		// deadline costs a timer and a watcher on every receive.
		if now := time.Now(); deadline.Sub(now) < opts.Poll/2 {
			deadline = now.Add(opts.Poll)
			if err := netConn.SetReadDeadline(deadline); err != nil {
				return res, fmt.Errorf("set read deadline: %w", err)
			}
		}
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !conn.IsClosed() {
				deadline = time.Time{}
				if time.Since(lastStatus) >= time.Second {
					if err := status(); err != nil {
						return res, fmt.Errorf("send standby status: %w", err)
					}
				}
				continue
			}
			return res, fmt.Errorf("receive: %w", err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			if e, ok := msg.(*pgproto3.ErrorResponse); ok {
				return res, fmt.Errorf("server: %w", pgconn.ErrorResponseToPgError(e))
			}
			return res, fmt.Errorf("unexpected message %T", msg)
		}
		if len(cd.Data) == 0 {
			return res, errors.New("empty CopyData")
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return res, fmt.Errorf("parse keepalive: %w", err)
			}
			if opts.End != 0 && k.ServerWALEnd >= opts.End && !inStream {
				res.Elapsed = time.Since(started)
				return res, status()
			}
			if k.ReplyRequested {
				if err := status(); err != nil {
					return res, fmt.Errorf("send standby status: %w", err)
				}
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return res, fmt.Errorf("parse XLogData: %w", err)
			}
			res.Messages++
			res.Bytes += int64(len(x.WALData))
			if len(x.WALData) == 0 {
				return res, errors.New("empty pgoutput message")
			}
			m, err := pglogrepl.ParseV2(x.WALData, inStream)
			if err != nil {
				return res, fmt.Errorf("parse pgoutput %q: %w", x.WALData[0], err)
			}
			switch m := m.(type) {
			case *pglogrepl.StreamStartMessageV2:
				inStream = true
			case *pglogrepl.StreamStopMessageV2:
				inStream = false
			case *pglogrepl.InsertMessageV2, *pglogrepl.UpdateMessageV2, *pglogrepl.DeleteMessageV2:
				res.Rows++
			case *pglogrepl.CommitMessage:
				res.Txns++
				ack = m.TransactionEndLSN
			case *pglogrepl.StreamCommitMessageV2:
				res.Txns++
				ack = m.TransactionEndLSN
			case *pglogrepl.LogicalDecodingMessageV2:
				if !m.Transactional && opts.End != 0 && m.LSN >= opts.End {
					res.Elapsed = time.Since(started)
					ack = max(ack, m.LSN)
					return res, status()
				}
			}
			if time.Since(lastStatus) >= time.Second {
				if err := status(); err != nil {
					return res, fmt.Errorf("send standby status: %w", err)
				}
			}
		}
	}
}
