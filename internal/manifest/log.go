package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// The history log keeps every committed manifest version readable (design.md
// §11, history.retention), beside the manifest and without touching it:
// _pgcdc/manifest.json stays the complete current state in its §3 format.
//
// Layout, one object per committed version v (20 digits), in groups of
// LogGroupSize versions (group = v / 1000, 17 digits), so that listing one
// group returns at most about 1,100 keys:
//
//	_pgcdc/log/<group>/<v>.json             the entry: a header and the diff
//	                                        from version v-1 to v (jsondiff.go)
//	_pgcdc/log/<group>/<v>.checkpoint.json  the whole manifest of version v,
//	                                        byte for byte as it was committed:
//	                                        every CheckpointEvery-th version,
//	                                        and whenever the writer cannot be
//	                                        sure version v-1's entry exists
//	_pgcdc/log/oldest.json                  {"version": n}: the oldest version
//	                                        still readable (compact.Collect)
//
// Version v is readable when some checkpoint c ≤ v exists together with
// every entry c+1..v: History.At starts from the newest such checkpoint.
//
// The writer is the Committer, right after each successful compare-and-swap
// (Commit, Create), with the previous version it holds in memory: no
// listing and no read on the hot path. The manifest is the truth, so a log
// write that fails never fails the commit; it is logged, kept to be retried
// once, and the next commit writes a checkpoint if the retry fails too. A
// version the committer learns by reading it (Open, Refresh, Resync, the
// re-read after a conflict) is checked once before the committer builds on
// it, and checkpointed if its entry is missing: a writer killed between its
// compare-and-swap and its log write loses no version.

// Log layout.
const (
	LogPrefix = "_pgcdc/log/"
	// OldestKey records the oldest readable version.
	OldestKey = LogPrefix + "oldest.json"
	// CheckpointEvery is how often a checkpoint is written regardless: a
	// version is at most CheckpointEvery-1 diffs away from one.
	CheckpointEvery = 100
	// LogGroupSize is how many versions share one group prefix.
	LogGroupSize = 1000
)

const (
	entrySuffix      = ".json"
	checkpointSuffix = ".checkpoint.json"
)

// LogGroupPrefix is the key prefix of version v's group.
func LogGroupPrefix(v uint64) string {
	return fmt.Sprintf("%s%017d/", LogPrefix, v/LogGroupSize)
}

// LogEntryKey is the key of version v's entry (its header and diff).
func LogEntryKey(v uint64) string {
	return fmt.Sprintf("%s%020d%s", LogGroupPrefix(v), v, entrySuffix)
}

// CheckpointKey is the key of version v's checkpoint.
func CheckpointKey(v uint64) string {
	return fmt.Sprintf("%s%020d%s", LogGroupPrefix(v), v, checkpointSuffix)
}

