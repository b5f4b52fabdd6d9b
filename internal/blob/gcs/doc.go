// Package gcs is the Google Cloud Storage sink: a blob.Store and
// blob.Conditional on a bucket and an optional prefix, through
// cloud.google.com/go/storage over its HTTP (JSON API) transport.
//
// Invariants:
//
//   - Atomic, durable writes. A GCS object appears only when its upload is
//     finalized, and is durable once the finalizing request returns. Put
//     streams through a storage.Writer: objects up to ChunkSize go in one
//     request, larger ones as a resumable upload of ChunkSize chunks, the
//     last sent by Close. If the caller's reader fails, Put cancels the
//     writer's context before closing it, so the upload is never finalized
//     and no object (and no part of one) is created; an older object under
//     the key stays. Every upload carries a CRC32C of the whole object,
//     which GCS checks before it finalizes.
//   - Compare-and-swap by generation. A Version is the object's generation
//     in decimal. PutIf with the empty version writes with DoesNotExist
//     (ifGenerationMatch=0), otherwise with GenerationMatch; GCS checks the
//     condition atomically at finalize, so exactly one of many concurrent
//     writers with the same expected version wins. HTTP 412 (and 404 for a
//     GenerationMatch on a missing object) is blob.ErrPrecondition. A
//     version that is not a positive decimal was never handed out and fails
//     the same way, without a request. ReadVersion returns the content and
//     the generation of that same content: the reader reports the
//     generation it read, so no separate stat can race a writer.
//   - Keys live under the prefix. Options.Prefix "a/b" stores key k as the
//     object "a/b/k"; List strips the prefix, so two stores with different
//     prefixes in one bucket never see each other's objects. Objects under
//     the prefix whose remainder is not a valid key (a console "folder"
//     placeholder ending in "/") are not listed: no key can address them.
//   - Retries are the storage client's, bounded. Every call retries
//     transient failures (408, 429, 5xx, broken connections) with
//     exponential backoff and jitter under storage.RetryAlways, at most
//     MaxAttempts attempts. The client bounds reads and metadata calls by
//     MaxAttempts itself, but uploads only by time (ChunkRetryDeadline, 32
//     s, per chunk of a multi-chunk upload) or not at all (a one-request
//     upload retries until its context ends), so each writer carries its
//     own retry predicate that counts failed attempts; a chunk that gets
//     through resets the count. RetryAlways rather than the default
//     RetryIdempotent because the default never retries a plain Put:
//     pg-cdc's data keys are deterministic and a replayed write carries
//     the same bytes, so repeating a Put is harmless; conditional writes
//     are idempotent under their preconditions; a repeated Delete finds
//     nothing, which is success. (Delete takes no generation condition, so
//     a retried Delete can remove an object re-created in between, as a
//     first attempt racing the same write can; the garbage collector's
//     grace period, not the sink, keeps live files from being deleted.)
//   - A lost response looks like a lost race. If a PutIf succeeded but its
//     response was lost, the retry finds the new generation and fails with
//     blob.ErrPrecondition. Callers (the manifest commit loop) re-read and
//     recognise their own write by its content.
//
// GCS allows about one write per second to one object name; faster writes
// are answered with 429 and retried with backoff, so a manifest committed
// more often than once a second is slowed down, not broken.
//
// The SDK is used directly, not behind an interface of ours: the tests run
// the real client against fake-gcs-server over loopback HTTP, with a proxy
// that injects faults, which tests the retries, chunked uploads and
// preconditions that a Go-level fake of the SDK would only imitate.
//
// Credentials: Options.CredentialsFile, else Application Default
// Credentials. For an emulator (fake-gcs-server in tests), either set
// STORAGE_EMULATOR_HOST=host:port, which the storage client reads itself
// and which turns authentication off, or set Options.Endpoint and
// Options.NoAuth. An endpoint alone keeps authentication on, because a
// private endpoint of real GCS (Private Service Connect) needs it.
package gcs
