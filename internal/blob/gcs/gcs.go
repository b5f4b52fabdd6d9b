package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Conditional = (*Store)(nil)
)

// Defaults for the zero Options fields.
const (
	// DefaultChunkSize is the storage client's own default. Each Put in
	// flight holds one buffer of this size, so that a failed chunk can be
	// sent again.
	DefaultChunkSize = 16 << 20
	// DefaultMaxAttempts bounds the attempts of every call, first try
	// included; for uploads, the consecutive failed attempts.
	DefaultMaxAttempts = 5
	// chunkRetryDeadline also bounds the retries of one upload chunk in
	// time (the storage client's default, made explicit).
	chunkRetryDeadline = 32 * time.Second
)

// backoff between retries; the storage client adds jitter.
var backoff = gax.Backoff{Initial: 250 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2}

// EmulatorHostEnv is the environment variable the storage client reads to
// talk to an emulator without authentication.
const EmulatorHostEnv = "STORAGE_EMULATOR_HOST"

// Options configure a Store.
type Options struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix, if set, is the folder inside the bucket that is the sink
	// root: "a/b" (or "a/b/") stores key k as the object "a/b/k".
	Prefix string
	// CredentialsFile is a JSON credentials file (service account,
	// authorized user, external account or impersonated service account).
	// Empty means Application Default Credentials.
	CredentialsFile string
	// Endpoint overrides the JSON API endpoint, for an emulator or a
	// private endpoint. A URL without a path ("http://127.0.0.1:4443")
	// gets the API path "/storage/v1/".
	Endpoint string
	// NoAuth sends requests without credentials; for an emulator behind
	// Endpoint. (STORAGE_EMULATOR_HOST implies it.)
	NoAuth bool
	// ChunkSize is the upload chunk size (rounded up to 256 KiB by the
	// client); objects up to it are uploaded in one request. Zero means
	// DefaultChunkSize.
	ChunkSize int
	// MaxAttempts bounds the attempts of every call (for an upload: the
	// failed attempts in a row, as a chunk that got through resets the
	// count). Zero means DefaultMaxAttempts.
	MaxAttempts int
	// Client, if set, is used as it is (tests pass one connected to an
	// in-process fake) and is not closed by Store.Close. CredentialsFile,
	// Endpoint and NoAuth must then be empty.
	Client *storage.Client
	// OnRetry, if set, is called for every failed attempt the client is
	// about to retry (a 5xx, a 429, a reset): metrics see a store that
	// recovers on its own but needed to.
	OnRetry func()
}

// Store is a sink in a GCS bucket. It is safe for concurrent use.
type Store struct {
	client     *storage.Client
	ownsClient bool
	bucketName string
	bucket     *storage.BucketHandle // with the retry policy applied
	prefix     string                // "" or ends in "/"

	chunkSize    int
	maxAttempts  int
	listPageSize int // 0: the server's default (1000); tests lower it
	onRetry      func()
}

// New returns a store on opts.Bucket. It makes no request: a missing bucket
// or missing permissions show on the first call.
func New(ctx context.Context, opts Options) (*Store, error) {
	if err := validBucket(opts.Bucket); err != nil {
		return nil, fmt.Errorf("open gcs sink: %w", err)
	}
	where := "gs://" + opts.Bucket
	if err := blob.ValidPrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("open gcs sink %s: %w", where, err)
	}
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	if prefix != "" {
		prefix += "/"
		where += "/" + prefix
	}
	if opts.ChunkSize < 0 || opts.MaxAttempts < 0 {
		return nil, fmt.Errorf("open gcs sink %s: negative chunk size or attempts", where)
	}
	s := &Store{
		client:      opts.Client,
		bucketName:  opts.Bucket,
		prefix:      prefix,
		chunkSize:   orDefault(opts.ChunkSize, DefaultChunkSize),
		maxAttempts: orDefault(opts.MaxAttempts, DefaultMaxAttempts),
	}
	if s.client == nil {
		copts, err := clientOptions(opts)
		if err != nil {
			return nil, fmt.Errorf("open gcs sink %s: %w", where, err)
		}
		c, err := storage.NewClient(ctx, copts...)
		if err != nil {
			return nil, fmt.Errorf("open gcs sink %s: %w", where, err)
		}
		s.client, s.ownsClient = c, true
	} else if opts.CredentialsFile != "" || opts.Endpoint != "" || opts.NoAuth {
		return nil, fmt.Errorf("open gcs sink %s: a ready client takes no credentials file, endpoint or NoAuth", where)
	}
	s.onRetry = opts.OnRetry
	s.bucket = s.client.Bucket(opts.Bucket).Retryer(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithMaxAttempts(s.maxAttempts),
		storage.WithBackoff(backoff),
		storage.WithErrorFunc(s.shouldRetry),
	)
	return s, nil
}

