// Package fs is the filesystem sink: a blob.Store, blob.Conditional and
// blob.Locker on a local directory tree. It is the reference for the
// durability rules of design.md §1 and §2 on a POSIX filesystem.
//
// Invariants:
//
//   - Atomic, durable writes. An object is written to a temporary file in
//     its target directory, fsynced, renamed over the key, and the directory
//     is fsynced. A newly created directory is made durable by fsyncing its
//     parent before anything is written into it. A crash at any step leaves
//     the old object or the new one, never a part of one. The temporary file
//     may be left behind; it is never listed.
//   - Scratch files stay invisible. Names starting with ".tmp-" (temporary
//     files) or ".lock-" (conditional-write locks), and _pgcdc/.writer.lock,
//     are never listed. Keys that would collide with them are refused.
//   - Compare-and-swap. A PutIf that replaces (expected version not "")
//     holds an exclusive flock(2) on ".lock-<name>" next to the object while
//     it re-reads the object, compares its SHA-256 with the expected version
//     and replaces it. Every replacing PutIf on the key, in this process or
//     another, is serialised by that lock. A PutIf that creates (expected
//     "") takes no lock: it writes a temporary file and link(2)s it to the
//     key, which fails if anything is there, so exactly one creator wins
//     and nothing is left beside the object. A create and a replace cannot
//     both succeed on one state (one needs the object absent, the other
//     present). A plain Put or a Delete does not take the lock, so a Put on
//     a key that others PutIf breaks the CAS. Lock files are never deleted,
//     because deleting a lock file that another process has open but not yet
//     locked would let two writers in; only keys that are replaced get one.
//   - Locks die with their process. flock locks belong to an open file
//     description. The kernel releases them when the process exits, even on
//     kill -9, so a crash never leaves a stale lock. They are not inherited:
//     Go opens every file with O_CLOEXEC. Two opens conflict even inside one
//     process, so two Store values on the same root exclude each other just
//     as two processes do. This is why O_EXCL lock files are not used.
//   - Empty directories are removed by Delete, up to but never including
//     the root. This keeps List fast after compaction and garbage
//     collection. A write that races the removal retries.
//
// The root must be on a local filesystem where flock(2), fsync(2), link(2)
// and rename(2) behave as POSIX says. Network filesystems often emulate flock
// loosely or not at all.
package fs
