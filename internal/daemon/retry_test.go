package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

func TestRetryWait(t *testing.T) {
	// The defaults of the configuration, whose documentation promises the
	// budget checked below.
	d := config.Default().Retry
	def := RetryPolicy{InitialBackoff: d.InitialBackoff, MaxBackoff: d.MaxBackoff, MaxAttempts: d.MaxAttempts}
	var got []time.Duration
	for attempt := 1; attempt <= def.MaxAttempts; attempt++ {
		got = append(got, def.Wait(attempt))
	}
	s := time.Second
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s}
	if len(got) != len(want) {
		t.Fatalf("%d waits, want %d", len(got), len(want))
	}
	var total time.Duration
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait before retry %d = %v, want %v", i+1, got[i], want[i])
		}
		total += got[i]
	}
	// docs/configuration.md and docs/exit-codes.md say "about 3 minutes".
	if total != 181*time.Second {
		t.Errorf("the default budget waits %v in all, want 3m1s", total)
	}
	// No overflow however long the streak, and never past the cap.
	huge := RetryPolicy{InitialBackoff: time.Hour, MaxBackoff: 1000 * time.Hour}
	for _, attempt := range []int{1, 10, 64, 1000} {
		if w := huge.Wait(attempt); w <= 0 || w > huge.MaxBackoff {
			t.Errorf("retryWait(%+v, %d) = %v", huge, attempt, w)
		}
	}
}

