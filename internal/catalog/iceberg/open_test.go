package iceberg

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
)

func TestOpenKinds(t *testing.T) {
	dir := t.TempDir()
	sql, closeSQL, err := Open(OpenOptions{Kind: KindSQL, URI: filepath.Join(dir, "c.db"), Warehouse: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := sql.Load(context.Background(), catalog.Ident{Namespace: []string{"ns"}, Name: "t"}); ok || err != nil {
		t.Errorf("Load of a table never created: ok %v, err %v", ok, err)
	}
	if err := closeSQL(); err != nil {
		t.Fatal(err)
	}
	// A REST catalog that is not there is not an error until it is used.
	rest, closeREST, err := Open(OpenOptions{Kind: KindREST, URI: "http://127.0.0.1:1", Warehouse: dir})
	if err != nil {
		t.Fatalf("REST open: %v", err)
	}
	defer closeREST()
	if _, _, err := rest.Load(context.Background(), catalog.Ident{Namespace: []string{"ns"}, Name: "t"}); err == nil {
		t.Error("Load on a REST catalog nobody serves: no error")
	}
	if _, _, err := Open(OpenOptions{Kind: "hive", Warehouse: dir}); err == nil || !strings.Contains(err.Error(), `catalog.iceberg.type "hive"`) {
		t.Errorf("unknown kind: %v", err)
	}
}
