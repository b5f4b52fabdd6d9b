package cdc

import (
	"slices"
	"strings"
	"testing"
)

func TestSnapshotVisible(t *testing.T) {
	s := Snapshot{Xmin: 100, Xmax: 110, Xip: []XID{100, 104, 107}}
	for _, tc := range []struct {
		xid  XID
		want bool
	}{
		{0, true},    // initial snapshot rows
		{1, true},    // long ended
		{99, true},   // just below xmin
		{100, false}, // xmin itself, in progress
		{101, true},  // ended between xmin and xmax
		{104, false},
		{105, true},
		{107, false},
		{109, true},  // just below xmax, ended
		{110, false}, // xmax itself: had not ended
		{111, false},
		{1 << 40, false},
	} {
		if got := s.Visible(tc.xid); got != tc.want {
			t.Errorf("%s: Visible(%d) = %v, want %v", s, tc.xid, got, tc.want)
		}
	}

	// No transaction in progress: xmin == xmax, everything below is visible.
	idle := Snapshot{Xmin: 50, Xmax: 50}
	for xid, want := range map[XID]bool{0: true, 49: true, 50: false, 51: false} {
		if got := idle.Visible(xid); got != want {
			t.Errorf("%s: Visible(%d) = %v, want %v", idle, xid, got, want)
		}
	}
	// xid 0 stays visible even in a snapshot whose xmin is 0 or 1.
	if !(Snapshot{}).Visible(0) {
		t.Error("the zero snapshot hides xid 0")
	}
}

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Snapshot
		text string // String() of the result; "" means in
	}{
		{in: "100:110:", want: Snapshot{Xmin: 100, Xmax: 110}},
		{in: "100:100:", want: Snapshot{Xmin: 100, Xmax: 100}},
		{in: "100:110:100,104", want: Snapshot{Xmin: 100, Xmax: 110, Xip: []XID{100, 104}}},
		// Unsorted and repeated in-progress ids are normalised.
		{in: "100:110:107,100,107", want: Snapshot{Xmin: 100, Xmax: 110, Xip: []XID{100, 107}}, text: "100:110:100,107"},
		// 64-bit ids past the first epoch wrap.
		{in: "4294967396:4294967400:4294967399", want: Snapshot{Xmin: 1<<32 + 100, Xmax: 1<<32 + 104, Xip: []XID{1<<32 + 103}}},
	} {
		got, err := ParseSnapshot(tc.in)
		if err != nil {
			t.Errorf("ParseSnapshot(%q): %v", tc.in, err)
			continue
		}
		if got.Xmin != tc.want.Xmin || got.Xmax != tc.want.Xmax || !slices.Equal(got.Xip, tc.want.Xip) {
			t.Errorf("ParseSnapshot(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		text := tc.text
		if text == "" {
			text = tc.in
		}
		if got.String() != text {
			t.Errorf("ParseSnapshot(%q).String() = %q, want %q", tc.in, got.String(), text)
		}
	}
}

func TestParseSnapshotErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "want xmin:xmax:xip"},
		{"100:110", "want xmin:xmax:xip"},
		{"100:110:1:2", "want xmin:xmax:xip"},
		{":110:", "xmin"},
		{"x:110:", "xmin"},
		{"-1:110:", "xmin"},
		{"100::", "xmax"},
		{"100:1e3:", "xmax"},
		{"110:100:", "xmin above xmax"},
		{"100:110:,", "xip"},
		{"100:110:104,", "xip"},
		{"100:110:abc", "xip"},
		{"100:110:99", "outside [xmin, xmax)"},
		{"100:110:110", "outside [xmin, xmax)"},
		{"100:100:100", "outside [xmin, xmax)"},
		{"18446744073709551616:1:", "xmin"}, // beyond 64 bits
	} {
		_, err := ParseSnapshot(tc.in)
		if err == nil {
			t.Errorf("ParseSnapshot(%q) succeeded; want an error about %s", tc.in, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSnapshot(%q) = %v; want it to mention %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"100:110:", "100:110:100,104", "1:1:", "x", "5:3:", "1:9:4,4,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSnapshot(text)
		if err != nil {
			return
		}
		if s.Xmin > s.Xmax || !slices.IsSorted(s.Xip) {
			t.Fatalf("ParseSnapshot(%q) = %+v: not normalised", text, s)
		}
		for _, x := range s.Xip {
			if x < s.Xmin || x >= s.Xmax || s.Visible(x) && x != 0 {
				t.Fatalf("ParseSnapshot(%q): in-progress %d misplaced or visible", text, x)
			}
		}
		back, err := ParseSnapshot(s.String())
		if err != nil || back.String() != s.String() {
			t.Fatalf("round trip of %q: %v %v", text, back, err)
		}
	})
}
