//go:build !nodb

package query

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A worker process is this same executable started with workerArg as its
// first argument and workerEnv set: the package's init (below) runs the
// worker and exits before the program's main, so every binary that links
// the query engine (pg-cdc, and each test binary) can serve as its own
// worker without a command of its own. Both are needed, so neither a
// stray argument nor a stray variable turns a normal run into a worker.
const (
	workerArg = "__pgcdc-query-worker"
	workerEnv = "PGCDC_QUERY_WORKER"
)

// The pipes a worker speaks over (exec.Cmd.ExtraFiles): not stdin and
// stdout, which a library might write to.
const (
	workerRequestsFD  = 3
	workerResponsesFD = 4
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == workerArg && os.Getenv(workerEnv) == "1" {
		os.Exit(runWorker(os.NewFile(workerRequestsFD, "requests"), os.NewFile(workerResponsesFD, "responses")))
	}
}

// rawForTest, set by a test build only, runs SQL on the worker's engine
// with no statement check: the tests prove with it that the kernel, not
// the checks, refuses a write. Production binaries have no such path.
var rawForTest func(ctx context.Context, en *Engine, sql string) error

// runWorker serves one engine over the pipes: it reads the reqOpen,
// confines itself (confine), opens the engine in process, answers, and
// then answers queries, each on its own goroutine, until the requests
// pipe closes (the parent closed the engine or died). It returns the
// process's exit code.
func runWorker(in io.Reader, out io.Writer) int {
	w := &workerServer{out: out, running: map[uint64]context.CancelFunc{}}
	var first workerRequest
	if err := readFrame(in, &first); err != nil {
		fmt.Fprintf(os.Stderr, "query worker: read the open request: %v\n", err)
		return 2
	}
	if first.Kind != reqOpen || first.Open == nil {
		fmt.Fprintf(os.Stderr, "query worker: the first request is %q, not open\n", first.Kind)
		return 2
	}
	o := first.Open
	conf, err := confine(o)
	if err != nil {
		w.send(workerResponse{ID: first.ID, Err: encodeError(err)})
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	en, err := open(ctx, Options{DataDirs: o.DataDirs, TempDir: o.TempDir, Limits: o.Limits, Isolation: IsolationNone}, o.Setup, nil)
	if err != nil {
		w.send(workerResponse{ID: first.ID, Err: encodeError(err)})
		return 1
	}
	defer en.Close()
	conf.PID = os.Getpid()
	if err := w.send(workerResponse{ID: first.ID, Limits: en.Limits(), Confinement: conf}); err != nil {
		return 1
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for {
		var req workerRequest
		if err := readFrame(in, &req); err != nil {
			// EOF: the parent closed the pipe (Close) or is gone; either way
			// the running queries are abandoned.
			return 0
		}
		switch req.Kind {
		case reqQuery, reqRaw:
			qctx, qcancel := context.WithCancel(ctx)
			w.mu.Lock()
			w.running[req.ID] = qcancel
			w.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer w.finish(req.ID)
				var res *Result
				var err error
				if req.Kind == reqRaw {
					err = errors.New("raw statements are for tests only")
					if rawForTest != nil {
						if err = rawForTest(qctx, en, req.SQL); err == nil {
							res = &Result{}
						}
					}
				} else {
					res, err = en.Query(qctx, req.SQL, decodeArgs(req.Args)...)
				}
				if err := w.send(workerResponse{ID: req.ID, Result: res, Err: encodeError(err)}); err != nil && res != nil {
					// The result would not encode (a value of a type the
					// protocol does not carry): say so instead.
					w.send(workerResponse{ID: req.ID, Err: encodeError(fmt.Errorf("query result: %w", err))})
				}
			}()
		case reqCancel:
			w.mu.Lock()
			if c := w.running[req.ID]; c != nil {
				c()
			}
			w.mu.Unlock()
		}
	}
}

// workerServer is the worker's side of the pipes.
type workerServer struct {
	wmu sync.Mutex // serializes frames on out
	out io.Writer

	mu      sync.Mutex
	running map[uint64]context.CancelFunc
}

func (w *workerServer) send(r workerResponse) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return writeFrame(w.out, r)
}

func (w *workerServer) finish(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.running[id]; c != nil {
		c()
		delete(w.running, id)
	}
}

// confine holds this worker process to what its engine needs, before
// DuckDB is opened (so every thread DuckDB starts inherits it):
//
//   - memory: RLIMIT_DATA at workerDataLimit, so an allocation past it
//     fails in DuckDB (an out-of-memory error) or ends this process, never
//     the server's; and Go's soft limit under it;
//   - with IsolationLandlock, the file system: read-only on the data
//     directories, read-write on the worker's own scratch directory, read
//     on /dev/urandom and /dev/null, nothing else; no TCP bind or connect;
//     no signals or abstract sockets outside the worker. Then it proves
//     the kernel enforces it: creating a file beside the scratch
//     directory must be refused.
func confine(o *workerOpen) (Confinement, error) {
	c := Confinement{Isolation: o.Isolation}
	limits, err := o.Limits.withDefaults()
	if err != nil {
		return c, err
	}
	c.DataLimit = workerDataLimit(limits)
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: c.DataLimit, Max: c.DataLimit}); err != nil {
		return c, fmt.Errorf("query worker: set RLIMIT_DATA: %w", err)
	}
	debug.SetMemoryLimit(int64(c.DataLimit / 2))
	if o.Isolation != IsolationLandlock {
		return c, nil
	}
	abi, err := restrictLandlock(o.DataDirs, o.TempDir)
	if err != nil {
		return c, err
	}
	c.LandlockABI = abi
	probe := filepath.Join(filepath.Dir(o.TempDir), fmt.Sprintf("landlock-probe-%d", os.Getpid()))
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		os.Remove(probe)
		return c, &SandboxError{Setting: "landlock", Got: "created " + probe, Want: "the kernel refuses every write outside the scratch directory"}
	}
	if !errors.Is(err, syscall.EACCES) {
		return c, fmt.Errorf("query worker: Landlock probe: %w", err)
	}
	return c, nil
}

// workerDataLimit is the RLIMIT_DATA of a worker: DuckDB's memory limit,
// twice the result cap (the result in Go values and its encoding), and
// 256 MiB for the rest (the runtimes, DuckDB's allocations outside its
// buffer manager, the threads' arenas). DuckDB's own memory_limit does not
// hold every allocation (a 1 GB string built by repeat() is outside it):
// this one does.
func workerDataLimit(l Limits) uint64 {
	return uint64(l.MemoryBytes) + 2*uint64(l.MaxBytes) + 256<<20
}

// maxFrame bounds one message: a result is capped at Limits.MaxBytes (an
// estimate), so a frame past this is a broken stream, not a big answer.
const maxFrame = 1 << 30

// writeFrame writes v as one frame: its length, then v gob-encoded by an
// encoder of its own.
func writeFrame(w io.Writer, v any) error {
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 0})
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	b := buf.Bytes()
	if len(b)-4 > maxFrame {
		return fmt.Errorf("encode %T: %d bytes, past the %d a frame may hold", v, len(b)-4, maxFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame into v.
func readFrame(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return fmt.Errorf("frame of %d bytes, past %d", size, maxFrame)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("read frame: %w", err)
	}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}
