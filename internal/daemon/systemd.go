package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/sdnotify"
)

// systemd is what 'start' tells systemd under the shipped unit
// (deploy/systemd/pg-cdc.service: Type=notify, WatchdogSec=): that it is
// ready, what it is doing, that it is stopping, and, while its loop is
// alive, watchdog pings. Outside systemd (no $NOTIFY_SOCKET) every method
// does nothing.
//
// A failed notification is logged once per kind at warn and otherwise
// ignored: a lost READY=1 makes systemd time the start out, a lost
// WATCHDOG=1 makes it restart the service, and both say so in the journal;
// neither is a reason for the stream to stop.
type systemd struct {
	n      *sdnotify.Notifier
	log    *slog.Logger
	warned [4]atomic.Bool // per notification kind
}

const (
	notifyReady = iota
	notifyStopping
	notifyStatus
	notifyWatchdog
)

func newSystemd(log *slog.Logger) *systemd {
	return &systemd{n: sdnotify.FromEnv(), log: log}
}

// Ready sends READY=1: start-up is done, `systemctl start` returns.
func (s *systemd) Ready() { s.report(notifyReady, "READY=1", s.n.Ready()) }

// Stopping sends STOPPING=1: the drain has begun (systemd then waits up to
// TimeoutStopSec= for the exit).
func (s *systemd) Stopping() { s.report(notifyStopping, "STOPPING=1", s.n.Stopping()) }

// Status sets the line `systemctl status pg-cdc` shows.
func (s *systemd) Status(status string) {
	s.report(notifyStatus, "STATUS", s.n.Status(status))
}

// RunWatchdog pings WATCHDOG=1 every half of WatchdogSec= (as
// sd_watchdog_enabled(3) advises) for as long as alive() reports true, and
// returns when ctx is done. Without a watchdog it returns at once.
//
// alive says whether the start loop still turns, not whether the source
// or the sink is healthy (start passes its health tracker's liveness, which
// metrics.liveness_timeout bounds): a loop that waits out a PostgreSQL outage
// between retries is alive and keeps the watchdog fed (exit 3 ends that
// wait when it lasts too long), while a loop stuck on a lock or a call that
// never returns stops the pings, and systemd kills it (WatchdogSignal=,
// SIGABRT: the Go runtime prints every goroutine's stack into the journal)
// between one half and one whole WatchdogSec= later, then restarts it
// (Restart=on-failure). The first ping goes out at once when alive.
func (s *systemd) RunWatchdog(ctx context.Context, alive func() bool) {
	interval, ok := s.n.WatchdogInterval()
	if !ok {
		return
	}
	tick := time.NewTicker(interval / 2)
	defer tick.Stop()
	for {
		if alive() {
			s.report(notifyWatchdog, "WATCHDOG=1", s.n.Watchdog())
		} else {
			s.log.Warn("the start loop made no step recently: watchdog pings withheld; systemd restarts pg-cdc if this lasts", "watchdog", interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *systemd) report(kind int, what string, err error) {
	if err != nil && !s.warned[kind].Swap(true) {
		s.log.Warn("systemd notification failed (reported once)", "notification", what, "err", err)
	}
}