// shouldRetry is the client's own rule, counted.
func (s *Store) shouldRetry(err error) bool {
	retry := storage.ShouldRetry(err)
	if retry && s.onRetry != nil {
		s.onRetry()
	}
	return retry
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// validBucket accepts the characters GCS allows in bucket names; the
// service checks the rest.
func validBucket(name string) error {
	if name == "" {
		return errors.New("no bucket given")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("invalid bucket name %q", name)
		}
	}
	return nil
}

func clientOptions(opts Options) ([]option.ClientOption, error) {
	// JSON reads: every other call uses the JSON API, and the client's
	// documentation recommends it for consistency; it also works on
	// emulators, where XML reads depend on the host name.
	copts := []option.ClientOption{storage.WithJSONReads()}
	emulator := os.Getenv(EmulatorHostEnv) != ""
	if opts.CredentialsFile != "" {
		if opts.NoAuth || emulator {
			return nil, fmt.Errorf("a credentials file is given, but authentication is off (NoAuth or %s)", EmulatorHostEnv)
		}
		typ, err := credentialsType(opts.CredentialsFile)
		if err != nil {
			return nil, err
		}
		copts = append(copts, option.WithAuthCredentialsFile(typ, opts.CredentialsFile))
	}
	if opts.Endpoint != "" {
		ep, err := endpointURL(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		copts = append(copts, option.WithEndpoint(ep))
	}
	if opts.NoAuth && !emulator { // the client adds it for an emulator itself
		copts = append(copts, option.WithoutAuthentication())
	}
	return copts, nil
}

// credentialsType reads the "type" of a credentials file, so that it is
// loaded as that type (option.WithAuthCredentialsFile) and nothing else.
func credentialsType(path string) (option.CredentialsType, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read credentials file: %w", err)
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return "", fmt.Errorf("credentials file %s: not JSON: %w", path, err)
	}
	for _, t := range []option.CredentialsType{option.ServiceAccount, option.AuthorizedUser,
		option.ExternalAccount, option.ImpersonatedServiceAccount} {
		if string(t) == f.Type {
			return t, nil
		}
	}
	return "", fmt.Errorf("credentials file %s: unsupported type %q", path, f.Type)
}

func endpointURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("invalid endpoint %q: want http(s)://host[:port][/path]", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/storage/v1/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// Close releases the client if New created it.
func (s *Store) Close() error {
	if !s.ownsClient {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("close gcs client: %w", err)
	}
	return nil
}

// URL names the sink root: gs://bucket/ or gs://bucket/prefix/.
func (s *Store) URL() string { return "gs://" + s.bucketName + "/" + s.prefix }

func (s *Store) url(key string) string { return s.URL() + key }

func (s *Store) object(key string) *storage.ObjectHandle {
	return s.bucket.Object(s.prefix + key)
}

// Put streams r into the object. See doc.go for atomicity.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", s.url(key), err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.newWriter(wctx, s.object(key), s.chunkSize)
	if _, err := io.Copy(w, r); err != nil {
		// Cancel before Close: Close ends the stream, and an upload
		// that saw its end would be finalized with what it has. With
		// the context canceled, no request can finalize it.
		cancel()
		_ = w.Close() // waits for the upload goroutine; the error is ctx's
		return fmt.Errorf("put %s: %w", s.url(key), err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("put %s: %w", s.url(key), err)
	}
	return nil
}

// newWriter returns a writer on o whose retries are bounded. The storage
// client applies MaxAttempts to every call but uploads: it retries an
// upload chunk until ChunkRetryDeadline, and a single-request upload until
// the context ends. So each writer gets its own retry predicate that counts
// failed attempts, and a chunk that gets through resets the count.
func (s *Store) newWriter(ctx context.Context, o *storage.ObjectHandle, chunkSize int) *storage.Writer {
	var failed atomic.Int32
	// Object handles carry their own copy of the retry settings, so this
	// changes no other call's.
	o = o.Retryer(storage.WithErrorFunc(func(err error) bool {
		return s.shouldRetry(err) && int(failed.Add(1)) < s.maxAttempts
	}))
	w := o.NewWriter(ctx)
	w.ProgressFunc = func(int64) { failed.Store(0) }
	w.ChunkSize = chunkSize
	w.ChunkRetryDeadline = chunkRetryDeadline
	w.ContentType = "application/octet-stream" // no sniffing
	return w
}

// Get opens the object for reading.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blob.ValidKey(key); err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	r, err := s.object(key).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.url(key), notFound(err))
	}
	return &reader{r: r, url: s.url(key)}, nil
}

