package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/serve"
)

// Serve under load (issue 16): a table of --serve-rows rows snapshotted by
// pg-cdc init, then pg-cdc start streaming a steady workload (one
// transaction every 100 ms: serveUpdate updated rows, serveInsert new ones,
// serveDelete deleted) with compaction.interval --serve-compaction, so
// compactions land while the readers read, and pg-cdc serve over the same
// sink with two tokens. --serve-clients clients (half on each token) then
// issue, for --serve-duration, a mix in turn: GET /v1/tables, GET
// /v1/tables/{t}/rows with two filters and a limit, POST /v1/query (a small
// aggregate), GET /v1/tables/{t}/changes following each client's cursor,
// and MCP tools/call over streamable HTTP (query, list_tables,
// get_freshness). Measured: requests, latency percentiles and statuses per
// endpoint, the peak RSS (VmHWM) of serve and of start, the daemon's
// freshness while the load ran and at its end, the order of the change
// feed each client followed, and, once the workload stops, that the sink
// agrees with PostgreSQL.

const (
	serveDB      = "serveload"
	serveUpdate  = 200
	serveInsert  = 20
	serveDelete  = 5
	serveTick    = 100 * time.Millisecond
	serveRowsLim = 50
	serveChgLim  = 100
)

// serveEndpoints are the mix, in the order each client walks it.
var serveEndpoints = []string{
	"GET /v1/tables",
	"GET /v1/tables/{t}/rows",
	"POST /v1/query",
	"GET /v1/tables/{t}/changes",
	"MCP tools/call query",
	"MCP tools/call list_tables",
	"MCP tools/call get_freshness",
}

type serveEndpoint struct {
	name      string
	latencies []float64 // seconds, every answered request
	status    map[int]int
	rpcErrors int // MCP: a JSON-RPC error or isError in a 200
	other     map[string]int
	server    []float64 // seconds: the audit record's duration_ms of each 200
}

type serveResult struct {
	rows, clients                int
	duration, compactEvery       time.Duration
	endpoints                    []*serveEndpoint
	all                          []float64
	total                        int
	elapsed                      time.Duration
	serveHWM, startHWM           int64 // at the end of the load
	serveHWMIdle, startHWMIdle   int64 // before the load
	serveRSS, startRSS           int64 // VmRSS at the end of the load
	serveCPU, startCPU           time.Duration
	txns, changes                int
	versionsStart, versionsEnd   uint64
	compactions                  int
	baseRows                     int64
	lagSamples                   []float64 // /v1/status lag_seconds, once a second during the load
	lagEnd                       float64   // lag_seconds at the end of the load
	freshEnd, nowEnd             time.Time
	walLagEnd                    int64 // bytes: pg_current_wal_lsn − manifest end_lsn, at the end of the load
	changesSeen                  int
	orderViolations              int
	catchUp                      time.Duration // workload stopped → the sink's count(*) equals PostgreSQL's
	pgCount, sinkCount           int64
	maxConcurrent, queryThreads  int
	rate                         int // serve.rate_limit per principal
	loadStart, loadEnd           string
	startLogCompact, serveErrors int
}