// ParseLogKey recognises an entry or checkpoint key; ok is false for any
// other key (oldest.json, a stray object).
func ParseLogKey(key string) (v uint64, checkpoint, ok bool) {
	rest, found := strings.CutPrefix(key, LogPrefix)
	if !found {
		return 0, false, false
	}
	group, name, found := strings.Cut(rest, "/")
	if !found || len(group) != 17 {
		return 0, false, false
	}
	var digits string
	switch {
	case strings.HasSuffix(name, checkpointSuffix):
		digits, checkpoint = strings.TrimSuffix(name, checkpointSuffix), true
	case strings.HasSuffix(name, entrySuffix):
		digits = strings.TrimSuffix(name, entrySuffix)
	default:
		return 0, false, false
	}
	if len(digits) != 20 {
		return 0, false, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || v == 0 || !isDigits(digits) {
		return 0, false, false
	}
	if g, err := strconv.ParseUint(group, 10, 64); err != nil || g != v/LogGroupSize || !isDigits(group) {
		return 0, false, false
	}
	return v, checkpoint, true
}

func keyFor(v uint64, checkpoint bool) string {
	if checkpoint {
		return CheckpointKey(v)
	}
	return LogEntryKey(v)
}

// Header is what the history knows of a version without reconstructing it:
// enough to resolve a point (epoch, LSN, time) to the version.
type Header struct {
	Version uint64  `json:"version"`
	Epoch   uint64  `json:"epoch"`
	EndLSN  cdc.LSN `json:"end_lsn"`
	// CommittedAt is when the version was written (Manifest.CommittedAt).
	CommittedAt time.Time `json:"committed_at"`
	// MaxCommitTime and FlushedAt are the manifest's newest history record's
	// (the newest epoch's); zero when the history is empty.
	MaxCommitTime time.Time `json:"max_commit_time,omitzero"`
	FlushedAt     time.Time `json:"flushed_at,omitzero"`
	// Writer is the process that wrote the version (its commit stamp's
	// writer; Manifest.Writer for an unstamped one).
	Writer string `json:"writer,omitempty"`
}

// HeaderOf returns m's header.
func HeaderOf(m *Manifest) Header {
	h := Header{Version: m.Version, Epoch: m.Epoch, EndLSN: m.EndLSN, CommittedAt: m.CommittedAt, Writer: m.Writer}
	if m.Commit != nil {
		h.Writer = m.Commit.Writer
	}
	var newest *EpochRecord
	for i := range m.History {
		if r := &m.History[i]; newest == nil || r.Epoch >= newest.Epoch {
			newest = r
		}
	}
	if newest != nil {
		h.MaxCommitTime, h.FlushedAt = newest.MaxCommitTime, newest.FlushedAt
	}
	return h
}

// entry is the content of a log entry: the header, then the ops from the
// previous version's encoding to this one's.
type entry struct {
	Header
	Ops []Op `json:"ops"`
}

// encodeEntry renders version next's entry: its header and the diff from
// prev (the previous version's stored bytes, indexed) to nextRaw (its
// own), whose index it returns for the next diff.
func encodeEntry(prev *doc, next *Manifest, nextRaw []byte) ([]byte, *doc, error) {
	nd, err := newDoc(nextRaw)
	if err != nil {
		return nil, nil, fmt.Errorf("log entry of version %d: %w", next.Version, err)
	}
	ops, err := diffDocs(prev, nd)
	if err != nil {
		return nil, nil, fmt.Errorf("log entry of version %d: %w", next.Version, err)
	}
	if ops == nil {
		ops = []Op{}
	}
	data, err := json.Marshal(entry{Header: HeaderOf(next), Ops: ops})
	if err != nil {
		return nil, nil, fmt.Errorf("log entry of version %d: %w", next.Version, err)
	}
	return append(data, '\n'), nd, nil
}

func decodeEntry(data []byte, v uint64) (*entry, error) {
	var e entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode log entry of version %d: %w", v, err)
	}
	if e.Version != v {
		return nil, fmt.Errorf("decode log entry of version %d: it is the entry of version %d", v, e.Version)
	}
	return &e, nil
}

// logState is what a committer knows of its current version's entry.
type logState int

const (
	// logUnknown: the version was read, not written by this committer;
	// its entry is checked before the next version's is written.
	logUnknown logState = iota
	// logWritten: this committer wrote the version's entry (or checked
	// it), and the version is readable from a checkpoint.
	logWritten
	// logBroken: the version is not readable from the log (its entry, or
	// one before it, could not be written); pending, when set, is the one
	// write that would make it readable, retried once by the next commit,
	// which otherwise writes a checkpoint.
	logBroken
)

// pendingWrite is a log write that failed, to retry.
type pendingWrite struct {
	version uint64
	key     string
	data    []byte
	oldest  bool // the write is a first checkpoint: record it as the oldest
}

// record writes next's log entry after its compare-and-swap, prev being
// the version it replaced (nil for the first manifest), the raw arguments
// their stored bytes and prevDoc prevRaw's index when the committer has it
// (nil: built here). Failures are logged and leave the commit alone; they
// decide only what the next commit writes. On return c.rawDoc indexes
// nextRaw when the diff was computed.
func (c *Committer) record(ctx context.Context, prev *Manifest, prevRaw []byte, prevDoc *doc, next *Manifest, nextRaw []byte) {
	chained := c.ensurePrevious(ctx, prev, prevRaw)
	var diff []byte
	diffOK := false
	if prev != nil && prev.Version != 0 && prev.Version+1 == next.Version {
		var err error
		if prevDoc == nil {
			prevDoc, err = newDoc(prevRaw)
		}
		var data []byte
		var nd *doc
		if err == nil {
			data, nd, err = encodeEntry(prevDoc, next, nextRaw)
		}
		switch {
		case err != nil:
			c.logFailure(next.Version, LogEntryKey(next.Version), err)
		default:
			diff, c.rawDoc = data, nd
			if err := c.putLog(ctx, LogEntryKey(next.Version), data); err != nil {
				c.logFailure(next.Version, LogEntryKey(next.Version), err)
			} else {
				diffOK = true
			}
		}
	}
	checkpointOK := false
	if !chained || next.Version%CheckpointEvery == 0 {
		if err := c.putLog(ctx, CheckpointKey(next.Version), nextRaw); err != nil {
			c.logFailure(next.Version, CheckpointKey(next.Version), err)
		} else {
			checkpointOK = true
			if !chained {
				c.ensureOldest(ctx, next.Version)
			}
		}
	}
	switch {
	case chained && diffOK || checkpointOK:
		c.logState, c.pending = logWritten, nil
	case chained && diff != nil:
		c.logState = logBroken
		c.pending = &pendingWrite{version: next.Version, key: LogEntryKey(next.Version), data: diff}
	default:
		c.logState = logBroken
		c.pending = &pendingWrite{version: next.Version, key: CheckpointKey(next.Version), data: nextRaw, oldest: true}
	}
}

