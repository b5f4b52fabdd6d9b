package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Conditional = (*Store)(nil)
)

// Defaults for the zero Options fields.
const (
	// DefaultMaxRetries is the number of retries after a first attempt
	// that failed with a retryable error (aws.max_retries).
	DefaultMaxRetries = 5
	// DefaultPartSize is the multipart part size; objects up to it are
	// uploaded with one PutObject.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's minimum size of every part but the last.
	MinPartSize = 5 << 20
	// DefaultConcurrency is the number of parts of one Put in flight.
	DefaultConcurrency = 4
	// DefaultRequestTimeout bounds one attempt of a request; see doc.go.
	// Well under a minute, so that a request into a blackhole is abandoned
	// and retried while a short outage lasts; well over what a healthy
	// store needs for any request but an upload, which it bounds by
	// progress instead.
	DefaultRequestTimeout = 30 * time.Second
	// defaultRegion signs requests to a custom endpoint when no region is
	// configured anywhere; S3-compatible stores accept any region or this
	// one.
	defaultRegion = "us-east-1"
)

// Options configure a Store.
type Options struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix, if set, is the folder inside the bucket that is the sink
	// root: "a/b" (or "a/b/") stores key k as the object "a/b/k".
	Prefix string
	// Region is the bucket's region. Empty means the AWS environment's
	// (AWS_REGION, the shared config profile), or "us-east-1" when an
	// Endpoint is set and the environment names none.
	Region string
	// Endpoint overrides the S3 endpoint, for S3-compatible stores
	// ("http://127.0.0.1:7070", "https://minio.example.com").
	Endpoint string
	// ForcePathStyle addresses the bucket in the path
	// (endpoint/bucket/key) instead of the host name (bucket.endpoint/key).
	// Most S3-compatible stores need it.
	ForcePathStyle bool
	// MaxRetries is the number of retries of a request after its first
	// attempt. Zero means DefaultMaxRetries; negative means none.
	MaxRetries int
	// PartSize is the multipart part size, at least MinPartSize. Zero
	// means DefaultPartSize.
	PartSize int64
	// Concurrency is the number of parts of one Put uploaded at once. Zero
	// means DefaultConcurrency.
	Concurrency int
	// RequestTimeout bounds each attempt of a request (see doc.go): an
	// upload (PutObject of a data file, UploadPart) fails when it makes no
	// progress for this long, a download when nothing arrives for this
	// long, and any other request when it takes this long in all. Zero
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Checksums sends a CRC32 checksum with every upload and validates the
	// checksums of downloads that carry one: the SDK's default for AWS
	// since 2025. Off, checksums are sent only where S3 requires them,
	// because several S3-compatible stores reject the SDK's trailing
	// checksums; TLS (or, over plain HTTP, the signed payload hash) still
	// protects the bytes in transit.
	Checksums bool
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials,
	// for tests and emulators. Empty means the standard AWS credential
	// chain (environment, shared files, web identity, ECS, EC2 IMDS).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// OnRetry, if set, is called for every failed attempt the SDK's
	// retryer is about to retry (a 5xx, SlowDown, a reset, a timed-out
	// attempt): metrics see a store that recovers on its own but needed to.
	OnRetry func()

	// backoff replaces the retryer's jittered exponential backoff, so
	// that tests of retries need not wait.
	backoff retry.BackoffDelayer
}

