package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestServeChangeFeed follows a table's change feed through pg-cdc serve
// (REST, a bearer token) page by page, storing the cursor after each page,
// while a workload of inserts, updates, key changes and deletes runs and the
// daemon is stopped and restarted, killed with SIGKILL and restarted,
// compactions fold the deltas twice and serve itself restarts. At the end
// the consumer has every committed change row exactly once, in
// (__lsn, __seq) order, and replaying them gives the source table. Then,
// with the history shortened to seconds, the first cursor ever served is
// 410 gone naming the oldest cursor, which is served.
func TestServeChangeFeed(t *testing.T) {
	waitBound(t)
	const table = "public.feed"

	token, hash := serveToken(t, "alice")
	addr := freeAddr(t)
	yaml := fmt.Sprintf(`serve:
  listen: %s
  tokens:
    alice: %q
gc:
  grace_period: 1s
history:
  retention: 1h
`, addr, hash)
	e := newEnv(t, envOptions{extraYAML: yaml})
	const seedRows = 200
	e.exec(`CREATE TABLE feed (id int PRIMARY KEY, v text, n bigint)`)
	e.exec(`INSERT INTO feed SELECT g, 'seed ' || g, g FROM generate_series(1, $1) g`, seedRows)
	e.mustRun("init")

	base := "http://" + addr
	srv := startServe(t, e, base)
	api := loadContract(t, base, token)
	checkAuthAndOpenAPI(t, api, base, token)

	s := e.startSampler()
	d := e.start()
	c := followFeed(t, api, base, token, table)
	w := startFeedWorkload(t, e.url, seedRows)

	// Each fault happens once the daemon has made part of the workload
	// durable since the last one, with the workload still running.
	progress := func() { e.waitProgress(e.manifest().EndLSN, 60*time.Second) }
	progress()
	d.stop()
	d = e.start()
	progress()
	// The consumer is held behind the first compaction: its next pages
	// must come from the versions before it, which keep the folded rows.
	held := c.pause()
	e.mustRun("compact")
	if b := e.manifest().Tables[table].Base; b == nil || b.CompactedAt == nil || !cursorBefore(t, held, endCursor(b.MaxLSN)) {
		t.Fatalf("the compaction did not fold past the held consumer's cursor %s (base %+v)", held, b)
	}
	c.resume()
	progress()
	// serve restarts between two of the consumer's pages: the stored
	// cursor goes on in the new process.
	atStop := c.pause()
	srv.stop()
	srv = startServe(t, e, base)
	c.resume()
	c.waitPages(c.pagesNow()+1, 60*time.Second)
	if atStop == "" {
		t.Fatal("the consumer had no cursor when serve stopped")
	}
	progress()
	d.kill()
	d = e.start()
	progress()
	e.mustRun("compact")
	progress()

	want := w.stop()
	e.waitCaughtUp(90 * time.Second)
	target := e.manifest().Version
	c.waitCaughtUp(target, 90*time.Second)
	got := c.stop()
	d.stop()
	s.check()

	t.Logf("workload: %d transactions, %+v; consumer: %d pages, %d change rows, %d retries (%d rate limited, %d cancelled by serve's stop)",
		want.txns, want, c.pages, len(got), c.retries, c.limited, c.cancelled)
	checkFeed(t, e, got, want)
	assertSinkEqualsSource(t, e, table)
	t.Logf("openapi: %d of the consumer's answers validated in %s", api.checked, api.spent.Round(time.Millisecond))

	// The first cursor ever served is a snapshot row's, before both
	// compactions. Once every version before the first compaction has left
	// the history (a compaction with a retention of seconds), no version
	// serves it: 410 gone, naming the oldest cursor still served.
	first := c.first
	time.Sleep(1100 * time.Millisecond)
	if code, out := e.runEnv(e.config, []string{"PGCDC_HISTORY_RETENTION=1s"}, "compact"); code != 0 {
		t.Fatalf("compact with history.retention 1s exited %d:\n%s", code, out)
	}
	resp, body := api.do(t, http.MethodGet, base, "Bearer "+token, "/v1/tables/"+table+"/changes?limit=5&after="+url.QueryEscape(first), "", true)
	status, ctype := resp.StatusCode, resp.Header.Get("Content-Type")
	if status != http.StatusGone || !strings.HasPrefix(ctype, "application/problem+json") {
		t.Fatalf("changes after the first cursor %s, past the retention: %d %s, want 410 application/problem+json:\n%s", first, status, ctype, body)
	}
	var gone struct {
		Code         string `json:"code"`
		Status       int    `json:"status"`
		OldestCursor string `json:"oldest_cursor"`
	}
	if err := json.Unmarshal(body, &gone); err != nil || gone.Code != "gone" || gone.Status != 410 || gone.OldestCursor == "" {
		t.Fatalf("410 problem %s (%v): want code gone and an oldest_cursor", body, err)
	}
	if !cursorBefore(t, first, gone.OldestCursor) {
		t.Errorf("oldest cursor %s is not after the gone cursor %s", gone.OldestCursor, first)
	}
	resp, body = api.do(t, http.MethodGet, base, "Bearer "+token, "/v1/tables/"+table+"/changes?limit=5&after="+url.QueryEscape(gone.OldestCursor), "", true)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("changes after the oldest cursor %s: %d, want 200:\n%s", gone.OldestCursor, resp.StatusCode, body)
	}
	// Every operation of the document, on a table with compactions behind
	// it, validated (after the checks above: see walkAPI).
	walkAPI(t, api, base, token, table)
	srv.stop()
}

