package replicate

import (
	"time"

	"context"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Source is the replication stream the service consumes. The postgres
// adapter implements it (cmd adapts its message type).
type Source interface {
	// Receive returns the next message. It honours ctx's deadline; an
	// expired deadline returns an error matching context.DeadlineExceeded
	// and leaves the stream usable.
	Receive(ctx context.Context) (Message, error)
	// SendStatus reports pos as written, flushed and applied.
	SendStatus(ctx context.Context, pos cdc.LSN, replyRequested bool) error
}

// Message is one message of the replication stream.
type Message struct {
	// Keepalive is true for a primary keepalive; Data is empty then.
	Keepalive    bool
	ServerWALEnd cdc.LSN
	// ServerTime is the server's clock when it sent a keepalive (zero if
	// not known): the time its WAL end was current.
	ServerTime     time.Time
	ReplyRequested bool
	// Data is a pgoutput message, valid until the next Receive.
	Data []byte
}
