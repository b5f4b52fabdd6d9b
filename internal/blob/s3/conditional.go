package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// ReadVersion returns the object's content and its ETag, from one
// GetObject, so the two always belong together.
func (s *Store) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return nil, "", fmt.Errorf("get object: %w", err)
	}
	out, err := s.getObject(ctx, key)
	if err != nil {
		return nil, "", err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("get object %s: read: %w", s.url(key), err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return nil, "", fmt.Errorf("get object %s: the store returned no ETag, so it cannot be compared and swapped", s.url(key))
	}
	return data, blob.Version(etag), nil
}

// PutIf writes data with one PutObject carrying If-None-Match: * (expected
// == "") or If-Match: expected. See doc.go for the errors that mean
// blob.ErrPrecondition, 409 included.
func (s *Store) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return "", fmt.Errorf("put object if version: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put object %s if version %q: %w", s.url(key), expected, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.objectKey(key)),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if expected == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(string(expected))
	}
	out, err := s.api.PutObject(ctx, in)
	if err != nil {
		if isPrecondition(err) {
			return "", fmt.Errorf("put object %s if version %q: %w (%w)", s.url(key), expected, blob.ErrPrecondition, err)
		}
		return "", fmt.Errorf("put object %s if version %q: %w", s.url(key), expected, err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return "", fmt.Errorf("put object %s if version %q: the store returned no ETag", s.url(key), expected)
	}
	return blob.Version(etag), nil
}

// isPrecondition reports whether a conditional PutObject failed because
// the object is not at the expected version: 412; 409, a concurrent
// conditional write (doc.go says why it counts); or NoSuchKey, the answer
// to If-Match on a missing object. Other 404s (NoSuchBucket, a wrong
// endpoint) are not.
func isPrecondition(err error) bool {
	switch statusOf(err) {
	case 412, 409:
		return true
	}
	return hasCode(err, "PreconditionFailed") || hasCode(err, "ConditionalRequestConflict") || isNotFound(err)
}

// isNotFound reports whether err says the object does not exist: S3's
// NoSuchKey. A bare 404 is not enough (the SDK names it NotFound): a wrong
// endpoint answering 404 to everything must not read as an empty sink.
// No method here uses HeadObject, whose 404 has no body to tell.
func isNotFound(err error) bool {
	return hasCode(err, "NoSuchKey")
}

func hasCode(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}

// statusOf returns the HTTP status of a response error, or 0.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
