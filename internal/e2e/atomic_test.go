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
	// Rows per transaction in the final state: the reference for each version.
	wantPerXID := rowsPerXID(t, e.sink, final)
	if len(wantPerXID) != txns {
		t.Fatalf("the final manifest holds %d transactions, want %d", len(wantPerXID), txns)
	}
	for _, data := range versions {
		m, err := manifest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		for xid, n := range rowsPerXID(t, e.sink, m) {
			if n != wantPerXID[xid] {
				t.Errorf("manifest epoch %d holds %d of the %d rows of transaction %d", m.Epoch, n, wantPerXID[xid], xid)
			}
		}
	}
	assertSinkEqualsSource(t, e, "public.a", "public.b", "public.c")
}

// rowsPerXID counts the change rows of each transaction across tables a, b
// and c in manifest m.
func rowsPerXID(t *testing.T, root string, m *manifest.Manifest) map[int64]int64 {
	t.Helper()
	var parts []string
	for _, tbl := range []string{"public.a", "public.b", "public.c"} {
		if f := deltaFiles(root, m, tbl); f != "" {
			parts = append(parts, "SELECT __xid FROM read_parquet("+f+")")
		}
	}
	out := map[int64]int64{}
	if len(parts) == 0 {
		return out
	}
	for _, r := range duck(t, "SELECT __xid, count(*) FROM ("+strings.Join(parts, " UNION ALL ")+") GROUP BY 1") {
		out[asInt(t, r[0])] = asInt(t, r[1])
	}
	return out
}
