// Package s3 is the S3 sink: a blob.Store and blob.Conditional on a bucket of
// Amazon S3 or any S3-compatible store, through aws-sdk-go-v2.
//
// Invariants:
//
//   - Keys live under Options.Prefix: with the prefix "a/b", key k is the
//     object "a/b/k", and List strips "a/b/" again. Keys and list prefixes
//     are checked with blob.ValidKey and blob.ValidPrefix before any request.
//   - Atomic, durable writes. A Put is one PutObject, or a multipart upload
//     when the object is larger than Options.PartSize. S3 makes either
//     visible only when it completes (the object appears whole, or not at
//     all), and answers only once the object is stored durably. A multipart
//     upload that fails, or whose reader or context fails, is aborted; the
//     transfer manager does so with a fresh context, and Put aborts again
//     itself in case that failed (AbortMultipartUpload is idempotent).
//     Uploaded parts of an upload that could not be aborted at all (the
//     store unreachable) are invisible; a bucket lifecycle rule
//     AbortIncompleteMultipartUpload reclaims their space.
//   - Compare-and-swap (design.md §2). A Version is the object's ETag exactly
//     as the store returned it, quotes included. PutIf is a single
//     PutObject with If-None-Match: * (create) or If-Match: <etag>
//     (replace), never a multipart upload, so the check and the write are
//     one request the store serialises. A single-part ETag is the MD5 of
//     the content, so a version names content, not a write: after A, B, A
//     the first A's version matches again. That is harmless for a CAS, whose
//     promise is "the object still holds what I read". Stores that ignore
//     the conditional headers exist; blob.ProbeConditional detects them.
//   - Errors. A missing object is blob.ErrNotFound. For PutIf, 412
//     PreconditionFailed, 404 (If-Match on a missing object; AWS answers
//     NoSuchKey) and 409 ConditionalRequestConflict are
//     blob.ErrPrecondition. AWS sends 409 when another conditional write
//     to the key is in flight; whether that write wins is unknown, so the
//     only safe continuation is the one for a lost race: re-read, merge,
//     retry (manifest.Committer's loop, which also counts the conflict for
//     the two-writer breaker). Retrying the same request here would hide a
//     concurrent writer from that count. For the same reason a conditional
//     write whose response was lost and that the SDK retried reports
//     ErrPrecondition although it was applied; the committer recognises
//     its own write on the re-read (issue 6, item 6).
//   - Retries and time. The SDK's standard retryer makes MaxRetries+1
//     attempts with jittered exponential backoff, for throttling, 5xx and
//     connection errors (timeouts included), never for 4xx answers such as
//     412. Every attempt is bounded by Options.RequestTimeout (default 30
//     s), in one of three ways, so that a request into a blackhole is
//     abandoned and retried within it:
//     control requests (the manifest's conditional PutObject, GetObject's
//     headers, List, Delete, Create/Complete/AbortMultipartUpload) take at
//     most that long in all; a GetObject's body is streamed to the caller,
//     so it fails when nothing arrives for that long; an upload of a data
//     file (PutObject, UploadPart; each at most PartSize bytes) fails when
//     it makes no progress for that long: no byte of the body written, none
//     acknowledged by the store (read from the socket's send queue on
//     Linux) and none of the answer received (progress.go). A part on a
//     slow link therefore never fails for being slow, only for stalling;
//     a bound on its whole length would have to assume a minimum speed.
//   - Checksums. By default the SDK sends checksums only where S3 requires
//     them (RequestChecksumCalculation and ResponseChecksumValidation
//     WhenRequired), because several S3-compatible stores reject the
//     trailing CRC32 the SDK has sent by default since 2025; TLS, or over
//     plain HTTP the signed SHA-256 of the payload, still protects the bytes
//     in transit. Options.Checksums turns the SDK's defaults back on (for
//     AWS). versitygw passes the conformance suite either way.
//   - Memory. One Put holds about Concurrency+2 buffers of PartSize bytes:
//     the first part, read before the transfer manager decides between one
//     PutObject and a multipart upload, and a pool of Concurrency+1 for the
//     others. Get streams.
//
// The HTTP client is the SDK's own BuildableClient, never a plain
// *http.Client: config.LoadDefaultConfig adds AWS_CA_BUNDLE's certificates
// through it and fails on any other client type.
package s3
