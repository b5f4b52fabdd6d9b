package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestResnapshotUnderWrites: pg-cdc resnapshot --table while writes run on
// that table. A watcher reads every manifest version it can catch during
// the run: each names, for the table, only files of the table's current
// generation, and they exist (readers never see the half-built one). After
// the switch the table is at the next generation, the old one's files are
// garbage, the merged state equals the source and the slot was never
// confirmed past the manifest.
func TestResnapshotUnderWrites(t *testing.T) {
	// Small epochs (flush.max_rows) so the new generation grows over many
	// manifest versions while readers keep the old one.
	e := newEnv(t, envOptions{maxRows: 1500, extraYAML: "backfill:\n  chunk_rows: 500\n  discover_interval_sec: 0\n"})
	e.exec(`CREATE TABLE acct (id int PRIMARY KEY, v int NOT NULL, pad text)`)
	e.exec(`INSERT INTO acct SELECT g, 0, CASE WHEN g % 30 = 0 THEN
		(SELECT string_agg(md5(g::text || '-' || i::text), '') FROM generate_series(1, 80) i) END
		FROM generate_series(1, 15000) g`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(30 * time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		writeErr = writeAcct(ctx, e.url)
	}()
	w := watchGenerations(ctx, e, "public.acct")

	code, out := e.run("resnapshot", "--table", "public.acct", "--wait", "80s")
	if code != 0 || !strings.Contains(out, "switched to generation g0002") {
		t.Fatalf("resnapshot exited %d:\n%s", code, out)
	}
	// The writes go on past the switch, into the new generation.
	e.waitProgress(e.manifest().EndLSN, 30*time.Second)
	cancel()
	wg.Wait()
	if writeErr != nil && !errors.Is(writeErr, context.Canceled) {
		t.Fatalf("writes: %v", writeErr)
	}
	e.waitCaughtUp(60 * time.Second)
	// verify, an independent reader of the new generation against the
	// source under one snapshot, while start runs.
	if code, out := e.run("verify", "--table", "public.acct"); code != 0 {
		t.Errorf("verify after the resnapshot exited %d:\n%s", code, out)
	}
	d.stop()
	s.check()
	versions, seen, building, problems := w.stop()
	for _, p := range problems {
		t.Error(p)
	}
	if !seen["g0001"] || !seen["g0002"] || building < 3 {
		t.Errorf("the watcher saw %d manifest versions (%d with the new generation half built), generations %v: it proves little", versions, building, seen)
	}
	m := e.manifest()
	mt := m.Tables["public.acct"]
	if mt.Generation != "g0002" || mt.Resnapshot != nil || mt.Base != nil || !mt.Snapshot.Complete() {
		t.Errorf("after the resnapshot: generation %s, resnapshot %+v, base %+v, snapshot %+v", mt.Generation, mt.Resnapshot, mt.Base, mt.Snapshot)
	}
	old := 0
	for _, g := range m.Garbage {
		if strings.Contains(g.Path, "/g0001/") {
			old++
		}
	}
	if old == 0 {
		t.Error("the old generation's files are not in the garbage list")
	}
	t.Logf("resnapshot: %d rows copied in %d chunks; %d manifest versions watched, %d of them with the new generation half built; %d old files retired",
		mt.Snapshot.RowsCopied, mt.Snapshot.Chunks, versions, building, old)
	assertSinkEqualsSource(t, e, "public.acct")
}

// writeAcct updates, deletes and inserts random keys of acct until ctx ends.
func writeAcct(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(7, 7))
	for ctx.Err() == nil {
		id := 1 + rng.IntN(16000)
		var sql string
		switch r := rng.IntN(10); {
		case r < 6:
			sql = `UPDATE acct SET v = v + 1 WHERE id = $1`
		case r < 8:
			sql = `DELETE FROM acct WHERE id = $1`
		default:
			sql = `INSERT INTO acct VALUES ($1, 1, NULL) ON CONFLICT (id) DO UPDATE SET v = acct.v + 10`
		}
		if _, err := conn.Exec(ctx, sql, id); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// generationWatcher reads the manifest in a loop and checks, for each
// version it catches, that the table names only files of its current
// generation and that they exist.
type generationWatcher struct {
	cancel   context.CancelFunc
	done     chan struct{}
	versions int
	building int // versions with the next generation half built
	seen     map[string]bool
	problems []string
}

func watchGenerations(ctx context.Context, e *env, table string) *generationWatcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &generationWatcher{cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(w.done)
		var last []byte
		for ctx.Err() == nil {
			data, err := os.ReadFile(filepath.Join(e.sink, manifest.Key))
			if err == nil && string(data) != string(last) {
				last = data
				w.check(e, table, data)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return w
}

func (w *generationWatcher) check(e *env, table string, data []byte) {
	m, err := manifest.Decode(data)
	if err != nil {
		w.problems = append(w.problems, err.Error())
		return
	}
	w.versions++
	mt := m.Tables[table]
	if mt == nil {
		return
	}
	w.seen[mt.Generation] = true
	if r := mt.Resnapshot; r != nil && len(r.Deltas) > 0 {
		w.building++
	}
	for _, f := range mt.Files() {
		if !strings.Contains(f.Path, "/"+mt.Generation+"/") {
			w.problems = append(w.problems, fmt.Sprintf("epoch %d: table of generation %s names %s", m.Epoch, mt.Generation, f.Path))
		}
		if _, err := os.Stat(filepath.Join(e.sink, f.Path)); err != nil {
			w.problems = append(w.problems, fmt.Sprintf("epoch %d: %v", m.Epoch, err))
		}
	}
}

func (w *generationWatcher) stop() (versions int, seen map[string]bool, building int, problems []string) {
	w.cancel()
	<-w.done
	return w.versions, w.seen, w.building, w.problems
}