// TestRetryClassification: which session failures are retried is the
// errors' own behaviour (cdc.IsTransient), per class.
func TestRetryClassification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A real failed connect: the postgres adapter classifies it.
	_, refused := postgres.Connect(ctx, postgres.StaticURL("postgres://pgcdc@127.0.0.1:1/none?connect_timeout=5"))
	if refused == nil {
		t.Fatal("a connect to port 1 succeeded")
	}
	classified := func(class error) error {
		return fmt.Errorf("session: %w", &cdc.Error{Class: class, Msg: "m", Hint: "h", Cause: cdc.Transient(errors.New("reset"))})
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused (postgres adapter)", refused, true},
		{"sink request failed after its retries", fmt.Errorf("flush epoch 3: %w: %w", blob.ErrUnavailable, errors.New("503")), true},
		{"silent replication connection", fmt.Errorf("receive: %w", replicate.ErrSilent), true},
		{"slot still held by the last session", &capture.SlotBusyError{Slot: "s", PID: 42}, true},
		{"setup got no answer in time", setupFailed(context.Background(), fmt.Errorf("identify: %w", context.DeadlineExceeded)), true},
		{"deadline after the stop request", setupFailed(canceled(), context.DeadlineExceeded), false},
		{"an error that says nothing", errors.New("boom"), false},
		{"stop request", context.Canceled, false},
		{"usage", cdc.Usage(errors.New("bad")), false},
		{"slot lost", classified(cdc.ErrSlotLost), false},
		{"slot ahead", classified(cdc.ErrSlotAhead), false},
		{"another upstream", classified(cdc.ErrUpstreamMismatch), false},
		{"breaker or takeover", classified(cdc.ErrCASBreaker), false},
		{"sink ignores conditional writes", classified(cdc.ErrSinkUnsafe), false},
		{"sink locked", classified(cdc.ErrSinkLocked), false},
		{"unsupported schema change", classified(cdc.ErrSchemaChanged), false},
		{"unrepresentable value", classified(cdc.ErrData), false},
		{"not initialized", classified(cdc.ErrNotInitialized), false},
		{"retries exhausted", fmt.Errorf("%w after 3 attempts: %w", cdc.ErrRetriesExhausted, errors.New("reset")), false},
	} {
		if got := cdc.IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// fakeManifest is the retry loop's view of the manifest: sessions move
// its end LSN when they make progress.
type fakeManifest struct {
	m       *manifest.Manifest
	resyncs int
	fail    error
}

func (f *fakeManifest) Current() *manifest.Manifest { return f.m }
func (f *fakeManifest) Resync(context.Context) error {
	f.resyncs++
	return f.fail
}

// TestRetryLoop: transient failures are retried with the policy's backoff,
// and the manifest read again before each retry; a session that made
// progress starts the count again; a terminal error ends the loop at once;
// exhausted retries say so; a stop request while waiting ends it cleanly.
func TestRetryLoop(t *testing.T) {
	policy := RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, MaxAttempts: 3}
	transient := fmt.Errorf("receive: %w", replicate.ErrSilent)
	run := func(mf *fakeManifest, results ...func() error) (error, int, []int) {
		var attempts []int
		calls := 0
		l := &retryLoop{policy: policy, mc: mf, log: slog.New(slog.DiscardHandler),
			ended: func(_ error, _ time.Duration, attempt int) { attempts = append(attempts, attempt) },
			session: func(context.Context) error {
				calls++
				if calls > len(results) {
					t.Fatalf("session %d: more sessions than scripted", calls)
				}
				return results[calls-1]()
			}}
		return l.run(context.Background()), calls, attempts
	}
	fail := func(err error) func() error { return func() error { return err } }

	mf := &fakeManifest{m: &manifest.Manifest{EndLSN: 100}}
	err, calls, attempts := run(mf, fail(transient), fail(transient), fail(nil))
	if err != nil || calls != 3 || fmt.Sprint(attempts) != "[1 2]" || mf.resyncs != 2 {
		t.Errorf("two transient failures then a drain: err %v, %d sessions, attempts %v, %d resyncs", err, calls, attempts, mf.resyncs)
	}

	mf = &fakeManifest{m: &manifest.Manifest{EndLSN: 100}}
	progress := func() error { mf.m = &manifest.Manifest{EndLSN: mf.m.EndLSN + 1}; return transient }
	err, calls, attempts = run(mf, fail(transient), fail(transient), progress, fail(transient), fail(transient), fail(transient))
	if !errors.Is(err, cdc.ErrRetriesExhausted) || calls != 6 || fmt.Sprint(attempts) != "[1 2 1 2 3]" {
		t.Errorf("progress resets the count: err %v, %d sessions, attempts %v", err, calls, attempts)
	}
	if !errors.Is(err, replicate.ErrSilent) {
		t.Errorf("the exhausted error lost its cause: %v", err)
	}

	mf = &fakeManifest{m: &manifest.Manifest{EndLSN: 100}}
	lost := &cdc.Error{Class: cdc.ErrSlotLost, Msg: "slot s"}
	err, calls, _ = run(mf, fail(transient), fail(lost))
	if !errors.Is(err, cdc.ErrSlotLost) || calls != 2 {
		t.Errorf("a terminal error after a retry: err %v, %d sessions", err, calls)
	}

	mf = &fakeManifest{m: &manifest.Manifest{EndLSN: 100}, fail: fmt.Errorf("%w: 503", blob.ErrUnavailable)}
	err, calls, _ = run(mf, fail(transient), fail(nil))
	if err != nil || calls != 2 {
		t.Errorf("an unavailable sink at the re-read is retried with the session: err %v, %d sessions", err, calls)
	}
	takeover := &cdc.Error{Class: cdc.ErrCASBreaker, Msg: "taken over"}
	mf = &fakeManifest{m: &manifest.Manifest{EndLSN: 100}, fail: takeover}
	err, calls, _ = run(mf, fail(transient))
	if !errors.Is(err, cdc.ErrCASBreaker) || calls != 1 {
		t.Errorf("a takeover found at the re-read ends the loop: err %v, %d sessions", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	slow := &retryLoop{policy: RetryPolicy{InitialBackoff: time.Hour, MaxBackoff: time.Hour, MaxAttempts: 3},
		mc: &fakeManifest{m: &manifest.Manifest{}}, log: slog.New(slog.DiscardHandler),
		ended:   func(error, time.Duration, int) { cancel() }, // the stop request comes during the wait
		session: func(context.Context) error { return transient }}
	if err := slow.run(ctx); err != nil {
		t.Errorf("a stop request during the backoff: %v, want a clean stop", err)
	}

	// The server ended the connection during the drain's last flush, and
	// only the status confirming it failed (everything received is
	// durable): the stop asked for, never retried.
	calls = 0
	unconfirmed := fmt.Errorf("send standby status: %w", unconfirmedFailure{transient})
	draining := &retryLoop{policy: policy, mc: &fakeManifest{m: &manifest.Manifest{}}, log: slog.New(slog.DiscardHandler),
		ended:   func(error, time.Duration, int) { t.Error("a failure after the stop request was retried") },
		session: func(context.Context) error { calls++; return unconfirmed }}
	if err := draining.run(canceled()); err != nil || calls != 1 {
		t.Errorf("an unsent confirmation during the drain: %v after %d sessions, want a clean stop after 1", err, calls)
	}
	// Any other failure of the drain (something was still buffered) is
	// reported as it is.
	if err := (&retryLoop{policy: policy, mc: &fakeManifest{m: &manifest.Manifest{}}, log: slog.New(slog.DiscardHandler),
		session: func(context.Context) error { return transient }}).run(canceled()); !errors.Is(err, replicate.ErrSilent) {
		t.Errorf("a transient failure with data buffered during the drain: %v, want it reported", err)
	}
	if err := (&retryLoop{policy: policy, mc: &fakeManifest{m: &manifest.Manifest{}}, log: slog.New(slog.DiscardHandler),
		session: func(context.Context) error { return lost }}).run(canceled()); !errors.Is(err, cdc.ErrSlotLost) {
		t.Errorf("a terminal failure during the drain: %v, want it reported", err)
	}
}

// unconfirmedFailure is a session error of class replicate.ErrUnconfirmed,
// as the service returns one.
type unconfirmedFailure struct{ error }

func (e unconfirmedFailure) Is(target error) bool { return target == replicate.ErrUnconfirmed }
func (e unconfirmedFailure) Unwrap() error        { return e.error }
