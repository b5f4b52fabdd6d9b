package pgtest

import (
	"context"
	"errors"
	"testing"
)

// TestExtraSettings: Options.Settings are applied after the defaults, so
// they win (the benchmarks raise logical_decoding_work_mem this way), and a
// setting that is not one line is refused before anything starts.
func TestExtraSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	bad, err := StartCluster(ctx, Options{Settings: []string{"work_mem = 7MB\nfsync = on"}})
	switch {
	case errors.Is(err, ErrNoPostgres):
		skipOrFatal(t, err)
	case err == nil:
		_ = bad.Remove()
		t.Fatal("a setting with a newline was accepted")
	}
	c, err := StartCluster(ctx, Options{Settings: []string{"logical_decoding_work_mem = 64MB", "work_mem = '7MB'"}})
	if err != nil {
		skipOrFatal(t, err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	for setting, want := range map[string]string{"logical_decoding_work_mem": "64MB", "work_mem": "7MB", "fsync": "off"} {
		if got := query(t, c.URL("postgres"), "SHOW "+setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}
