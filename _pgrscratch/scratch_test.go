package scratch

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

func TestCompare(t *testing.T) {
	url := os.Getenv("URL")
	sink := os.Getenv("SINK")
	data, err := os.ReadFile(filepath.Join(sink, manifest.Key))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m.Tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Run(k, func(t *testing.T) {
			mt := m.Tables[k]
			cols, got := sinktest.MergedRows(t, sink, k)
			order := mt.PrimaryKey
			if len(order) == 0 {
				order = cols
			}
			want := sinktest.SourceRows(t, url, k, cols, order)
			if !sinktest.AssertSameRows(t, want, got, cols) {
				t.Errorf("differs")
			}
			if mt.Base != nil && len(mt.Base.Adjusted) > 0 {
				t.Logf("base adjusted %v", mt.Base.Adjusted)
			}
		})
	}
}
