package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestIsTransient(t *testing.T) {
	slotLost := slotError(&pgconn.PgError{Code: "42704", Message: `replication slot "s" does not exist`}, "s", "srv", true)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"EOF", io.EOF, true},
		{"wrapped unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"connection refused", fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"net closed", net.ErrClosed, true},
		{"pgconn closed", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"replication ended", fmt.Errorf("slot: %w", ErrReplicationEnded), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"protocol violation class 08", &pgconn.PgError{Code: "08P01"}, true},
		{"canceled", context.Canceled, false},
		{"wrapped canceled", fmt.Errorf("receive: %w", context.Canceled), false},
		{"slot lost", slotLost, false},
		{"wrapped slot lost", fmt.Errorf("stream: %w", slotLost), false},
		{"bare slot lost class", cdc.ErrSlotLost, false},
		{"preflight", &cdc.Error{Class: ErrPreflight, Msg: "x"}, false},
		{"bad password", &pgconn.PgError{Code: "28P01"}, false},
		{"no such role", &pgconn.PgError{Code: "28000"}, false},
		{"permission denied", &pgconn.PgError{Code: "42501"}, false},
		{"no such table", &pgconn.PgError{Code: "42P01"}, false},
		{"query canceled by user", &pgconn.PgError{Code: "57014"}, false},
		{"plain error", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsTransient(tt.err); got != tt.want {
				t.Errorf("IsTransient(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestSlotError(t *testing.T) {
	tests := []struct {
		name        string
		pgErr       pgconn.PgError
		duringStart bool
		lost        bool
	}{
		{"missing slot at start", pgconn.PgError{Code: "42704", Message: `replication slot "s" does not exist`}, true, true},
		{"missing slot later", pgconn.PgError{Code: "42704", Message: `replication slot "s" does not exist`}, false, true},
		{"missing publication while decoding", pgconn.PgError{Code: "42704", Message: `publication "p" does not exist`}, false, false},
		{"invalidated", pgconn.PgError{Code: "55000", Message: `can no longer get changes from replication slot "s"`,
			Detail: "This slot has been invalidated because it exceeded the maximum reserved size."}, true, true},
		{"other prerequisite", pgconn.PgError{Code: "55000", Message: `replication slot "s" was not created in this database`}, true, false},
		{"wal removed", pgconn.PgError{Code: "58P01", Message: "requested WAL segment 000000010000000000000001 has already been removed"}, false, true},
		{"active elsewhere", pgconn.PgError{Code: "55006", Message: `replication slot "s" is active for PID 7`}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := slotError(&tt.pgErr, "s", "srv", tt.duringStart)
			if got := errors.Is(err, cdc.ErrSlotLost); got != tt.lost {
				t.Fatalf("lost = %t (%v), want %t", got, err, tt.lost)
			}
			if tt.lost && cdc.HintOf(err) == "" {
				t.Error("no operator hint")
			}
		})
	}
}

func TestParseCopyData(t *testing.T) {
	x := []byte{'w'}
	x = binary.BigEndian.AppendUint64(x, 0x1_0000_0010)
	x = binary.BigEndian.AppendUint64(x, 0x1_0000_0020)
	x = binary.BigEndian.AppendUint64(x, 0) // 2000-01-01 00:00:00 UTC
	x = append(x, "BEGIN"...)
	m, err := parseCopyData(x)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != XLogData || m.WALStart != 0x1_0000_0010 || m.ServerWALEnd != 0x1_0000_0020 ||
		string(m.Data) != "BEGIN" || m.ServerTime.Year() != 2000 || m.ServerTime.Location().String() != "UTC" {
		t.Errorf("XLogData = %+v", m)
	}

	k := []byte{'k'}
	k = binary.BigEndian.AppendUint64(k, 0x30)
	k = binary.BigEndian.AppendUint64(k, 0)
	k = append(k, 1)
	m, err = parseCopyData(k)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != Keepalive || m.ServerWALEnd != 0x30 || !m.ReplyRequested {
		t.Errorf("keepalive = %+v", m)
	}

	for _, bad := range [][]byte{nil, {'w'}, x[:20], {'k', 1, 2}, k[:17], {'z', 0}} {
		if _, err := parseCopyData(bad); err == nil {
			t.Errorf("parseCopyData(%q): no error", bad)
		}
	}
}

func TestValidNames(t *testing.T) {
	for _, ok := range []string{"s", "pg_cdc_slot_1", "a23456789012345678901234567890123456789012345678901234567890123"} {
		if err := validSlotName(ok); err != nil {
			t.Errorf("validSlotName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Slot", "a-b", "a b", "x; DROP", "a234567890123456789012345678901234567890123456789012345678901234"} {
		if err := validSlotName(bad); err == nil {
			t.Errorf("validSlotName(%q): no error", bad)
		}
	}
	for _, ok := range []string{"", "00000003-0000001B-1"} {
		if err := validSnapshotName(ok); err != nil {
			t.Errorf("validSnapshotName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"x'; DROP TABLE t; --", "0000 0003"} {
		if err := validSnapshotName(bad); err == nil {
			t.Errorf("validSnapshotName(%q): no error", bad)
		}
	}
}

func TestCheckTables(t *testing.T) {
	tables := []*cdc.Table{
		{ID: cdc.TableID{Schema: "public", Name: "ok"}, PrimaryKey: []string{"id"}, ReplicaIdentity: cdc.ReplicaIdentityDefault},
		{ID: cdc.TableID{Schema: "public", Name: "full"}, ReplicaIdentity: cdc.ReplicaIdentityFull},
		{ID: cdc.TableID{Schema: "public", Name: "log"}, ReplicaIdentity: cdc.ReplicaIdentityDefault},
		{ID: cdc.TableID{Schema: "public", Name: "n1"}, PrimaryKey: []string{"id"}, ReplicaIdentity: cdc.ReplicaIdentityNothing},
		{ID: cdc.TableID{Schema: "Odd", Name: "n 2"}, ReplicaIdentity: cdc.ReplicaIdentityNothing},
	}
	warnings, err := CheckTables(tables)
	if len(warnings) != 1 || !contains(warnings[0], "public.log", "insert-only", `ALTER TABLE "public"."log" REPLICA IDENTITY FULL`) {
		t.Errorf("warnings = %q", warnings)
	}
	if !errors.Is(err, ErrPreflight) || !contains(err.Error(), "public.n1", "Odd.n 2") {
		t.Fatalf("err = %v", err)
	}
	hint := cdc.HintOf(err)
	if !contains(hint, `ALTER TABLE "public"."n1" REPLICA IDENTITY DEFAULT`, `ALTER TABLE "Odd"."n 2" REPLICA IDENTITY FULL`) {
		t.Errorf("hint = %q", hint)
	}
	if w, err := CheckTables(tables[:2]); err != nil || len(w) != 0 {
		t.Errorf("good tables: %q, %v", w, err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestClassify: what leaves the adapter says whether it is transient, so
// a caller asks cdc.IsTransient and never this package.
func TestClassify(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"network error", reset, true},
		{"server shutting down", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"replication ended", ErrReplicationEnded, true},
		{"deadline", context.DeadlineExceeded, true},
		{"password refused", &pgconn.PgError{Code: "28P01", Message: "password authentication failed"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"stop request", context.Canceled, false},
		{"slot lost", &cdc.Error{Class: cdc.ErrSlotLost, Msg: "slot s"}, false},
	} {
		err := fmt.Errorf("read identity of db: %w", classify(c.err))
		if got := cdc.IsTransient(err); got != c.want {
			t.Errorf("%s: cdc.IsTransient = %v, want %v", c.name, got, c.want)
		}
		if !errors.Is(err, c.err) && !errors.As(err, new(*pgconn.PgError)) {
			t.Errorf("%s: the cause is lost: %v", c.name, err)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
	once := classify(reset)
	if classify(once) != once {
		t.Error("an error classified once is classified again")
	}
}