func (h *harness) serveLoad(ctx context.Context) (*serveResult, error) {
	n := h.o.serveRows
	res := &serveResult{rows: n, clients: h.o.serveClients, duration: h.o.serveDuration, compactEvery: h.o.serveCompaction,
		maxConcurrent: h.o.serveMaxConcurrent, queryThreads: 2, rate: h.o.serveRate}
	h.logf("serve: loading a %s-row table", count(n))
	c, err := h.database(ctx, serveDB)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	if err := loadRows(ctx, c, n); err != nil {
		return nil, err
	}
	r, err := h.pgcdcConfig(serveDB, "serve_pgcdc")
	if err != nil {
		return nil, err
	}
	if err := appendFile(r.config, fmt.Sprintf("compaction:\n  interval: %s\n", h.o.serveCompaction)); err != nil {
		return nil, err
	}
	if _, u, err := h.initPGCDC(r); err != nil {
		return nil, fmt.Errorf("pg-cdc init: %w", err)
	} else {
		h.logf("serve: pg-cdc init in %s", u.Wall.Round(100*time.Millisecond))
	}

	// Two principals; serve reads the sink alone. The configuration's
	// validation still asks for source.postgres.url, so it names a source
	// that does not exist: serve never connects to it.
	tokens := []string{newToken(), newToken()}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	serveCfg := filepath.Join(r.dir, "serve.yml")
	if err := os.WriteFile(serveCfg, []byte(fmt.Sprintf(`source:
  postgres:
    url: "postgresql://nobody@127.0.0.1:1/none"
storage:
  type: filesystem
  path: %q
state:
  path: %q
serve:
  listen: %q
  max_concurrent: %d
  rate_limit: %d
  rate_burst: %d
  tokens:
    alice: %s
    bob: %s
`, r.sink, filepath.Join(r.dir, "serve-state"), addr, res.maxConcurrent, res.rate, 2*res.rate, serve.Hash(tokens[0]), serve.Hash(tokens[1]))), 0o644); err != nil {
		return nil, err
	}

	start, err := startProc(h.bin, []string{"-c", r.config, "start"}, nil, filepath.Join(r.dir, "start.log"))
	if err != nil {
		return nil, err
	}
	defer start.kill()
	srv, err := startProc(h.bin, []string{"-c", serveCfg, "serve"}, nil, filepath.Join(r.dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer srv.kill()

	// The steady workload, from now until the load ends and a little more.
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var (
		workWG  sync.WaitGroup
		workErr error
	)
	wc, err := pgx.Connect(ctx, h.cluster.URL(serveDB))
	if err != nil {
		return nil, err
	}
	defer wc.Close(context.Background())
	workWG.Add(1)
	go func() {
		defer workWG.Done()
		workErr = serveWorkload(wctx, wc, n, res)
	}()

	base := "http://" + addr
	client := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * res.clients, MaxIdleConns: 4 * res.clients}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if srv.exited() || start.exited() {
			return nil, fmt.Errorf("a pg-cdc process exited early:\nstart: %s\nserve: %s", logTail(r.dir, "start.log"), logTail(r.dir, "serve.log"))
		}
		var st struct{ Version uint64 }
		if code, err := getJSON(ctx, client, base+"/v1/status", tokens[0], &st); err == nil && code == 200 && st.Version > 1 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("serve did not answer /v1/status within 30 s: %s", logTail(r.dir, "serve.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the daemon streaming, serve warm
	res.serveHWMIdle = procStatusBytes(srv.cmd.Process.Pid, "VmHWM:")
	res.startHWMIdle = procStatusBytes(start.cmd.Process.Pid, "VmHWM:")
	m0 := readManifest(r)
	if m0 == nil {
		return nil, fmt.Errorf("no manifest")
	}
	res.versionsStart = m0.Version

	// The monitor: freshness once a second, compactions (a new base) from
	// the manifest every 250 ms.
	mctx, stopMon := context.WithCancel(ctx)
	var monWG sync.WaitGroup
	monWG.Add(1)
	go func() {
		defer monWG.Done()
		var lastBase cdc.LSN
		if t := m0.Tables["public.bench"]; t != nil && t.Base != nil {
			lastBase = t.Base.MaxLSN
		}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-mctx.Done():
				return
			case <-tick.C:
			}
			if m := readManifest(r); m != nil {
				if t := m.Tables["public.bench"]; t != nil && t.Base != nil && t.Base.MaxLSN != lastBase {
					lastBase = t.Base.MaxLSN
					res.compactions++
				}
			}
			if i%4 == 3 {
				var st struct {
					LagSeconds *float64 `json:"lag_seconds"`
				}
				if code, err := getJSON(mctx, client, base+"/v1/status", tokens[1], &st); err == nil && code == 200 && st.LagSeconds != nil {
					res.lagSamples = append(res.lagSamples, *st.LagSeconds)
				}
			}
		}
	}()

	h.logf("serve: %d clients for %s (compaction every %s; workload %d U + %d I + %d D every %s)",
		res.clients, res.duration, res.compactEvery, serveUpdate, serveInsert, serveDelete, serveTick)
	res.loadStart = loadAvg()
	eps := make([]*serveEndpoint, len(serveEndpoints))
	for i, name := range serveEndpoints {
		eps[i] = &serveEndpoint{name: name, status: map[int]int{}, other: map[string]int{}}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	stopAt := began.Add(res.duration)
	for i := range res.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &serveClient{base: base, token: tokens[i%2], id: i}
			w.h = &http.Client{Transport: retryAfter{base: client.Transport, w: w}, Timeout: client.Timeout}
			local := make([]serveEndpoint, len(eps))
			for k := range local {
				local[k] = serveEndpoint{status: map[int]int{}, other: map[string]int{}}
			}
			for k := i; time.Now().Before(stopAt) && ctx.Err() == nil; k++ {
				e := k % len(serveEndpoints)
				t0 := time.Now()
				code, rpcErr, err := w.do(ctx, e)
				d := time.Since(t0).Seconds()
				if code == http.StatusTooManyRequests {
					// Wait what serve's Retry-After says (the bucket's
					// wait in whole seconds), as a well-behaved client does.
					select {
					case <-time.After(w.retryAfter):
					case <-ctx.Done():
					}
				}
				le := &local[e]
				switch {
				case err != nil:
					le.other[errClass(err)]++
				default:
					le.status[code]++
					if code == http.StatusOK {
						// The latency of an answer: a 429 or 503 is
						// fast and says nothing of it (counted above).
						le.latencies = append(le.latencies, d)
					}
					if rpcErr {
						le.rpcErrors++
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k := range local {
				for s, n := range local[k].status {
					eps[k].status[s] += n
				}
				for s, n := range local[k].other {
					eps[k].other[s] += n
				}
				eps[k].latencies = append(eps[k].latencies, local[k].latencies...)
				eps[k].rpcErrors += local[k].rpcErrors
			}
			res.changesSeen += w.changes
			res.orderViolations += w.violations
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(began)
	res.loadEnd = loadAvg()
	stopMon()
	monWG.Wait()
	res.endpoints = eps
	for _, e := range eps {
		res.all = append(res.all, e.latencies...)
		for _, n := range e.status {
			res.total += n
		}
		for _, n := range e.other {
			res.total += n
		}
	}

	// The end of the load: peak RSS, and how fresh the sink is while the
	// workload still runs.
	res.serveHWM = procStatusBytes(srv.cmd.Process.Pid, "VmHWM:")
	res.startHWM = procStatusBytes(start.cmd.Process.Pid, "VmHWM:")
	res.serveRSS = procStatusBytes(srv.cmd.Process.Pid, "VmRSS:")
	res.startRSS = procStatusBytes(start.cmd.Process.Pid, "VmRSS:")
	var st struct {
		FreshAsOf  *time.Time `json:"fresh_as_of"`
		LagSeconds *float64   `json:"lag_seconds"`
		EndLSN     cdc.LSN    `json:"end_lsn"`
	}
	res.nowEnd = time.Now()
	if code, err := getJSON(ctx, client, base+"/v1/status", tokens[0], &st); err != nil || code != 200 || st.LagSeconds == nil {
		return nil, fmt.Errorf("/v1/status at the end: %d %v", code, err)
	}
	res.lagEnd, res.freshEnd = *st.LagSeconds, *st.FreshAsOf
	var walNow string
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&walNow); err != nil {
		return nil, err
	}
	if m := readManifest(r); m != nil {
		var wal cdc.LSN
		if err := wal.UnmarshalText([]byte(walNow)); err == nil {
			res.walLagEnd = int64(wal) - int64(m.EndLSN)
		}
		res.versionsEnd = m.Version
		if t := m.Tables["public.bench"]; t != nil && t.Base != nil {
			res.baseRows = t.Base.RowCount
		}
	}
	h.logf("serve: %d requests in %s; lag at the end %.2f s (WAL %s behind); %d compactions; serve VmHWM %s, start VmHWM %s",
		res.total, res.elapsed.Round(time.Millisecond), res.lagEnd, bytesIEC(res.walLagEnd), res.compactions, bytesIEC(res.serveHWM), bytesIEC(res.startHWM))

	// Stop the workload; the sink must reach PostgreSQL's count.
	stopWork()
	workWG.Wait()
	if workErr != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("workload: %w", workErr)
	}
	stopped := time.Now()
	if err := c.QueryRow(ctx, "SELECT count(*) FROM bench").Scan(&res.pgCount); err != nil {
		return nil, err
	}
	for {
		var q struct{ Rows [][]any }
		body, _ := json.Marshal(map[string]any{"sql": "SELECT count(*) AS n FROM public.bench"})
		code, err := doJSON(ctx, client, http.MethodPost, base+"/v1/query", tokens[0], body, &q)
		if err == nil && code == 200 && len(q.Rows) == 1 && len(q.Rows[0]) == 1 {
			if f, ok := q.Rows[0][0].(float64); ok {
				res.sinkCount = int64(f)
			}
			if res.sinkCount == res.pgCount {
				break
			}
		}
		if time.Since(stopped) > time.Minute {
			return nil, fmt.Errorf("the sink's count(*) %d never reached PostgreSQL's %d (status %d, %v)", res.sinkCount, res.pgCount, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.catchUp = time.Since(stopped)

	u, err := srv.stop(time.Minute)
	if err != nil {
		return nil, fmt.Errorf("pg-cdc serve: %w", err)
	}
	res.serveCPU = u.CPU
	if u, err = start.stop(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("pg-cdc start: %w", err)
	}
	res.startCPU = u.CPU
	if b, err := os.ReadFile(filepath.Join(r.dir, "serve.log")); err == nil {
		res.serveErrors = strings.Count(string(b), "level=ERROR")
		serverDurations(string(b), eps, began, began.Add(res.elapsed))
	}
	h.logf("serve: the sink's count(*) %s equals PostgreSQL's %.1f s after the workload stopped; %d changes followed, %d out of order",
		count(int(res.sinkCount)), res.catchUp.Seconds(), res.changesSeen, res.orderViolations)
	c.Close(context.Background())
	if !h.o.keep {
		if err := os.RemoveAll(r.dir); err != nil {
			return nil, err
		}
	}
	return res, h.dropDatabase(ctx, serveDB)
}

// serveWorkload commits one transaction every serveTick: updates of
// serveUpdate consecutive keys (moving through the table), serveInsert new
// keys, deletes of serveDelete keys from the other end.
func serveWorkload(ctx context.Context, c *pgx.Conn, n int, res *serveResult) error {
	err := serveTransactions(ctx, c, n, res)
	if ctx.Err() != nil {
		return nil // stopped, perhaps inside a transaction, which rolled back
	}
	return err
}

func serveTransactions(ctx context.Context, c *pgx.Conn, n int, res *serveResult) error {
	tick := time.NewTicker(serveTick)
	defer tick.Stop()
	next := n + 1
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		lo := 1 + (k*serveUpdate)%(n/2)
		del := n - k*serveDelete
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		u, err := tx.Exec(ctx, "UPDATE bench SET a = a + 1, c = now(), d = d + 1 WHERE id BETWEEN $1 AND $2", lo, lo+serveUpdate-1)
		if err != nil {
			_ = tx.Rollback(context.Background())
			return err
		}
		i, err := tx.Exec(ctx, "INSERT INTO bench "+rowsSQL(next, next+serveInsert-1))
		if err != nil {
			_ = tx.Rollback(context.Background())
			return err
		}
		d, err := tx.Exec(ctx, "DELETE FROM bench WHERE id BETWEEN $1 AND $2", del-serveDelete+1, del)
		if err != nil {
			_ = tx.Rollback(context.Background())
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		next += serveInsert
		res.txns++
		res.changes += int(u.RowsAffected() + i.RowsAffected() + d.RowsAffected())
	}
}

// retryAfter records each answer's Retry-After on its client (one
// goroutine per client).
type retryAfter struct {
	base http.RoundTripper
	w    *serveClient
}

func (r retryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := r.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err == nil {
		r.w.retryAfter = time.Second // serve always sends one; 1 s if not
		if n, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && n >= 0 {
			r.w.retryAfter = time.Duration(n) * time.Second
		}
	}
	return resp, err
}

// serveClient is one of the load's clients.
type serveClient struct {
	h                   *http.Client
	retryAfter          time.Duration // of the last answer
	base, token         string
	id, n               int
	cursor              string
	started             bool
	lastLSN             cdc.LSN
	lastSeq             int64
	changes, violations int
}

// do issues endpoint e once: the HTTP status, whether an MCP answer was a
// tool or JSON-RPC error, and a transport error.
func (w *serveClient) do(ctx context.Context, e int) (int, bool, error) {
	w.n++
	a := (w.id*7919 + w.n*104729) % 99000 // a value of column a
	switch serveEndpoints[e] {
	case "GET /v1/tables":
		var out struct{ Tables []json.RawMessage }
		return w.get(ctx, "/v1/tables", &out)
	case "GET /v1/tables/{t}/rows":
		var out struct {
			Rows          []json.RawMessage `json:"rows"`
			ChangesCursor *string           `json:"changes_cursor"`
		}
		q := url.Values{"columns": {"id,a,d"}, "filter": {fmt.Sprintf("a:ge:%d", a), fmt.Sprintf("a:lt:%d", a+200)}, "limit": {fmt.Sprint(serveRowsLim)}}
		code, _, err := w.get(ctx, "/v1/tables/public.bench/rows?"+q.Encode(), &out)
		if err == nil && code == 200 && !w.started && out.ChangesCursor != nil {
			w.cursor, w.started = *out.ChangesCursor, true
		}
		return code, false, err
	case "POST /v1/query":
		body, _ := json.Marshal(map[string]any{"sql": "SELECT count(*) AS n, sum(d) AS sum_d, max(b) AS max_b FROM public.bench WHERE a BETWEEN ? AND ?", "params": []int{a, a + 999}})
		var out struct{ Rows [][]any }
		code, err := doJSON(ctx, w.h, http.MethodPost, w.base+"/v1/query", w.token, body, &out)
		return code, false, err
	case "GET /v1/tables/{t}/changes":
		var out struct {
			Changes []struct {
				LSN cdc.LSN `json:"lsn"`
				Seq int64   `json:"seq"`
			} `json:"changes"`
			NextCursor string `json:"next_cursor"`
		}
		code, _, err := w.get(ctx, fmt.Sprintf("/v1/tables/public.bench/changes?limit=%d&after=%s", serveChgLim, url.QueryEscape(w.cursor)), &out)
		if err == nil && code == 200 {
			for _, ch := range out.Changes {
				if w.changes > 0 && (ch.LSN < w.lastLSN || ch.LSN == w.lastLSN && ch.Seq <= w.lastSeq) {
					w.violations++
				}
				w.lastLSN, w.lastSeq = ch.LSN, ch.Seq
				w.changes++
			}
			w.cursor = out.NextCursor
		}
		return code, false, err
	case "MCP tools/call query":
		return w.mcp(ctx, "query", map[string]any{"sql": fmt.Sprintf("SELECT count(*) AS n, sum(d) AS sum_d FROM public.bench WHERE a BETWEEN %d AND %d", a, a+999)})
	case "MCP tools/call list_tables":
		return w.mcp(ctx, "list_tables", map[string]any{})
	case "MCP tools/call get_freshness":
		return w.mcp(ctx, "get_freshness", map[string]any{})
	}
	return 0, false, fmt.Errorf("unknown endpoint %d", e)
}

func (w *serveClient) get(ctx context.Context, path string, out any) (int, bool, error) {
	code, err := doJSON(ctx, w.h, http.MethodGet, w.base+path, w.token, nil, out)
	return code, false, err
}

// mcp posts one JSON-RPC tools/call to /mcp (the server is stateless: no
// initialize) and reads its answer, JSON or one server-sent event.
func (w *serveClient) mcp(ctx context.Context, tool string, args map[string]any) (int, bool, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": w.n, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+"/mcp", bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.h.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, false, err
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, false, nil
	}
	msg, ok := rpcMessage(resp.Header.Get("Content-Type"), b)
	if !ok {
		return resp.StatusCode, true, nil
	}
	var rpc struct {
		Error  *json.RawMessage `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &rpc); err != nil || rpc.Error != nil || rpc.Result == nil || rpc.Result.IsError {
		return resp.StatusCode, true, nil
	}
	return resp.StatusCode, false, nil
}

// rpcMessage is the JSON-RPC message of a streamable HTTP answer: the body
// itself, or the data of its first event.
func rpcMessage(contentType string, b []byte) ([]byte, bool) {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return b, len(b) > 0
	}
	var data []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " ")...)
		} else if line == "" && len(data) > 0 {
			break
		}
	}
	return data, len(data) > 0
}

func getJSON(ctx context.Context, c *http.Client, u, token string, out any) (int, error) {
	return doJSON(ctx, c, http.MethodGet, u, token, nil, out)
}

// doJSON sends a request and decodes a 200's JSON body into out; any
// other status is returned with the body discarded.
func doJSON(ctx context.Context, c *http.Client, method, u, token string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode: %w", err)
	}
	return resp.StatusCode, nil
}

func errClass(err error) string {
	var ne net.Error
	switch {
	case strings.Contains(err.Error(), "decode:"):
		return "bad body"
	case asNetErr(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "transport"
	}
}

func asNetErr(err error, ne *net.Error) bool {
	for err != nil {
		if e, ok := err.(net.Error); ok {
			*ne = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// auditEndpoint maps an audit record's endpoint (REST route or MCP tool)
// to the mix's.
var auditEndpoint = map[string]string{
	`endpoint="GET /v1/tables"`:                 "GET /v1/tables",
	`endpoint="GET /v1/tables/{table}/rows"`:    "GET /v1/tables/{t}/rows",
	`endpoint="POST /v1/query"`:                 "POST /v1/query",
	`endpoint="GET /v1/tables/{table}/changes"`: "GET /v1/tables/{t}/changes",
	`surface=mcp endpoint=query`:                "MCP tools/call query",
	`surface=mcp endpoint=list_tables`:          "MCP tools/call list_tables",
	`surface=mcp endpoint=get_freshness`:        "MCP tools/call get_freshness",
}

// serverDurations reads serve's audit records of the load's window: the
// time each answered request spent in its handler, without the wait for a
// slot.
func serverDurations(log string, eps []*serveEndpoint, from, to time.Time) {
	byName := map[string]*serveEndpoint{}
	for _, e := range eps {
		byName[e.name] = e
	}
	for _, line := range strings.Split(log, "\n") {
		// REST records carry the status; an MCP record carries error= when
		// the call failed.
		if !strings.Contains(line, `msg="read request"`) ||
			!strings.Contains(line, " status=200 ") && !(strings.Contains(line, " surface=mcp ") && !strings.Contains(line, " error=")) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		for k, name := range auditEndpoint {
			if !strings.Contains(line+" ", " "+k+" ") {
				continue
			}
			_, d, ok := strings.Cut(line, " duration_ms=")
			if !ok {
				break
			}
			d, _, _ = strings.Cut(d, " ")
			var v, queued float64
			if _, err := fmt.Sscan(d, &v); err != nil {
				break
			}
			// The slot wait is the queue's, not the handler's.
			if _, q, ok := strings.Cut(line, " queued_ms="); ok {
				q, _, _ = strings.Cut(q, " ")
				fmt.Sscan(q, &queued)
			}
			byName[name].server = append(byName[name].server, (v-queued)/1e3)
			break
		}
	}
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "pgcdc_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func logTail(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return tail(string(b), 20)
}

// percentile is the q-quantile (0..1) of xs by nearest rank; xs is sorted
// in place.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := int(q*float64(len(xs))+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func (r *report) renderServe(p func(string, ...any)) {
	s := r.serve
	if s == nil {
		return
	}
	m := r.machine
	p("## Serve under load (issue 16)\n\n")
	p("Measured %s on %d CPUs (%s, %s, %s; load average %s at the load's start, %s at its end), %s, pg-cdc `%s`. Reproduce: `make build && go run ./bench/cmd/pgcdc-bench --bin bin/pg-cdc --only serve --out /tmp/serve.md` (`--serve-duration`, `--serve-clients`, `--serve-rows`, `--serve-compaction` size it).\n\n",
		r.started.UTC().Format("2006-01-02 15:04 UTC"), m.nproc, m.cpu, m.memory, m.kernel, s.loadStart, s.loadEnd, strings.SplitN(m.postgres, " on ", 2)[0], strings.ReplaceAll(m.pgcdc, "\n", "; "))
	p("The sink: the bench table, %s rows snapshotted by `pg-cdc init`; `pg-cdc start` (`flush.interval_sec: %d`, `compaction.interval: %s`) streams a steady workload, one transaction every %s (%d updated rows, %d inserted, %d deleted; %s transactions, %s changes over the section). ",
		count(s.rows), r.opts.flushSec, s.compactEvery, serveTick, serveUpdate, serveInsert, serveDelete, count(s.txns), count(s.changes))
	p("`pg-cdc serve` on the same sink (its own configuration: storage, state and serve, and a `source.postgres.url` naming no server, which validation requires and serve never uses), two tokens (`serve.rate_limit` %d, `rate_burst` %d per principal; `max_concurrent` %d (pg-cdc's default: 4), `query.threads` %d (the default)). A client answered `429` waits the `Retry-After` it was given before its next request, as a well-behaved client does. ", s.rate, 2*s.rate, s.maxConcurrent, s.queryThreads)
	p("%d clients (half on each token, one shared keep-alive HTTP client) for %s, each walking the mix in turn (client *i* starts at its *i*-th entry): `GET /v1/tables`; `GET /v1/tables/public.bench/rows?columns=id,a,d&filter=a:ge:N&filter=a:lt:N+200&limit=%d`; `POST /v1/query` `SELECT count(*), sum(d), max(b) FROM public.bench WHERE a BETWEEN ? AND ?` (a range of 1,000 values of a, about 1%% of the rows); `GET /v1/tables/public.bench/changes?limit=%d&after=<cursor>` following the client's own cursor (from the first rows page's `changes_cursor`); MCP `tools/call` over streamable HTTP (one JSON-RPC POST to `/mcp`, stateless, no `initialize`) of `query` (the aggregate without `max(b)`), `list_tables` and `get_freshness`. Latency is the client's, request sent to body read, queueing for one of the %d slots included.\n\n",
		s.clients, s.duration, serveRowsLim, serveChgLim, s.maxConcurrent)
	var allServer []float64
	p("| endpoint | requests | req/s | p50 | p99 | max | in the handler: p50 | p99 | statuses |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, e := range s.endpoints {
		n := len(e.latencies)
		for _, k := range e.other {
			n += k
		}
		lat := append([]float64(nil), e.latencies...)
		srv := append([]float64(nil), e.server...)
		allServer = append(allServer, e.server...)
		p("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s |\n", e.name, count(n), float64(n)/s.elapsed.Seconds(), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)),
			ms(percentile(srv, 0.5)), ms(percentile(srv, 0.99)), statusText(e))
	}
	all := append([]float64(nil), s.all...)
	p("| **all** | **%s** | **%.1f** | **%s** | **%s** | %s | %s | %s | %s |\n\n", count(s.total), float64(s.total)/s.elapsed.Seconds(), ms(percentile(all, 0.5)), ms(percentile(all, 0.99)), ms(percentile(all, 1)),
		ms(percentile(allServer, 0.5)), ms(percentile(allServer, 0.99)), statusTotals(s.endpoints))
	p("p50/p99/max are the client's, over the `200` answers (a `429` or `503` answers at once: they are counted in *statuses*); *in the handler* is the audit record's `duration_ms` of each 200 (of each MCP call without an error; ms resolution), less its `queued_ms`, the wait for one of the %d slots (a `503` is a request that found none within `serve.queue_wait`).\n\n", s.maxConcurrent)
	lag := append([]float64(nil), s.lagSamples...)
	p("- **The daemon kept streaming**: manifest versions %d → %d during the load (%.1f a second), %d compaction(s) landed during it (a new base; it holds %s rows at the end). `/v1/status` `lag_seconds` (now − `fresh_as_of`) sampled once a second during the load: p50 %.2f s, max %.2f s; at the end of the load %.2f s (fresh as of %s, asked at %s), the manifest %s of WAL behind `pg_current_wal_lsn()`. Once the workload stopped, the sink's `count(*)` through `/v1/query` equalled PostgreSQL's (%s) after %.1f s.\n",
		s.versionsStart, s.versionsEnd, float64(s.versionsEnd-s.versionsStart)/s.elapsed.Seconds(), s.compactions, count(int(s.baseRows)),
		percentile(lag, 0.5), percentile(lag, 1), s.lagEnd, s.freshEnd.UTC().Format("15:04:05.000"), s.nowEnd.UTC().Format("15:04:05.000"), bytesIEC(s.walLagEnd), count(int(s.pgCount)), s.catchUp.Seconds())
	p("- **The change feed**: the clients followed %s changes in all, %d out of `(__lsn, __seq)` order, across the compactions.\n", count(s.changesSeen), s.orderViolations)
	p("- **Peak RSS (VmHWM from /proc)**: `pg-cdc serve` %s (%s before the load; VmRSS %s at its end), `pg-cdc start` %s (%s before the load, with its compactions; VmRSS %s at the end). CPU over the section: serve %s, start %s. serve logged %d ERROR line(s).\n\n",
		bytesIEC(s.serveHWM), bytesIEC(s.serveHWMIdle), bytesIEC(s.serveRSS), bytesIEC(s.startHWM), bytesIEC(s.startHWMIdle), bytesIEC(s.startRSS),
		s.serveCPU.Round(100*time.Millisecond), s.startCPU.Round(100*time.Millisecond), s.serveErrors)
}

func statusText(e *serveEndpoint) string {
	codes := make([]int, 0, len(e.status))
	for c := range e.status {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d × %s", c, count(e.status[c])))
	}
	if e.rpcErrors > 0 {
		parts = append(parts, fmt.Sprintf("tool/JSON-RPC errors %d", e.rpcErrors))
	}
	for k, n := range e.other {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	return strings.Join(parts, ", ")
}

func statusTotals(eps []*serveEndpoint) string {
	sum := &serveEndpoint{status: map[int]int{}, other: map[string]int{}}
	for _, e := range eps {
		for c, n := range e.status {
			sum.status[c] += n
		}
		for k, n := range e.other {
			sum.other[k] += n
		}
		sum.rpcErrors += e.rpcErrors
	}
	return statusText(sum)
}