// serveToken makes a token with pg-cdc serve token and returns it and the
// configuration's hash of it.
func serveToken(t *testing.T, name string) (string, string) {
	t.Helper()
	out, err := exec.Command(binary, "serve", "token", name).CombinedOutput()
	if err != nil {
		t.Fatalf("pg-cdc serve token: %v\n%s", err, out)
	}
	tok := regexp.MustCompile(`(?m)not stored\): (\S+)$`).FindSubmatch(out)
	hash := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(name) + `: (sha256:[0-9a-f]{64})$`).FindSubmatch(out)
	if tok == nil || hash == nil {
		t.Fatalf("pg-cdc serve token printed no token and hash:\n%s", out)
	}
	return string(tok[1]), string(hash[1])
}

// freeAddr is a loopback address nothing listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServe runs pg-cdc serve and waits until /readyz answers 200.
func startServe(t *testing.T, e *env, base string) *daemon {
	t.Helper()
	d := e.startCommand(nil, "serve")
	client := &http.Client{Timeout: 2 * time.Second}
	e.waitFor("pg-cdc serve to be ready", 60*time.Second, func() bool {
		select {
		case <-d.done:
			t.Fatalf("pg-cdc serve exited %d:\n%s", d.exitCode(), d.out.String())
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return d
}

// get sends an authenticated GET (token "" sends none) and returns the
// status, the content type and the body.
func serveGet(t *testing.T, base, token, path string) (int, string, []byte) {
	t.Helper()
	return serveGetWith(t, base, "Bearer "+token, path)
}

func serveGetWith(t *testing.T, base, authorization, path string) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// checkAuthAndOpenAPI: no token and a wrong one are 401 problems, as the
// OpenAPI document describes them; the document parses and names the paths
// the test calls.
func checkAuthAndOpenAPI(t *testing.T, api *apiContract, base, token string) {
	t.Helper()
	path := "/v1/tables/public.feed/changes?limit=1"
	for _, c := range []struct{ what, auth string }{
		{"no token", ""},
		{"a wrong token", "Bearer " + token + "x"},
		{"another scheme", "Basic " + token},
	} {
		resp, body := api.do(t, http.MethodGet, base, c.auth, path, "", false)
		status, ctype := resp.StatusCode, resp.Header.Get("Content-Type")
		if status != http.StatusUnauthorized || !strings.HasPrefix(ctype, "application/problem+json") {
			t.Errorf("%s: %d %s, want 401 application/problem+json:\n%s", c.what, status, ctype, body)
		}
		if strings.Contains(string(body), token) {
			t.Errorf("%s: the answer echoes the token:\n%s", c.what, body)
		}
	}
	if status, _, body := serveGet(t, base, token, path); status != http.StatusOK {
		t.Fatalf("with alice's token: %d, want 200:\n%s", status, body)
	}
	status, _, body := serveGet(t, base, token, "/v1/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d:\n%s", status, body)
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/v1/openapi.json does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	for _, p := range []string{"/v1/tables/{table}/changes", "/v1/openapi.json"} {
		var ops map[string]json.RawMessage
		if err := json.Unmarshal(doc.Paths[p], &ops); err != nil || ops["get"] == nil {
			t.Errorf("/v1/openapi.json has no GET %s", p)
		}
	}
}

// feedChange is one change row as the feed serves it.
type feedChange struct {
	Cursor string
	Op     string
	LSN    string
	Seq    int64
	raw    map[string]any // the row, numbers as json.Number
}

// feedConsumer follows one table's change feed.
type feedConsumer struct {
	t      *testing.T
	api    *apiContract // validates every answer
	cancel context.CancelFunc
	done   chan struct{}
	hold   sync.Mutex // held around each page; pause takes it

	mu          sync.Mutex
	changes     []feedChange
	cursor      string
	first       string // the first cursor a page returned
	lastVersion uint64
	lastMore    bool
	pages       int
	retries     int
	limited     int
	cancelled   int // 503s without Retry-After (serve stopping)
	err         error
}

// followFeed starts a consumer of table's change feed from the start: it
// asks for a page after its cursor, keeps the rows, stores the page's
// next_cursor, and asks again (at once when more is true). A refused
// connection (serve restarting), a 429 or a 503 is retried with the same
// cursor; any other failure, or an answer the OpenAPI document does not
// describe, stops it.
func followFeed(t *testing.T, api *apiContract, base, token, table string) *feedConsumer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &feedConsumer{t: t, api: api, cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			c.hold.Lock()
			c.mu.Lock()
			after := c.cursor
			c.mu.Unlock()
			wait, err := c.page(ctx, client, base+"/v1/tables/"+table+"/changes?limit=50&after="+url.QueryEscape(after), token)
			c.hold.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					c.mu.Lock()
					c.err = err
					c.mu.Unlock()
				}
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

// page reads one page and returns how long to wait before the next.
func (c *feedConsumer) page(ctx context.Context, client *http.Client, u, token string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		c.mu.Lock()
		c.retries++
		c.mu.Unlock()
		return 100 * time.Millisecond, nil // serve is restarting
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.mu.Lock()
		c.retries++
		c.mu.Unlock()
		return 100 * time.Millisecond, nil // serve stopped mid-answer
	}
	if err := c.api.check(req, nil, resp, body, true); err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		c.mu.Lock()
		c.retries++
		if resp.StatusCode == http.StatusTooManyRequests {
			c.limited++
		}
		c.mu.Unlock()
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, nil
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			return 0, fmt.Errorf("429 without a Retry-After in seconds (%q): %s", resp.Header.Get("Retry-After"), body)
		}
		// serve cancels the requests running when it is told to stop
		// (a 503 without Retry-After): the same cursor is asked again.
		c.mu.Lock()
		c.cancelled++
		c.mu.Unlock()
		return 100 * time.Millisecond, nil
	default:
		return 0, fmt.Errorf("GET %s: %d: %s", u, resp.StatusCode, body)
	}
	var p struct {
		Version    uint64            `json:"version"`
		Changes    []json.RawMessage `json:"changes"`
		NextCursor string            `json:"next_cursor"`
		More       bool              `json:"more"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return 0, fmt.Errorf("GET %s: %v: %s", u, err, body)
	}
	page := make([]feedChange, len(p.Changes))
	for i, raw := range p.Changes {
		var ch struct {
			Cursor string         `json:"cursor"`
			Op     string         `json:"op"`
			LSN    string         `json:"lsn"`
			Seq    int64          `json:"seq"`
			Row    map[string]any `json:"row"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&ch); err != nil {
			return 0, fmt.Errorf("change %s: %v", raw, err)
		}
		page[i] = feedChange{Cursor: ch.Cursor, Op: ch.Op, LSN: ch.LSN, Seq: ch.Seq, raw: ch.Row}
	}
	if n := len(page); n > 0 && page[n-1].Cursor != p.NextCursor {
		return 0, fmt.Errorf("next_cursor %s is not the page's last change's cursor %s", p.NextCursor, page[n-1].Cursor)
	}
	if len(page) == 0 && p.NextCursor != "" {
		c.mu.Lock()
		asked := c.cursor
		c.mu.Unlock()
		if asked != "" && p.NextCursor != asked {
			return 0, fmt.Errorf("an empty page moved the cursor from %s to %s", asked, p.NextCursor)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages++
	c.changes = append(c.changes, page...)
	if len(page) > 0 {
		c.cursor = p.NextCursor
		if c.first == "" {
			c.first = page[0].Cursor
		}
	}
	c.lastVersion, c.lastMore = p.Version, p.More
	if p.More {
		return 0, nil
	}
	return 100 * time.Millisecond, nil
}

// waitCaughtUp waits until a page of version target or later said more:
// false, the consumer holding everything of it.
func (c *feedConsumer) waitCaughtUp(target uint64, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		ok, err, v, n := c.lastVersion >= target && !c.lastMore, c.err, c.lastVersion, len(c.changes)
		c.mu.Unlock()
		if err != nil {
			c.t.Fatalf("the feed consumer failed: %v", err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the feed consumer did not catch up with version %d within %s (at version %d, %d changes)", target, timeout, v, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pause waits for the consumer's page in flight and holds it before the
// next; it returns the stored cursor.
func (c *feedConsumer) pause() string {
	c.t.Helper()
	c.hold.Lock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.t.Fatalf("the feed consumer failed: %v", c.err)
	}
	return c.cursor
}

func (c *feedConsumer) resume() { c.hold.Unlock() }

func (c *feedConsumer) pagesNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pages
}

// waitPages waits until the consumer has read n pages.
func (c *feedConsumer) waitPages(n int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		pages, err := c.pages, c.err
		c.mu.Unlock()
		if err != nil {
			c.t.Fatalf("the feed consumer failed: %v", err)
		}
		if pages >= n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the feed consumer read %d pages within %s, want %d", pages, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// endCursor is the cursor after every row of the transaction at lsn.
func endCursor(lsn cdc.LSN) string {
	return strings.Replace(lsn.String(), "/", ".", 1) + ".9223372036854775807"
}

// stop ends the consumer and returns what it received.
func (c *feedConsumer) stop() []feedChange {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.t.Fatalf("the feed consumer failed: %v", c.err)
	}
	return c.changes
}

// feedCounts are the change rows a workload committed, by op.
type feedCounts struct {
	txns                int
	Seed                int // rows the snapshot holds (inserts)
	Inserts, Updates    int // rows inserted and updated in place
	KeyChanges, Deletes int // rows whose key changed (D + U each) and deleted
}

type feedWorkload struct {
	stopc chan struct{}
	done  chan struct{}
	t     *testing.T
	n     feedCounts
	err   error
}

// startFeedWorkload commits small transactions on public.feed until stopped:
// inserts, updates, key changes (several in one transaction, one key changed
// and then updated) and deletes. It is the table's only writer, so it knows
// every key and counts every row it changed.
func startFeedWorkload(t *testing.T, url string, seedRows int) *feedWorkload {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	w := &feedWorkload{stopc: make(chan struct{}), done: make(chan struct{}), t: t, n: feedCounts{Seed: seedRows}}
	keys := make([]int, 0, seedRows)
	for i := 1; i <= seedRows; i++ {
		keys = append(keys, i)
	}
	next := 1_000_000
	rng := rand.New(rand.NewSource(1))
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		for {
			select {
			case <-w.stopc:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var n feedCounts
			ks := append([]int(nil), keys...)
			nx := next
			pick := func() (int, int) { i := rng.Intn(len(ks)); return i, ks[i] }
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				for range 1 + rng.Intn(4) {
					switch r := rng.Intn(10); {
					case r < 3 || len(ks) < 20:
						nx++
						if _, err := tx.Exec(ctx, `INSERT INTO feed VALUES ($1, $2, $3)`, nx, fmt.Sprintf("new %d", nx), rng.Int63()); err != nil {
							return err
						}
						ks = append(ks, nx)
						n.Inserts++
					case r < 6:
						_, k := pick()
						v := any(fmt.Sprintf("upd %d", rng.Intn(1000)))
						if rng.Intn(5) == 0 {
							v = nil
						}
						if _, err := tx.Exec(ctx, `UPDATE feed SET v = $2, n = n + 1 WHERE id = $1`, k, v); err != nil {
							return err
						}
						n.Updates++
					case r < 8:
						i, k := pick()
						nx++
						if _, err := tx.Exec(ctx, `UPDATE feed SET id = $2, v = 'moved from ' || id WHERE id = $1`, k, nx); err != nil {
							return err
						}
						ks[i] = nx
						n.KeyChanges++
						if rng.Intn(2) == 0 { // and the moved row again, in the same transaction
							if _, err := tx.Exec(ctx, `UPDATE feed SET n = -n WHERE id = $1`, nx); err != nil {
								return err
							}
							n.Updates++
						}
					default:
						i, k := pick()
						if _, err := tx.Exec(ctx, `DELETE FROM feed WHERE id = $1`, k); err != nil {
							return err
						}
						ks = append(ks[:i], ks[i+1:]...)
						n.Deletes++
					}
				}
				return nil
			})
			if err != nil {
				w.err = err
				return
			}
			keys, next = ks, nx
			w.n.txns++
			w.n.Inserts += n.Inserts
			w.n.Updates += n.Updates
			w.n.KeyChanges += n.KeyChanges
			w.n.Deletes += n.Deletes
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stopc:
		default:
			close(w.stopc)
		}
		<-w.done
	})
	return w
}