// api is the part of the S3 client the Store uses, so that tests can put a
// fake in front of it. The transfer manager needs the rest.
type api interface {
	transfermanager.S3APIClient
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Store is an S3 sink. Its methods are safe for concurrent use.
type Store struct {
	api      api
	uploader *transfermanager.Client
	bucket   string
	root     string // "" or the prefix with one trailing "/"
	// streaming is applied to GetObject calls: the HTTP client without a
	// whole-request timeout, whose connections fail on inactivity instead.
	streaming func(*s3.Options)
	pageSize  int32 // ListObjectsV2 MaxKeys; 0 means the store's default
	// abortTimeout bounds aborting a failed multipart upload, with a
	// context of its own: the caller's may be what failed.
	abortTimeout time.Duration
}

// New returns a Store for opts. It checks the options and loads the AWS
// configuration (region, credentials) but sends no request; a bucket that
// does not exist or refuses the credentials fails the first call.
func New(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// The SDK's BuildableClient, not an *http.Client: LoadDefaultConfig
	// installs AWS_CA_BUNDLE through it (see doc.go).
	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient()),
		config.WithRetryer(func() aws.Retryer {
			r := retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opts.MaxRetries + 1
				if opts.backoff != nil {
					o.Backoff = opts.backoff
				}
			})
			if opts.OnRetry == nil {
				return r
			}
			return countingRetryer{Standard: r, onRetry: opts.OnRetry}
		}),
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.AccessKeyID != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3 sink: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if opts.Endpoint == "" {
			return nil, errors.New("s3 sink: no region: set one in the sink options or the AWS environment (AWS_REGION)")
		}
		cfg.Region = defaultRegion
	}
	base, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return nil, fmt.Errorf("s3 sink: AWS configuration has HTTP client %T, want the SDK's buildable client", cfg.HTTPClient)
	}
	// Three clients, one per kind of attempt (doc.go, "Retries and
	// time"): control requests are bounded as a whole; a GetObject's body
	// goes to the caller, so its connection fails on inactivity; an upload
	// fails when it stops making progress (progress.go).
	cfg.HTTPClient = base.WithTimeout(opts.RequestTimeout)
	streamingClient := base.WithReadTimeout(opts.RequestTimeout)
	uploadClient := base.WithTransportOptions(progressTimeouts(opts.RequestTimeout))

	checksums := aws.RequestChecksumCalculationWhenRequired
	validation := aws.ResponseChecksumValidationWhenRequired
	if opts.Checksums {
		checksums = aws.RequestChecksumCalculationWhenSupported
		validation = aws.ResponseChecksumValidationWhenSupported
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.ForcePathStyle
		o.RequestChecksumCalculation = checksums
		o.ResponseChecksumValidation = validation
		// With validation off the SDK would log, per response, that it
		// skipped one.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	s := newStore(client, func(o *s3.Options) { o.HTTPClient = uploadClient }, opts, checksums)
	s.streaming = func(o *s3.Options) { o.HTTPClient = streamingClient }
	return s, nil
}

// uploadAPI sends the uploads of data files (the transfer manager's
// PutObject and UploadPart calls) through the upload client; every other
// call keeps the client's own.
type uploadAPI struct {
	api
	upload func(*s3.Options)
}

func (u uploadAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return u.api.PutObject(ctx, in, append(optFns, u.upload)...)
}

func (u uploadAPI) UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	return u.api.UploadPart(ctx, in, append(optFns, u.upload)...)
}

// newStore builds the Store around c; upload is applied to the calls that
// upload data files. opts has its defaults.
func newStore(c api, upload func(*s3.Options), opts Options, checksums aws.RequestChecksumCalculation) *Store {
	root := strings.Trim(opts.Prefix, "/")
	if root != "" {
		root += "/"
	}
	return &Store{
		api: c,
		uploader: transfermanager.New(uploadAPI{api: c, upload: upload}, func(o *transfermanager.Options) {
			o.PartSizeBytes = opts.PartSize
			// Multipart from the first byte past one part. The transfer
			// manager reads up to the threshold before it decides, and
			// uploads an object of exactly the threshold in parts.
			o.MultipartUploadThreshold = opts.PartSize + 1
			o.Concurrency = opts.Concurrency
			o.RequestChecksumCalculation = checksums
			// Abort with a fresh context, so that a canceled Put still
			// aborts its upload.
			o.FailTimeout = opts.RequestTimeout
		}),
		bucket:       opts.Bucket,
		root:         root,
		streaming:    func(*s3.Options) {},
		abortTimeout: opts.RequestTimeout,
	}
}

