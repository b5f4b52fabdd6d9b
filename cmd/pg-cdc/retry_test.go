package main

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/config"
)

func TestRetryWait(t *testing.T) {
	def := config.Default().Retry
	var got []time.Duration
	for attempt := 1; attempt <= def.MaxAttempts; attempt++ {
		got = append(got, retryWait(def, attempt))
	}
	s := time.Second
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s}
	if len(got) != len(want) {
		t.Fatalf("%d waits, want %d", len(got), len(want))
	}
	var total time.Duration
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait before retry %d = %v, want %v", i+1, got[i], want[i])
		}
		total += got[i]
	}
	// docs/configuration.md and docs/exit-codes.md say "about 3 minutes".
	if total != 181*time.Second {
		t.Errorf("the default budget waits %v in all, want 3m1s", total)
	}
	// No overflow however long the streak, and never past the cap.
	huge := config.RetryConfig{InitialBackoff: time.Hour, MaxBackoff: 1000 * time.Hour}
	for _, attempt := range []int{1, 10, 64, 1000} {
		if w := retryWait(huge, attempt); w <= 0 || w > huge.MaxBackoff {
			t.Errorf("retryWait(%+v, %d) = %v", huge, attempt, w)
		}
	}
}