// stop ends the workload and returns the rows it committed.
func (w *feedWorkload) stop() feedCounts {
	w.t.Helper()
	close(w.stopc)
	<-w.done
	if w.err != nil {
		w.t.Fatalf("workload: %v", w.err)
	}
	return w.n
}

// checkFeed: the received rows are in strictly increasing (__lsn, __seq)
// order (so none twice), their cursors name that position, there are as
// many of each op as the seed and the workload made, and replaying them
// (newest row per key; D removes the key, a key change being D of the old
// key and U of the new) gives the source table.
func checkFeed(t *testing.T, e *env, got []feedChange, want feedCounts) {
	t.Helper()
	type pos struct {
		lsn cdc.LSN
		seq int64
	}
	var prev *pos
	ops := map[string]int{}
	state := map[string]map[string]any{}
	for i, ch := range got {
		lsn, err := cdc.ParseLSN(ch.LSN)
		if err != nil {
			t.Fatalf("change %d: lsn %q: %v", i, ch.LSN, err)
		}
		p := pos{lsn, ch.Seq}
		if prev != nil && !(p.lsn > prev.lsn || p.lsn == prev.lsn && p.seq > prev.seq) {
			t.Fatalf("change %d (%s %s/%d) is not after the one before it (%s/%d): out of order or twice",
				i, ch.Op, ch.LSN, ch.Seq, prev.lsn, prev.seq)
		}
		prev = &p
		if want := strings.ReplaceAll(ch.LSN, "/", ".") + "." + strconv.FormatInt(ch.Seq, 10); !strings.EqualFold(ch.Cursor, want) {
			t.Errorf("change %d: cursor %s, want %s (its lsn and seq)", i, ch.Cursor, want)
		}
		ops[ch.Op]++
		id := fmt.Sprint(ch.raw["id"])
		switch ch.Op {
		case "I", "U":
			state[id] = ch.raw
		case "D":
			if _, ok := state[id]; !ok {
				t.Errorf("change %d deletes key %s, which the feed never inserted", i, id)
			}
			delete(state, id)
		default:
			t.Errorf("change %d: op %q", i, ch.Op)
		}
	}
	wantOps := map[string]int{
		"I": want.Seed + want.Inserts,
		"U": want.Updates + want.KeyChanges,
		"D": want.Deletes + want.KeyChanges,
	}
	for op, n := range wantOps {
		if ops[op] != n {
			t.Errorf("%d %s change rows, want %d (the seed and the workload's committed rows)", ops[op], op, n)
		}
	}
	if want.KeyChanges == 0 || want.Deletes == 0 || want.Updates == 0 {
		t.Errorf("the workload did not exercise every kind of change: %+v", want)
	}

	rows, err := e.conn.Query(context.Background(), `SELECT id::text, v, n::text FROM feed`)
	if err != nil {
		t.Fatal(err)
	}
	source, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([3]*string, error) {
		var id, v, n *string
		err := r.Scan(&id, &v, &n)
		return [3]*string{id, v, n}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	str := func(v any) string {
		if v == nil {
			return "<null>"
		}
		return fmt.Sprint(v)
	}
	deref := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	var diffs []string
	for _, r := range source {
		id := *r[0]
		g, ok := state[id]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+id)
		case str(g["v"]) != deref(r[1]) || str(g["n"]) != deref(r[2]):
			diffs = append(diffs, fmt.Sprintf("%s: replayed (%s, %s), source (%s, %s)", id, str(g["v"]), str(g["n"]), deref(r[1]), deref(r[2])))
		}
		delete(state, id)
	}
	for id := range state {
		diffs = append(diffs, "extra "+id)
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		if len(diffs) > 20 {
			diffs = append(diffs[:20], fmt.Sprintf("… %d more", len(diffs)-20))
		}
		t.Errorf("replaying the feed (%d rows) differs from the source (%d rows):\n%s", len(got), len(source), strings.Join(diffs, "\n"))
	}
}

// cursorBefore reports whether cursor a is before cursor b.
func cursorBefore(t *testing.T, a, b string) bool {
	t.Helper()
	parse := func(c string) (cdc.LSN, int64) {
		parts := strings.Split(c, ".")
		if len(parts) != 3 {
			t.Fatalf("cursor %q", c)
		}
		lsn, err1 := cdc.ParseLSN(parts[0] + "/" + parts[1])
		seq, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("cursor %q: %v", c, err)
		}
		return lsn, seq
	}
	al, as := parse(a)
	bl, bs := parse(b)
	return al < bl || al == bl && as < bs
}
