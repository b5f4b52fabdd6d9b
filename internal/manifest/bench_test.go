package manifest

import (
	"context"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

// benchSink prepares a sink of three tables after flushes flushes (deltas
// kept unless compacted every 20 flushes, history full), on the filesystem
// store or in memory.
func benchSink(b *testing.B, fsStore bool, flushes int, compacted bool) (*sim, *Committer) {
	b.Helper()
	var store sink = memory.New()
	if fsStore {
		store = fsStoreFor(b)
	}
	s, mc := newSim(b, store)
	for i := range flushes {
		s.commit(mc, "flush", flush(simTables, 50, false, s.clock))
		if compacted && i%20 == 19 {
			for _, key := range simTables {
				s.commit(mc, "compact", compactTable(key, 0, s.clock))
			}
			s.commit(mc, "gc", collect(1000))
		}
	}
	return s, mc
}

func fsStoreFor(b *testing.B) sink { return fsStore(b) }

// BenchmarkCommit is one flush of three tables through Commit, log
// included: compare with BenchmarkLogRecord, the log's share of it.
func BenchmarkCommit(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			s, mc := benchSink(b, bc.fs, bc.flushes, bc.compacted)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				s.clock = s.clock.Add(time.Second)
				if _, err := mc.Commit(ctx, flush(simTables, 50, false, s.clock)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(mc.raw)), "manifest-bytes")
		})
	}
}

// BenchmarkLogRecord times only what a commit adds for the history: the
// diff and the entry's write (and, every 100th version, the checkpoint),
// after a compare-and-swap done outside the timer.
func BenchmarkLogRecord(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			s, mc := benchSink(b, bc.fs, bc.flushes, bc.compacted)
			ctx := context.Background()
			var entryBytes int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				s.clock = s.clock.Add(time.Second)
				prev, prevRaw, prevDoc := mc.current, mc.raw, mc.rawDoc
				next := prev.Clone()
				if err := flush(simTables, 50, false, s.clock)(next); err != nil {
					b.Fatal(err)
				}
				next.Version, next.CommittedAt = prev.Version+1, s.clock
				next.Commit = &CommitStamp{Writer: mc.writer, Seq: next.Version}
				data, err := next.Encode()
				if err != nil {
					b.Fatal(err)
				}
				v, err := s.store.PutIf(ctx, Key, data, mc.version)
				if err != nil {
					b.Fatal(err)
				}
				mc.current, mc.version, mc.raw, mc.rawDoc = next, v, data, nil
				b.StartTimer()
				mc.record(ctx, prev, prevRaw, prevDoc, next, data)
				b.StopTimer()
				entryBytes += s.entrySize(next.Version)
				b.StartTimer()
			}
			b.StopTimer()
			if mc.logState != logWritten {
				b.Fatal("a log write failed")
			}
			b.ReportMetric(float64(entryBytes)/float64(b.N), "entry-bytes")
			b.ReportMetric(float64(len(mc.raw)), "manifest-bytes")
		})
	}
}

var benchCases = []struct {
	name      string
	fs        bool
	flushes   int
	compacted bool
}{
	{"fs/compacted", true, 200, true}, // the usual shape: compaction keeps deltas few
	{"fs/100-deltas", true, 100, false},
	{"fs/1000-deltas", true, 1000, false},
	{"memory/1000-deltas", false, 1000, false},
}
