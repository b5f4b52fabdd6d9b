//go:build !nodb

package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/api"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// The read path's reader serves the API's port.
var _ api.Reader = (*query.Reader)(nil)

const (
	orders  = "public.orders"
	odd     = `we"ird.sch.it's "odd"` // a schema with a quote, a name with a dot, quotes and a space
	events  = "public.events"         // keyless
	shopOrd = "shop.orders"
)

type env struct {
	t      *testing.T
	sink   *changefeedtest.Sink
	reader *query.Reader
	feed   *changefeed.Feed
	srv    *httptest.Server
	mu     sync.Mutex
	recs   []*access.Record
	last   *access.Record // the record of the newest request do sent
	doc    map[string]any // the OpenAPI document, for validating responses
}

func ch(op cdc.Op, lsn cdc.LSN, seq, id int64, status, amount string) changefeedtest.Row {
	return changefeedtest.Row{Op: op, LSN: lsn, Seq: seq, ID: id, Status: status, Amount: amount}
}

// newEnv serves the API over a real reader on a sink with orders 1..5
// (epoch 1), two updates and a delete (epoch 2).
func newEnv(t *testing.T) *env {
	t.Helper()
	s := changefeedtest.New(t, []string{orders, shopOrd, odd, events}, events)
	s.Flush(1, map[string][]changefeedtest.Row{
		orders: {ch(cdc.OpInsert, 0x200, 0, 1, "pending", "10.50"), ch(cdc.OpInsert, 0x200, 1, 2, "pending", "20.00"), ch(cdc.OpInsert, 0x200, 2, 3, "paid", "5.25"),
			ch(cdc.OpInsert, 0x200, 3, 4, "x' OR 1=1 --", "1.00"), ch(cdc.OpInsert, 0x200, 4, 5, "\x00", "")},
		odd:    {ch(cdc.OpInsert, 0x200, 5, 1, "odd", "1.00")},
		events: {ch(cdc.OpInsert, 0x200, 6, 1, "a", ""), ch(cdc.OpInsert, 0x200, 7, 1, "a", ""), ch(cdc.OpInsert, 0x200, 8, 2, "b", "")},
	})
	s.Flush(2, map[string][]changefeedtest.Row{
		orders: {ch(cdc.OpUpdate, 0x300, 0, 2, "paid", "20.00"), ch(cdc.OpDelete, 0x300, 1, 3, "", "")},
	})
	r, err := query.NewReader(query.ReaderOptions{Sink: s.Store, TempDir: filepath.Join(t.TempDir(), "query"), Engines: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e := &env{t: t, sink: s, reader: r, feed: changefeed.New(r, manifest.NewHistory(s.Store))}
	h := api.New(api.Options{Reader: r, Feed: e.feed, MaxRows: 1000, Version: "test",
		StaleAfter: time.Hour, Now: func() time.Time { return s.Now.Add(10 * time.Minute) }})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &access.Record{}
		e.mu.Lock()
		e.recs = append(e.recs, rec)
		e.mu.Unlock()
		h.ServeHTTP(w, req.WithContext(access.WithRecord(req.Context(), rec)))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// lastRecord is the audit record of the newest request.
func (e *env) lastRecord() *access.Record { return e.last }

// do sends a request and decodes the JSON answer, checking its status and
// content type and validating it against the OpenAPI document.
func (e *env) do(method, path string, body string, wantStatus int) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, wantStatus, data)
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 400 && ct != "application/problem+json" || resp.StatusCode < 400 && ct != "application/json" {
		e.t.Errorf("%s %s: content type %q", method, path, ct)
	}
	e.mu.Lock()
	e.last = e.recs[len(e.recs)-1]
	e.mu.Unlock()
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		e.t.Fatalf("%s %s: %v: %s", method, path, err, data)
	}
	e.validate(method, path, resp.StatusCode, out)
	return out
}

func (e *env) get(path string, want int) map[string]any { return e.do("GET", path, "", want) }

// problemCode checks a problem's code.
func problemCode(t *testing.T, p map[string]any, code string) {
	t.Helper()
	if p["code"] != code {
		t.Errorf("problem code %v, want %s: %v", p["code"], code, p["detail"])
	}
	for _, f := range []string{"type", "title", "status", "detail"} {
		if _, ok := p[f]; !ok {
			t.Errorf("problem without %s: %v", f, p)
		}
	}
}

func q(s string) string { return url.QueryEscape(s) }
