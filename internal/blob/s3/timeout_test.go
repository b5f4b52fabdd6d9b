package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// These tests pin down how RequestTimeout bounds an upload (doc.go,
// "Retries and time"): by progress, not by length. A store that stops
// reading or answering fails the attempt within the timeout; one that
// keeps reading, however slowly, does not.

// TestProgressConnWrite: a write into a peer that never reads fails once
// the timeout passes without progress, even mid-body; a peer that reads
// slowly but steadily takes every byte although the whole write lasts
// many timeouts.
func TestProgressConnWrite(t *testing.T) {
	const timeout = 200 * time.Millisecond
	t.Run("stalled", func(t *testing.T) {
		client, server := net.Pipe() // unbuffered: a write waits for the reader
		defer client.Close()
		defer server.Close()
		go func() { // takes the first piece, then stops reading
			io.ReadFull(server, make([]byte, writeChunk))
		}()
		c := &progressConn{Conn: client, timeout: timeout}
		start := time.Now()
		n, err := c.Write(make([]byte, 4*writeChunk))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write into a stalled peer = %d, %v; want a deadline error", n, err)
		}
		if n != writeChunk {
			t.Errorf("wrote %d bytes before the stall, want %d", n, writeChunk)
		}
		if d := time.Since(start); d > 5*timeout {
			t.Errorf("the stalled write failed after %v; timeout %v", d, timeout)
		}
	})
	t.Run("slow", func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		defer server.Close()
		const pieces = 8
		go func() {
			buf := make([]byte, writeChunk)
			for range pieces {
				time.Sleep(timeout / 2)
				if _, err := io.ReadFull(server, buf); err != nil {
					return
				}
			}
		}()
		c := &progressConn{Conn: client, timeout: timeout}
		start := time.Now()
		if n, err := c.Write(make([]byte, pieces*writeChunk)); err != nil {
			t.Fatalf("Write to a slow but steady peer: %d bytes, %v", n, err)
		}
		if d := time.Since(start); d < 2*timeout {
			t.Fatalf("the write took %v; the test wants it to outlast the timeout %v", d, timeout)
		}
	})
}

// TestProgressConnRead: a store that took the whole request and never
// answers fails the read about timeout after the last write, not later
// (the window is counted from the last progress, not from the read).
func TestProgressConnRead(t *testing.T) {
	const timeout = 400 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		accepted <- c
		io.Copy(io.Discard, c) // takes everything, answers nothing
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newProgressConn(raw, timeout)
	defer c.Close()
	defer func() { (<-accepted).Close() }()
	read := make(chan error, 1)
	go func() { // as the HTTP transport does: wait for the answer first
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(timeout / 2)
	if _, err := c.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	err = <-read
	d := time.Since(wrote)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read from a silent store = %v, want a deadline error", err)
	}
	if d < timeout*3/4 || d > timeout*3/2 {
		t.Errorf("the read failed %v after the last write; timeout %v", d, timeout)
	}
}

// TestUploadTimeouts runs Put against a store that takes a request and
// then goes silent: it never reads the body (a multipart part) or never
// answers (a small object). Each attempt is abandoned after about
// RequestTimeout, and the failed multipart upload is aborted.
func TestUploadTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var parts, puts, aborts atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPost && q.Has("uploads"):
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>pre/big</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
			return
		case r.Method == http.MethodDelete && q.Has("uploadId"):
			aborts.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		case r.Method == http.MethodPut && q.Has("partNumber"):
			parts.Add(1) // read nothing: the client's writes stall
		case r.Method == http.MethodPut:
			puts.Add(1)
			io.Copy(io.Discard, r.Body) // take the body, never answer
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // runs first: lets held handlers return
	s, err := New(context.Background(), Options{
		Bucket: "bkt", Prefix: "pre", Endpoint: srv.URL, ForcePathStyle: true,
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "not-a-real-secret",
		MaxRetries: 1, RequestTimeout: timeout, PartSize: MinPartSize, Concurrency: 1,
		backoff: noBackoff{},
	})
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := s.Put(context.Background(), "small", bytes.NewReader(make([]byte, 1000))); err == nil {
		t.Fatal("Put to a store that never answers succeeded")
	}
	t.Logf("small Put to a silent store failed after %v", time.Since(start))
	if d := time.Since(start); d > 2*2*timeout {
		t.Errorf("Put of a small object to a silent store failed after %v; 2 attempts of %v", d, timeout)
	}
	if n := puts.Load(); n != 2 {
		t.Errorf("%d PutObject attempts, want 2", n)
	}

	// Parts larger than the loopback socket buffers hold, so that the
	// body's writes stall, not only the wait for an answer.
	start = time.Now()
	if err := s.Put(context.Background(), "big", bytes.NewReader(make([]byte, 3*MinPartSize))); err == nil {
		t.Fatal("Put of a multipart object to a store that reads no part succeeded")
	}
	t.Logf("multipart Put to a stalled store failed after %v", time.Since(start))
	if d := time.Since(start); d > 2*2*timeout+time.Second {
		t.Errorf("multipart Put to a stalled store failed after %v; 2 attempts of %v", d, timeout)
	}
	if n := parts.Load(); n < 2 {
		t.Errorf("%d part upload attempts, want at least 2", n)
	}
	if aborts.Load() == 0 {
		t.Error("the failed multipart upload was not aborted")
	}
}

// TestSlowUpload: a store that reads a body slowly but steadily gets the
// whole object although the upload takes several times RequestTimeout.
// The store's socket buffer is kept small, as a slow link's is, so that
// the client's writes follow the store's reads.
func TestSlowUpload(t *testing.T) {
	const (
		timeout = 400 * time.Millisecond
		size    = 1 << 20
		step    = 64 << 10
	)
	var got atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, step)
		for {
			time.Sleep(timeout / 4) // about 4 steps per timeout: 512 KiB/s
			n, err := io.ReadFull(r.Body, buf)
			got.Add(int64(n))
			if err != nil {
				break
			}
		}
		w.Header().Set("ETag", `"e"`)
	}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	s, err := New(context.Background(), Options{
		Bucket: "bkt", Endpoint: srv.URL, ForcePathStyle: true,
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "not-a-real-secret",
		MaxRetries: -1, RequestTimeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Put(context.Background(), "slow", bytes.NewReader(make([]byte, size))); err != nil {
		t.Fatalf("Put to a slow but steady store failed after %v: %v", time.Since(start), err)
	}
	t.Logf("slow Put took %v", time.Since(start))
	if d := time.Since(start); d < 2*timeout || got.Load() != size {
		t.Fatalf("the store read %d bytes in %v; the test wants %d bytes over more than %v", got.Load(), d, size, 2*timeout)
	}
}

// smallBuffers gives accepted connections a 64 KiB receive buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10)
	}
	return c, err
}
