//go:build !nodb

package query

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workerEngine is an Engine whose DuckDB runs in a worker process
// (workerproc.go): the parent's side. A worker that dies (its memory
// bound, a crash) fails the requests it was running, and the next request
// starts another with the same options and setup, so one hostile query
// costs its own answer and a restart, never the server.
type workerEngine struct {
	o      Options
	setup  []string
	limits Limits

	mu     sync.Mutex
	proc   *workerProc // nil: none running (not started, or died)
	conf   Confinement
	closed bool
}

// workerExe is the executable a worker runs: this process's own, by its
// /proc link, so a binary replaced on disk under a running server (an
// upgrade) still starts workers of the running version.
var workerExe = "/proc/self/exe"

// workerGrace is how long past its own timeout a request waits for the
// worker's answer before it stops the worker: DuckDB cannot interrupt
// every phase of a query (binding, for one), and a request must still end.
const workerGrace = 10 * time.Second

// openWorker starts a worker and opens the engine in it; it fails as Open
// does (a *SandboxError when the worker cannot be confined).
func openWorker(ctx context.Context, o Options, setup []string) (*workerEngine, error) {
	limits, err := o.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &workerEngine{o: o, setup: setup, limits: limits}
	if _, err := w.running(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// running returns the running worker, starting one when there is none.
func (w *workerEngine) running(ctx context.Context) (*workerProc, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.proc != nil && !w.proc.isDead() {
		return w.proc, nil
	}
	if w.proc != nil {
		w.proc.close() // reap it and remove its scratch directory
		w.proc = nil
	}
	p, conf, err := startWorker(ctx, w.o, w.setup)
	if err != nil {
		return nil, err
	}
	w.proc, w.conf = p, conf
	return p, nil
}

// Confinement says how the current worker is held.
func (w *workerEngine) Confinement() Confinement {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conf
}

func (w *workerEngine) query(ctx context.Context, sql string, args []any) (*Result, error) {
	return w.do(ctx, workerRequest{Kind: reqQuery, SQL: sql, Args: encodeArgs(args)})
}

func (w *workerEngine) do(ctx context.Context, req workerRequest) (*Result, error) {
	p, err := w.running(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := p.call(ctx, req, w.limits.Timeout+workerGrace)
	if err != nil {
		return nil, err
	}
	if resp.Err != nil {
		return nil, p.scrub(resp.Err).decode()
	}
	if resp.Result == nil {
		return nil, errors.New("query worker: an answer with neither a result nor an error")
	}
	if resp.Result.Rows == nil {
		resp.Result.Rows = [][]any{} // gob sends an empty slice as none
	}
	return resp.Result, nil
}

func (w *workerEngine) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.proc == nil {
		return nil
	}
	err := w.proc.close()
	w.proc = nil
	return err
}

// workerProc is one worker process and its pipes.
type workerProc struct {
	cmd     *exec.Cmd
	scratch string // the worker's private directory under Options.TempDir
	// hide replaces the host's paths an error may name with what a
	// request is shown instead (hostPaths).
	hide   *strings.Replacer
	stderr *tail

	wmu      sync.Mutex // serializes frames on requests
	requests *os.File

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan workerResponse
	dead    chan struct{} // closed when the responses pipe ends
	death   error         // why, set before dead closes
	waited  chan struct{} // closed once cmd.Wait returned
	stopped string        // why we killed it ourselves ("": we did not)
}

// startWorker starts a worker process and opens the engine in it. The
// worker gets no environment but its marker: no secret of the parent's
// (PGPASSWORD, cloud credentials) is ever in reach of a query.
func startWorker(ctx context.Context, o Options, setup []string) (_ *workerProc, _ Confinement, err error) {
	p, err := resolvePaths(o)
	if err != nil {
		return nil, Confinement{}, err
	}
	scratch, err := os.MkdirTemp(p.temp, "worker-")
	if err != nil {
		return nil, Confinement{}, fmt.Errorf("query worker directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(scratch)
		}
	}()
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, Confinement{}, fmt.Errorf("query worker pipe: %w", err)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, Confinement{}, fmt.Errorf("query worker pipe: %w", err)
	}
	cmd := exec.Command(workerExe, workerArg)
	cmd.Env = []string{workerEnv + "=1"}
	cmd.Dir = scratch
	cmd.ExtraFiles = []*os.File{reqR, respW} // fds 3 and 4
	st := &tail{max: 4096}
	cmd.Stderr = st
	// Its own process group: a terminal's ^C reaches the parent, which
	// stops its workers in order, not the workers first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startErr := cmd.Start()
	reqR.Close()
	respW.Close()
	if startErr != nil {
		reqW.Close()
		respR.Close()
		return nil, Confinement{}, fmt.Errorf("start the query worker: %w", startErr)
	}
	wp := &workerProc{cmd: cmd, scratch: scratch, stderr: st, requests: reqW, hide: hostPaths(o, p, scratch),
		pending: map[uint64]chan workerResponse{}, dead: make(chan struct{}), waited: make(chan struct{})}
	go wp.readResponses(respR)
	defer func() {
		if err != nil {
			wp.close()
		}
	}()

	open := workerRequest{Kind: reqOpen, Open: &workerOpen{Isolation: isolation(o), DataDirs: p.data, TempDir: scratch, Limits: o.Limits, Setup: setup}}
	resp, err := wp.call(ctx, open, 2*time.Minute)
	if err != nil {
		return nil, Confinement{}, err
	}
	if resp.Err != nil {
		return nil, Confinement{}, resp.Err.decode()
	}
	conf := resp.Confinement
	conf.Isolation = isolation(o)
	return wp, conf, nil
}

// hostPaths replaces the directories a DuckDB error may name (a view's
// file, a spill file) with the placeholder a request sees: where the sink
// and the state directory lie, and who runs the server, are not a
// reader's to know. The data directories as given and as resolved (a
// view names them as given); longest first, so a directory inside another
// is replaced whole (a Replacer tries its pairs in order).
func hostPaths(o Options, p paths, scratch string) *strings.Replacer {
	pairs := [][2]string{{scratch, "<scratch>"}, {p.temp, "<temp>"}}
	for _, d := range slices.Concat(p.data, o.DataDirs) {
		pairs = append(pairs, [2]string{strings.TrimSuffix(d, "/"), "<data>"})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	flat := make([]string, 0, 2*len(pairs))
	for _, hp := range pairs {
		flat = append(flat, hp[0], hp[1])
	}
	return strings.NewReplacer(flat...)
}

// scrub replaces the host's paths in an error from the worker.
func (p *workerProc) scrub(w *wireError) *wireError {
	c := *w
	c.Detail, c.Message, c.Value = p.hide.Replace(c.Detail), p.hide.Replace(c.Message), p.hide.Replace(c.Value)
	return &c
}

// isolation is o's isolation, the default filled in.
func isolation(o Options) string {
	if o.Isolation == "" {
		return IsolationLandlock
	}
	return o.Isolation
}

// readResponses hands each response to its request until the pipe ends,
// then fails every request still waiting with why the worker died. It is
// the worker's reaper too: it owns cmd.Wait.
func (p *workerProc) readResponses(r *os.File) {
	defer r.Close()
	var readErr error
	for {
		var resp workerResponse
		if err := readFrame(r, &resp); err != nil {
			readErr = err
			break
		}
		p.mu.Lock()
		ch := p.pending[resp.ID]
		delete(p.pending, resp.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered: the caller may have gone
		}
	}
	waitErr := p.cmd.Wait()
	close(p.waited)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.death = p.deathError(readErr, waitErr)
	close(p.dead)
}

// deathError says why the worker's pipe ended. A worker that was killed
// (SIGKILL: the kernel's OOM killer, or our own stop) or that the Go
// runtime ended for want of memory ran into its memory bound.
func (p *workerProc) deathError(readErr, waitErr error) error {
	last := p.stderr.lastLine()
	if p.stopped != "" {
		return fmt.Errorf("the query worker was stopped: %s", p.stopped)
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL ||
			strings.Contains(last, "out of memory") || strings.Contains(last, "cannot allocate memory") {
			return &LimitError{Limit: LimitMemory, Err: fmt.Errorf("the query worker was killed, most often by the kernel's OOM killer, or it ran out of memory (%v; %s)", waitErr, last)}
		}
	}
	if last != "" {
		return fmt.Errorf("the query worker stopped (%v): %s", waitErr, last)
	}
	if waitErr != nil {
		return fmt.Errorf("the query worker stopped: %w", waitErr)
	}
	return fmt.Errorf("the query worker stopped: %v", readErr)
}

func (p *workerProc) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// call sends req and waits for its answer, ctx, or the bound. When ctx
// ends first the worker is told to interrupt the query; past the bound
// the worker is stopped (the request fails with a LimitError, and the
// engine's next request starts another).
func (p *workerProc) call(ctx context.Context, req workerRequest, bound time.Duration) (workerResponse, error) {
	ch := make(chan workerResponse, 1)
	p.mu.Lock()
	p.nextID++
	req.ID = p.nextID
	p.pending[req.ID] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.pending, req.ID)
		p.mu.Unlock()
	}
	if err := p.send(req); err != nil {
		forget()
		select {
		case <-p.dead:
			return workerResponse{}, p.deathErr()
		case <-time.After(time.Second):
			return workerResponse{}, fmt.Errorf("query worker: send the request: %w", err)
		}
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return resp, nil
	case <-p.dead:
		return workerResponse{}, p.deathErr()
	case <-ctx.Done():
		forget()
		if req.Kind != reqOpen {
			p.send(workerRequest{ID: req.ID, Kind: reqCancel})
		}
		return workerResponse{}, ctx.Err()
	case <-timer.C:
		forget()
		p.kill("a request outlived its timeout by " + workerGrace.String())
		return workerResponse{}, &LimitError{Limit: LimitTimeout, Value: bound.String(),
			Err: errors.New("the query worker did not answer in time and was stopped")}
	}
}

func (p *workerProc) deathErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.death
}

func (p *workerProc) send(req workerRequest) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return writeFrame(p.requests, req)
}

func (p *workerProc) kill(why string) {
	p.mu.Lock()
	if p.stopped == "" {
		p.stopped = why
	}
	p.mu.Unlock()
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
}

// close ends the worker: closing its requests pipe tells it to stop; one
// that has not exited within workerGrace is killed. Its scratch directory
// (spill files) is removed.
func (p *workerProc) close() error {
	p.wmu.Lock()
	p.requests.Close()
	p.wmu.Unlock()
	select {
	case <-p.waited:
	case <-time.After(workerGrace):
		p.kill("it did not exit within " + workerGrace.String() + " of its close")
		<-p.waited
	}
	<-p.dead
	return os.RemoveAll(p.scratch)
}

// tail keeps the last max bytes written to it: a worker's stderr, for the
// message it died with.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(b), nil
}

// lastLine is the last line of what was written that is not blank, or
// for a Go runtime's crash its first line ("fatal error: …").
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.b)
	if i := strings.Index(s, "fatal error: "); i >= 0 {
		line, _, _ := strings.Cut(s[i:], "\n")
		return line
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
