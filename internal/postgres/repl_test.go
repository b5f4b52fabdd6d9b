package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// streamEnv is a database with table t, publication pub and a slot streamed
// by r from its consistent point.
type streamEnv struct {
	*env
	r     *ReplConn
	slot  string
	start cdc.LSN
	tbl   *cdc.Table
}

func newStream(t *testing.T) *streamEnv {
	t.Helper()
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, ts timestamptz, f float8, b bytea, iv interval)`)
	if err := e.db.EnsurePublication(ctx, "pub", []cdc.TableID{{Schema: "public", Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	r := e.replConn()
	slot := "slot_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	cp, _, err := r.CreateSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartReplication(ctx, slot, "pub", cp); err != nil {
		t.Fatal(err)
	}
	return &streamEnv{env: e, r: r, slot: slot, start: cp, tbl: e.table("public.t")}
}

// receive waits up to 10s for the next message.
func (s *streamEnv) receive() (Message, error) {
	ctx, cancel := context.WithTimeout(testCtx(s.t), 10*time.Second)
	defer cancel()
	return s.r.Receive(ctx)
}

// insertTx is what the stream says about one inserted row.
type insertTx struct {
	values  []string // the tuple's text values
	endLSN  cdc.LSN  // commit end
	walData int      // XLogData messages seen
}

// nextInsert decodes the stream until the commit of a transaction that
// inserted a row, using pglogrepl's decoder (test only: package pgoutput owns
// decoding in pg-cdc).
func (s *streamEnv) nextInsert() insertTx {
	s.t.Helper()
	var out insertTx
	inStream := false
	for {
		m, err := s.receive()
		if err != nil {
			s.t.Fatalf("receive: %v", err)
		}
		if m.Kind != XLogData {
			continue
		}
		out.walData++
		msg, err := pglogrepl.ParseV2(m.Data, inStream)
		if err != nil {
			s.t.Fatalf("decode: %v", err)
		}
		switch msg := msg.(type) {
		case *pglogrepl.StreamStartMessageV2:
			inStream = true
		case *pglogrepl.StreamStopMessageV2:
			inStream = false
		case *pglogrepl.InsertMessageV2:
			for _, c := range msg.Tuple.Columns {
				out.values = append(out.values, string(c.Data))
			}
		case *pglogrepl.CommitMessage:
			if out.values != nil {
				out.endLSN = cdc.LSN(msg.TransactionEndLSN)
				return out
			}
		}
	}
}

func TestStreamInsertKeepaliveAndStatus(t *testing.T) {
	s := newStream(t)
	ctx := testCtx(t)
	s.exec(`INSERT INTO t VALUES (1, '2024-01-02 03:04:05.5+02', 0.1, '\x00ff', '1 day 2 hours')`)
	ins := s.nextInsert()

	// pgoutput's text equals COPY's for the same row: one text form.
	copied := s.copyRows("", s.tbl)
	for i, v := range ins.values {
		if copied[0][i] == nil || *copied[0][i] != v {
			t.Errorf("column %s: stream %q, copy %v", s.tbl.Columns[i].Name, v, show(copied))
		}
	}
	if ins.values[1] != "2024-01-02 01:04:05.5+00" {
		t.Errorf("timestamptz in the stream = %q", ins.values[1])
	}
	if ins.endLSN <= s.start {
		t.Fatalf("commit end %s not after the consistent point %s", ins.endLSN, s.start)
	}

	// A status update asking for a reply gets a keepalive at once.
	if err := s.r.SendStatus(ctx, ins.endLSN, true); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := s.receive()
		if err != nil {
			t.Fatalf("waiting for keepalive: %v", err)
		}
		if m.Kind == Keepalive {
			if m.ServerWALEnd < ins.endLSN || m.ServerTime.IsZero() {
				t.Errorf("keepalive = %+v", m)
			}
			break
		}
	}
	// confirmed_flush_lsn moves to exactly the reported position.
	waitFor(t, "confirmed_flush_lsn", func() bool {
		info, err := s.db.Slot(ctx, s.slot)
		return err == nil && info.ConfirmedFlushLSN == ins.endLSN
	})
}

func TestStreamLargeTransaction(t *testing.T) {
	s := newStream(t)
	// Far above logical_decoding_work_mem (64kB): streamed in chunks.
	s.exec(`INSERT INTO t SELECT g, now(), g, NULL, NULL FROM generate_series(1, 5000) g`)
	sawStream := false
	for !sawStream {
		m, err := s.receive()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if m.Kind == XLogData && len(m.Data) > 0 && m.Data[0] == 'S' {
			sawStream = true
		}
	}
}

func TestReceiveDeadlineKeepsConnection(t *testing.T) {
	s := newStream(t)
	ctx := testCtx(t)
	var err error
	for i := 0; i < 100 && err == nil; i++ { // drain what is pending, until a timeout
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = s.r.Receive(short)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if !IsTransient(err) {
		t.Errorf("a receive timeout is not transient: %v", err)
	}
	// Once more, then prove the connection still streams and accepts status.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.r.Receive(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second timeout: %v", err)
	}
	if err := s.r.SendStatus(ctx, s.start, false); err != nil {
		t.Fatalf("status after timeouts: %v", err)
	}
	s.exec(`INSERT INTO t (id) VALUES (7)`)
	if ins := s.nextInsert(); ins.values[0] != "7" {
		t.Errorf("after timeouts: insert %q", ins.values)
	}
}

func TestStartReplicationMissingSlot(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	if err := e.db.EnsurePublication(ctx, "pub", []cdc.TableID{{Schema: "public", Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	r := e.replConn()
	err := r.StartReplication(ctx, "no_such_slot", "pub", 0)
	if err == nil {
		// The server may report it on the first read instead.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = r.Receive(rctx)
		cancel()
	}
	if !errors.Is(err, cdc.ErrSlotLost) {
		t.Fatalf("err = %v, want ErrSlotLost", err)
	}
	if !strings.Contains(err.Error(), `"no_such_slot"`) || cdc.HintOf(err) == "" || IsTransient(err) {
		t.Errorf("err = %v, hint %q, transient %t", err, cdc.HintOf(err), IsTransient(err))
	}
}

func TestStreamMissingPublicationIsNotSlotLoss(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	r := e.replConn()
	cp, _, err := r.CreateSlot(ctx, "nopub_slot")
	if err != nil {
		t.Fatal(err)
	}
	err = r.StartReplication(ctx, "nopub_slot", "no_such_pub", cp)
	if err == nil {
		e.exec(`INSERT INTO t VALUES (1)`)
		for err == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = r.Receive(rctx)
			cancel()
		}
	}
	if errors.Is(err, cdc.ErrSlotLost) || !strings.Contains(err.Error(), "no_such_pub") {
		t.Fatalf("err = %v, want a missing-publication error that is not slot loss", err)
	}
}

func TestWalsenderTerminatedIsTransient(t *testing.T) {
	s := newStream(t)
	ctx := testCtx(t)
	var pid int32
	waitFor(t, "slot active", func() bool {
		info, err := s.db.Slot(ctx, s.slot)
		pid = info.ActivePID
		return err == nil && info.Active
	})
	s.exec(fmt.Sprintf(`SELECT pg_terminate_backend(%d)`, pid))
	var err error
	for err == nil {
		_, err = s.receive()
	}
	if !IsTransient(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v: want a transient error that is not a timeout", err)
	}
}

func TestConnectErrors(t *testing.T) {
	ctx := testCtx(t)
	_, err := Connect(ctx, StaticURL("postgres://user:s3cret@127.0.0.1:notaport/db"))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad URL: %v", err)
	}
	_, err = ConnectReplication(ctx, StaticURL("postgres://user:s3cret@127.0.0.1:notaport/db"))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad URL (replication): %v", err)
	}

	// Nothing listens on port 1: transient, and no password in the message.
	_, err = Connect(ctx, StaticURL("postgres://user:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"))
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1:1/db") || !IsTransient(err) {
		t.Errorf("closed port: %v (transient %t)", err, IsTransient(err))
	}

	// A database that does not exist is not transient.
	e := newEnv(t)
	url := strings.Replace(e.url, "/"+e.queryString("SELECT current_database()")+"?", "/no_such_db?", 1)
	_, err = Connect(ctx, StaticURL(url))
	if err == nil || IsTransient(err) {
		t.Errorf("missing database: %v (transient %t)", err, IsTransient(err))
	}
	_, err = ConnectReplication(ctx, StaticURL(url))
	if err == nil || IsTransient(err) {
		t.Errorf("missing database (replication): %v (transient %t)", err, IsTransient(err))
	}
}
