package blobcache

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by a Cache after Close.
var ErrClosed = errors.New("blob cache is closed")

// ErrInUse is the class of the error Open returns when another Cache (in
// this process or another) holds the directory.
var ErrInUse = errors.New("blob cache directory is in use")

// SizeError reports an object whose length is not the size the manifest
// records for it. Nothing is cached.
type SizeError struct {
	Key string
	// Expected is the manifest's size.
	Expected int64
	// Actual is the object's length; when AtLeast is set the object is
	// longer than Expected and Actual is only a lower bound (the download
	// stops one byte past Expected, and the store did not say more).
	Actual  int64
	AtLeast bool
}

func (e *SizeError) Error() string {
	more := ""
	if e.AtLeast {
		more = "at least "
	}
	return fmt.Sprintf("object %q is %s%d bytes, but the manifest records %d bytes", e.Key, more, e.Actual, e.Expected)
}

// TooLargeError reports a lease set whose files add up to more than the
// cache's bound (see doc.go). Nothing was downloaded.
type TooLargeError struct {
	Files    int
	Bytes    int64
	MaxBytes int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%d files of %d bytes in all are more than the local file cache holds (%d bytes): narrow the query or raise the cache's size", e.Files, e.Bytes, e.MaxBytes)
}