// ensurePrevious reports whether prev is readable from the log, so that
// the next version's diff continues a chain. A version this committer read
// is checked once (one or two small reads) and checkpointed when its entry
// is missing: its writer died between its compare-and-swap and its log
// write.
func (c *Committer) ensurePrevious(ctx context.Context, prev *Manifest, prevRaw []byte) bool {
	if prev == nil || prev.Version == 0 {
		return false // the first manifest, or one written before versions existed
	}
	switch c.logState {
	case logWritten:
		return true
	case logBroken:
		p := c.pending
		if p == nil || p.version != prev.Version {
			return false
		}
		if err := c.putLog(ctx, p.key, p.data); err != nil {
			c.logFailure(p.version, p.key, err)
			return false
		}
		if p.oldest {
			c.ensureOldest(ctx, p.version)
		}
		return true
	}
	found, err := c.logged(ctx, prev.Version)
	if err != nil {
		c.logFailure(prev.Version, LogEntryKey(prev.Version), err)
		return false
	}
	if found {
		return true
	}
	c.log.Warn("manifest history: a version another writer committed has no log entry (the writer stopped between its manifest write and its log write); writing its checkpoint",
		"version", prev.Version, "writer", HeaderOf(prev).Writer)
	if err := c.putLog(ctx, CheckpointKey(prev.Version), prevRaw); err != nil {
		c.logFailure(prev.Version, CheckpointKey(prev.Version), err)
		return false
	}
	c.ensureOldest(ctx, prev.Version)
	return true
}

// logged reports whether version v has an entry or a checkpoint.
func (c *Committer) logged(ctx context.Context, v uint64) (bool, error) {
	for _, key := range []string{LogEntryKey(v), CheckpointKey(v)} {
		_, _, err := c.store.ReadVersion(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return false, fmt.Errorf("check log entry: %w", err)
		}
	}
	return false, nil
}

// putLog writes a log object create-only; one that exists with the same
// bytes (a checkpoint two writers wrote) is success.
func (c *Committer) putLog(ctx context.Context, key string, data []byte) error {
	return putCreateOnly(ctx, c.store, key, data)
}

func putCreateOnly(ctx context.Context, store blob.Conditional, key string, data []byte) error {
	_, err := store.PutIf(ctx, key, data, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, blob.ErrPrecondition) {
		return fmt.Errorf("write log %s: %w", key, err)
	}
	existing, _, rerr := store.ReadVersion(ctx, key)
	if rerr != nil {
		return fmt.Errorf("write log %s: it exists and cannot be read: %w", key, rerr)
	}
	if !bytes.Equal(existing, data) {
		return fmt.Errorf("write log %s: it exists with other content", key)
	}
	return nil
}

// ensureOldest records v as the oldest readable version when none is
// recorded yet: the log of a new sink, or of one written before the log
// existed, starts at v. An existing record is left alone.
func (c *Committer) ensureOldest(ctx context.Context, v uint64) {
	data, err := encodeOldest(v)
	if err == nil {
		_, err = c.store.PutIf(ctx, OldestKey, data, "")
	}
	if err != nil && !errors.Is(err, blob.ErrPrecondition) {
		c.logFailure(v, OldestKey, err)
	}
}

func (c *Committer) logFailure(v uint64, key string, err error) {
	c.log.Warn("manifest history: log write failed; the manifest is committed, and the next commit writes a checkpoint if this stays missing",
		"version", v, "key", key, "err", err)
}

// oldestRecord is the content of OldestKey.
type oldestRecord struct {
	Version uint64 `json:"version"`
}

func encodeOldest(v uint64) ([]byte, error) {
	data, err := json.Marshal(oldestRecord{Version: v})
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
