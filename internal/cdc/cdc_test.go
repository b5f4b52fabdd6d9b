package cdc

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LSN
		ok   bool
	}{
		{"0/0", 0, true},
		{"0/16B3748", 0x16B3748, true},
		{"16/B374D848", 0x16_B374D848, true},
		{"FFFFFFFF/FFFFFFFF", ^LSN(0), true},
		{"", 0, false},
		{"0", 0, false},
		{"/1", 0, false},
		{"1/", 0, false},
		{"G/1", 0, false},
		{"100000000/0", 0, false},
		{"1/2/3", 0, false},
	} {
		got, err := ParseLSN(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLSN(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in && tc.in != "0/0" {
			t.Errorf("LSN(%q).String() = %q", tc.in, got.String())
		}
	}
}

func FuzzParseLSN(f *testing.F) {
	for _, s := range []string{"0/0", "16/B374D848", "x", "1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLSN(s)
		if err != nil {
			return
		}
		back, err := ParseLSN(l.String())
		if err != nil || back != l {
			t.Fatalf("round trip of %q: %v %v", s, back, err)
		}
	})
}

func TestLSNText(t *testing.T) {
	var l LSN
	if err := l.UnmarshalText([]byte("1/A")); err != nil || l != 1<<32|10 {
		t.Fatalf("UnmarshalText: %v %v", l, err)
	}
	b, _ := l.MarshalText()
	if string(b) != "1/A" {
		t.Fatalf("MarshalText: %s", b)
	}
}

func TestExtendXID(t *testing.T) {
	const epoch = 5 << 32
	for _, tc := range []struct {
		ref  XID
		x    uint32
		want XID
	}{
		{ref: 1000, x: 1005, want: 1005},
		{ref: 1000, x: 900, want: 900},
		{ref: epoch | 10, x: 20, want: epoch | 20},
		// Just after a wrap, an xid from before it belongs to the previous epoch.
		{ref: epoch | 10, x: 0xFFFFFFF0, want: (4 << 32) | 0xFFFFFFF0},
		// Just before a wrap, a small xid belongs to the next epoch.
		{ref: epoch | 0xFFFFFFF0, x: 5, want: (6 << 32) | 5},
		// Epoch 0 has nothing below zero.
		{ref: 3, x: 0xFFFFFFF0, want: 0xFFFFFFF0},
	} {
		if got := ExtendXID(tc.ref, tc.x); got != tc.want {
			t.Errorf("ExtendXID(%#x, %#x) = %#x, want %#x", tc.ref, tc.x, got, tc.want)
		}
	}
}

func TestParseTableID(t *testing.T) {
	if id, err := ParseTableID("public.orders"); err != nil || id != (TableID{"public", "orders"}) {
		t.Fatalf("got %v %v", id, err)
	}
	for _, bad := range []string{"orders", ".orders", "public.", "a.b.c"} {
		if _, err := ParseTableID(bad); err == nil {
			t.Errorf("ParseTableID(%q) accepted", bad)
		}
	}
}

func TestIsTransient(t *testing.T) {
	base := errors.New("connection reset")
	sentinel := NewTransient("sink request failed")
	terminal := &Error{Class: ErrSlotLost, Msg: "slot s", Cause: Transient(base)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"says nothing", base, false},
		{"marked", Transient(base), true},
		{"marked, wrapped", fmt.Errorf("receive: %w", Transient(base)), true},
		{"sentinel, wrapped", fmt.Errorf("upload: %w: %w", sentinel, base), true},
		{"classified error", &Error{Class: ErrSlotLost, Msg: "slot s"}, false},
		{"classified error over a transient cause", terminal, false},
		{"transient over a classified error", Transient(terminal), false},
		{"joined with a terminal", errors.Join(Transient(base), &Error{Class: ErrData, Msg: "x"}), false},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", sentinel), sentinel) || errors.Is(NewTransient("sink request failed"), sentinel) {
		t.Error("a transient sentinel is matched by identity")
	}
	if !errors.Is(terminal, ErrSlotLost) || !errors.Is(terminal, base) || HintOf(terminal) != "" {
		t.Error("an Error keeps its class and its cause")
	}
	if got := terminal.Error(); got != "slot s: connection reset: replication slot lost" {
		t.Errorf("Error() = %q", got)
	}
}
