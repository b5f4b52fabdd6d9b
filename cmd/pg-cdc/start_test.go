package main

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/config"
)

// A published state table bounds the major compactions' clock; without a
// catalog compaction.major_interval stands alone.
func TestMajorInterval(t *testing.T) {
	for _, c := range []struct {
		catalog      string
		major, state time.Duration
		want         time.Duration
	}{
		{config.CatalogNone, 0, time.Hour, 0},
		{config.CatalogNone, 6 * time.Hour, time.Hour, 6 * time.Hour},
		{"iceberg", 0, time.Hour, time.Hour},
		{"iceberg", 6 * time.Hour, time.Hour, time.Hour},
		{"iceberg", 30 * time.Minute, time.Hour, 30 * time.Minute},
		{"iceberg", 6 * time.Hour, 0, 6 * time.Hour},
	} {
		cfg := config.Default()
		cfg.Catalog.Type = c.catalog
		cfg.Compaction.MajorInterval, cfg.Catalog.Iceberg.StateMaxAge = c.major, c.state
		if got := majorInterval(cfg); got != c.want {
			t.Errorf("catalog %q, major_interval %s, state_max_age %s: %s, want %s", c.catalog, c.major, c.state, got, c.want)
		}
	}
}