// reader names the object in read errors; the storage client already
// resumes a broken download where it stopped, on the same generation.
type reader struct {
	r   *storage.Reader
	url string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read %s: %w", r.url, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.r.Close() }

// List returns the objects under the prefix, sorted by key, reading every
// page of the listing.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	if err := blob.ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	q := &storage.Query{Prefix: s.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Created", "Updated"}); err != nil {
		return nil, fmt.Errorf("list %s: %w", s.url(prefix), err)
	}
	it := s.bucket.Objects(ctx, q)
	it.PageInfo().MaxSize = s.listPageSize
	infos := []blob.ObjectInfo{}
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.url(prefix), err)
		}
		key, ok := strings.CutPrefix(a.Name, s.prefix)
		if !ok || blob.ValidKey(key) != nil {
			continue // not addressable by a key; see doc.go
		}
		// The later of the two: Updated moves on metadata changes too,
		// which only makes an object look younger to garbage collection.
		modified := a.Created
		if a.Updated.After(modified) {
			modified = a.Updated
		}
		infos = append(infos, blob.ObjectInfo{Key: key, Size: a.Size, Modified: modified})
	}
	// GCS lists in name order already; sorting keeps the contract
	// independent of the server.
	slices.SortFunc(infos, func(a, b blob.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete removes the object; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	err := s.object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("delete %s: %w", s.url(key), err)
	}
	return nil
}

// ReadVersion returns the object's content and the generation of exactly
// that content.
func (s *Store) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return nil, "", fmt.Errorf("read version: %w", err)
	}
	r, err := s.object(key).NewReader(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("read version of %s: %w", s.url(key), notFound(err))
	}
	defer r.Close()
	gen := r.Attrs.Generation
	if gen <= 0 {
		return nil, "", fmt.Errorf("read version of %s: the server reported no generation", s.url(key))
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, "", fmt.Errorf("read version of %s: %w", s.url(key), err)
	}
	return data, formatVersion(gen), nil
}

// PutIf writes data if the object's generation is expected ("" = absent).
func (s *Store) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return "", fmt.Errorf("conditional put: %w", err)
	}
	cond := storage.Conditions{DoesNotExist: true}
	if expected != "" {
		gen, err := strconv.ParseInt(string(expected), 10, 64)
		if err != nil || gen <= 0 || formatVersion(gen) != expected {
			return "", fmt.Errorf("conditional put %s: version %q was never handed out: %w", s.url(key), expected, blob.ErrPrecondition)
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("conditional put %s: %w", s.url(key), err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One request: the chunk is larger than the data, so the client
	// buffers it whole and can resend it on a retry.
	w := s.newWriter(wctx, s.object(key).If(cond), len(data)+1)
	w.CRC32C = crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	w.SendCRC32C = true
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return "", fmt.Errorf("conditional put %s: %w", s.url(key), s.precondition(err, expected))
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("conditional put %s: %w", s.url(key), s.precondition(err, expected))
	}
	return formatVersion(w.Attrs().Generation), nil
}

// precondition maps a failed condition to blob.ErrPrecondition, keeping
// the service's error in the chain.
func (s *Store) precondition(err error, expected blob.Version) error {
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		return err
	}
	switch {
	case gerr.Code == http.StatusPreconditionFailed,
		// GenerationMatch on a missing object: some servers answer 404.
		gerr.Code == http.StatusNotFound && expected != "":
		return fmt.Errorf("%w: %w", blob.ErrPrecondition, err)
	}
	return err
}

func notFound(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("%w: %w", blob.ErrNotFound, err)
	}
	return err
}

func formatVersion(gen int64) blob.Version { return blob.Version(strconv.FormatInt(gen, 10)) }
