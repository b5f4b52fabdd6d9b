package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestEveryManifestVersionHoldsWholeTransactions runs transactions that each
// touch three tables, with a tiny max_rows so epochs are cut often, saves
// every manifest version it sees while they run, and checks that each
// version holds every transaction whole or not at all.
func TestEveryManifestVersionHoldsWholeTransactions(t *testing.T) {
	e := newEnv(t, envOptions{maxRows: 7})
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, txn int); CREATE TABLE b (id int PRIMARY KEY, txn int); CREATE TABLE c (id int PRIMARY KEY, txn int)`)
	e.mustRun("init")
	s := e.startSampler()

	// Collect manifest versions as they are written.
	var (
		mu       sync.Mutex
		versions = map[string][]byte{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			data, err := os.ReadFile(filepath.Join(e.sink, manifest.Key))
			if err != nil {
				continue
			}
			mu.Lock()
			versions[string(data)] = data
			mu.Unlock()
		}
	}()

	d := e.start()
	ctx := context.Background()
	const txns = 300
	for i := 1; i <= txns; i++ {
		err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
			for _, tbl := range []string{"a", "b", "c"} {
				n := 1 + i%3 // 1 to 3 rows per table: transactions differ in size
				for j := 0; j < n; j++ {
					if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES ($1, $2)", tbl), i*10+j, i); err != nil {
						return err
					}
				}
			}
			if i%5 == 0 {
				// Updates spread over the three tables in the same transaction.
				for _, tbl := range []string{"a", "b", "c"} {
					if _, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s SET txn = -txn WHERE id = $1", tbl), (i-1)*10); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.waitCaughtUp(90 * time.Second)
	d.stop()
	close(stop)
	wg.Wait()
	s.check()

	final := e.manifest()
	if final.Epoch < 10 {
		t.Fatalf("only %d epochs were cut; the test needs many cuts to mean anything", final.Epoch)
	}
	t.Logf("%d epochs, %d manifest versions observed", final.Epoch, len(versions))
	if len(versions) < 5 {
		t.Fatalf("observed only %d manifest versions", len(versions))
	}
	var ms []*manifest.Manifest
	for _, data := range versions {
		m, err := manifest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	// Every file any version names is read once, by DuckDB; a version's
	// rows per transaction are the sums over its files.
	perFile := rowsPerXIDByFile(t, e.sink, append(ms, final))
	// Rows per transaction in the final state: the reference for each version.
	wantPerXID := rowsPerXID(e.sink, final, perFile)
	if len(wantPerXID) != txns {
		t.Fatalf("the final manifest holds %d transactions, want %d", len(wantPerXID), txns)
	}
	for _, m := range ms {
		for xid, n := range rowsPerXID(e.sink, m, perFile) {
			if n != wantPerXID[xid] {
				t.Errorf("manifest epoch %d holds %d of the %d rows of transaction %d", m.Epoch, n, wantPerXID[xid], xid)
			}
		}
	}
	assertSinkEqualsSource(t, e, "public.a", "public.b", "public.c")
}

// atomicTables are the tables TestEveryManifestVersionHoldsWholeTransactions
// writes.
var atomicTables = []string{"public.a", "public.b", "public.c"}

// rowsPerXIDByFile counts, with DuckDB, the change rows of each transaction
// in every delta file of atomicTables that one of the manifests names.
func rowsPerXIDByFile(t *testing.T, root string, ms []*manifest.Manifest) map[string]map[int64]int64 {
	t.Helper()
	paths := map[string]bool{}
	for _, m := range ms {
		for _, tbl := range atomicTables {
			for _, d := range m.Tables[tbl].Deltas {
				for _, f := range d.Files {
					paths[filepath.Join(root, f.Path)] = true
				}
			}
		}
	}
	out := map[string]map[int64]int64{}
	if len(paths) == 0 {
		return out
	}
	quoted := make([]string, 0, len(paths))
	for p := range paths {
		quoted = append(quoted, "'"+p+"'")
	}
	for _, r := range duck(t, "SELECT filename, __xid, count(*) FROM read_parquet(["+strings.Join(quoted, ", ")+"], filename = true) GROUP BY 1, 2") {
		file := r[0].(string)
		if out[file] == nil {
			out[file] = map[int64]int64{}
		}
		out[file][asInt(t, r[1])] = asInt(t, r[2])
	}
	if len(out) != len(paths) {
		t.Fatalf("DuckDB read %d of the %d delta files", len(out), len(paths))
	}
	return out
}

// rowsPerXID counts the change rows of each transaction across
// atomicTables in manifest m, from the per-file counts.
func rowsPerXID(root string, m *manifest.Manifest, perFile map[string]map[int64]int64) map[int64]int64 {
	out := map[int64]int64{}
	for _, tbl := range atomicTables {
		for _, d := range m.Tables[tbl].Deltas {
			for _, f := range d.Files {
				for xid, n := range perFile[filepath.Join(root, f.Path)] {
					out[xid] += n
				}
			}
		}
	}
	return out
}
