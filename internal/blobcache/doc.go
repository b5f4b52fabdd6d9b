// Package blobcache gives the read path local files for the data files of
// an object-store sink: a bounded read-through cache in a private directory,
// filled through the sink's own blob.Store, so that DuckDB reads local
// Parquet files and needs no network extension. A filesystem sink is read in
// place and never copied (InPlace; Open picks one or the other).
//
// A caller names each file by its key and the byte size the manifest
// records for it (File). Acquire returns a local path per file and a release
// function; Path is the same for one file without a lease.
//
// Invariants:
//
//   - Only whole files are served. A download goes to a temporary file in
//     Dir (".tmp-*"), is fsynced, and is renamed to its final name only when
//     its length equals the manifest's size; a short or long body is a
//     *SizeError naming the key and both sizes, and leaves nothing behind.
//     The size is the one check: sink data files are immutable once
//     committed (a replayed flush may rewrite only an uncommitted key, and
//     the read path asks only for committed ones), so (key, size) names one
//     content for the life of the sink.
//   - Local names are hashes, not keys: "<sha256(key) hex>-<size><ext>",
//     flat in Dir, where ext is the key's extension (".parquet") when it is
//     short and alphanumeric, so DuckDB still recognises the file type. A
//     key never becomes a path, so no key can escape Dir (keys blob.ValidKey
//     refuses are refused anyway); keys longer than a file name, a key that
//     is a prefix of another ("a/b" and "a/b/c"), and keys differing only in
//     case on a case-insensitive filesystem all still get files of their
//     own; and eviction never leaves empty directories to clean up. Putting
//     the size in the name makes a restart check a stat: a file whose length
//     is the size in its name is whole (it was fsynced before the rename).
//     The price is that a local path does not show its key; the cache keeps
//     the key, and every error names it.
//   - One download per file. Concurrent requests for the same (key, size)
//     share one download; the caller that started it does it in its own
//     goroutine and the others wait. If that caller's context ends, a
//     waiter whose context is still live downloads the file itself; any
//     other failure is returned to every waiter and nothing is cached, so
//     the next request tries again. At most Options.Downloads (4) downloads
//     run at once in the whole cache; an Acquire of many files fans out up
//     to the same bound and waits for its goroutines before it returns.
//   - Files in use are never evicted. A file is in use while a lease
//     (Acquire until release) holds it, while a caller waits for it, and
//     while it downloads. Every file of one Acquire is pinned before any of
//     them is downloaded, so one query's downloads never evict its own
//     files.
//   - The bound. Bytes of cached files plus downloads under way are
//     "used". Before a download starts its size is reserved and files not in
//     use are evicted, least recently used first, until used <= MaxBytes or
//     nothing more can go; releasing a lease evicts the same way. So used
//     never exceeds max(MaxBytes, bytes in use), and when nothing is in use
//     it is at most MaxBytes. Leases are not refused for want of room: a
//     query waiting for another to finish could deadlock with it, and the
//     query layer's own concurrency limit bounds the bytes in use.
//   - Lease sets larger than the bound are refused. An Acquire of two or
//     more files whose sizes add up to more than MaxBytes fails at once with
//     a *TooLargeError, before any download: the caller can narrow the query,
//     and the operator learns the cache is too small. A single file larger
//     than MaxBytes is served all the same (no narrower query could read
//     it): it is downloaded like any other, held beyond the bound while
//     leased, and, being over the bound by itself, evicted as soon as its
//     last lease is released.
//   - Path leases nothing. The file it names can be evicted as soon as
//     another download or release needs room; it suits a caller that opens
//     the file at once (an open file survives its unlink on POSIX) or
//     prefetches. A query that opens files later must Acquire them.
//   - Errors. A missing object matches blob.ErrNotFound (the read path
//     turns it into "the version was collected, retry"); other store
//     failures are wrapped with the key and keep their chain (blob.
//     ErrUnavailable stays transient).
//   - The directory is the cache's alone. Dir is created 0700 if missing
//     and refused if it is readable by others; one Cache at a time holds it,
//     by an flock on Dir/.lock (a second one fails at once, in this process
//     or another; the kernel drops the lock if the process dies). New
//     removes leftover temporary files, reuses every file whose length is
//     the size in its name and removes the others, evicts down to MaxBytes
//     (oldest first: recency is not kept across restarts, download time
//     stands in for it), and leaves files with names it did not make alone.
//   - Eviction unlinks under the cache's mutex, so a file being evicted can
//     never race a new download of the same name. One debug line is logged
//     per eviction burst.
package blobcache