func (o Options) withDefaults() (Options, error) {
	if o.Bucket == "" {
		return o, errors.New("s3 sink: no bucket")
	}
	if p := strings.Trim(o.Prefix, "/"); p != "" {
		if err := blob.ValidKey(p); err != nil {
			return o, fmt.Errorf("s3 sink: prefix: %w", err)
		}
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	switch {
	case o.PartSize == 0:
		o.PartSize = DefaultPartSize
	case o.PartSize < MinPartSize:
		return o, fmt.Errorf("s3 sink: part size %d is below the S3 minimum of %d bytes", o.PartSize, MinPartSize)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	return o, nil
}

// String names the sink root as s3://bucket/prefix/, for logs and errors.
func (s *Store) String() string { return "s3://" + s.bucket + "/" + s.root }

// objectKey is the bucket key of a sink key.
func (s *Store) objectKey(key string) string { return s.root + key }

// url names an object in errors.
func (s *Store) url(key string) string { return "s3://" + s.bucket + "/" + s.root + key }

// Put uploads r's content to key: one PutObject up to PartSize bytes, a
// multipart upload beyond. A failure of r, ctx or the store leaves the old
// object (or none) and aborts the multipart upload.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %s: %w", s.url(key), err)
	}
	_, err := s.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.objectKey(key)),
		Body:   r,
	})
	if err != nil {
		var mpu transfermanager.MultipartUploadError
		if errors.As(err, &mpu) {
			// The transfer manager has aborted already, unless the abort
			// itself failed. A second abort of an aborted upload answers
			// NoSuchUpload, which is the outcome wanted.
			if aerr := s.abort(key, mpu.UploadID()); aerr != nil {
				err = errors.Join(err, aerr)
			}
		}
		return fmt.Errorf("put object %s: %w", s.url(key), err)
	}
	return nil
}

func (s *Store) abort(key, uploadID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.abortTimeout)
	defer cancel()
	_, err := s.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(s.bucket),
		Key:      aws.String(s.objectKey(key)),
		UploadId: aws.String(uploadID),
	})
	if err != nil && !hasCode(err, "NoSuchUpload") {
		return fmt.Errorf("abort multipart upload %s of %s: %w", uploadID, s.url(key), err)
	}
	return nil
}

// Get opens the object for reading; the body streams from the store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blob.ValidKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	out, err := s.getObject(ctx, key)
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (s *Store) getObject(ctx context.Context, key string) (*s3.GetObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %s: %w", s.url(key), err)
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.objectKey(key)),
	}, s.streaming)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("get object %s: %w", s.url(key), blob.ErrNotFound)
		}
		return nil, fmt.Errorf("get object %s: %w", s.url(key), err)
	}
	return out, nil
}

// List returns every object under the sink root whose key starts with
// prefix, sorted by key. S3 lists in byte order, but some compatible stores
// (versitygw's posix backend walks directories) do not, so List sorts.
// Objects whose names are not valid keys (folder markers "x/", names with
// "//") are left out: no method of the port can address them.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	if err := blob.ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list objects %s: %w", s.url(prefix), err)
	}
	in := &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.root + prefix),
	}
	if s.pageSize > 0 {
		in.MaxKeys = aws.Int32(s.pageSize)
	}
	out := []blob.ObjectInfo{}
	pages := s3.NewListObjectsV2Paginator(s.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list objects %s: %w", s.url(prefix), err)
		}
		for _, o := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(o.Key), s.root)
			if !ok || blob.ValidKey(key) != nil {
				continue
			}
			out = append(out, blob.ObjectInfo{
				Key:      key,
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	slices.SortFunc(out, func(a, b blob.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete removes the object; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %s: %w", s.url(key), err)
	}
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.objectKey(key)),
	})
	// S3 answers 204 for a missing key; some compatible stores NoSuchKey.
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete object %s: %w", s.url(key), err)
	}
	return nil
}

// countingRetryer tells OnRetry about every failed attempt the standard
// retryer judges retryable: the retry middleware asks IsErrorRetryable once
// per failed attempt.
type countingRetryer struct {
	*retry.Standard
	onRetry func()
}

func (r countingRetryer) IsErrorRetryable(err error) bool {
	ok := r.Standard.IsErrorRetryable(err)
	if ok {
		r.onRetry()
	}
	return ok
}
