package blobcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// Names of the cache's own files in Dir (see doc.go).
const (
	tmpPrefix = ".tmp-"
	lockName  = ".lock"
	hashLen   = 2 * sha256.Size
	maxExtLen = 16 // letters and digits after the dot
)

// File names one sink file: its key and the byte size the manifest records.
type File struct {
	Key  string
	Size int64
}

// check refuses keys that could escape the sink root and negative sizes.
func (f File) check() error {
	if err := blob.ValidKey(f.Key); err != nil {
		return fmt.Errorf("cache file: %w", err)
	}
	if f.Size < 0 {
		return fmt.Errorf("cache file %q: negative size %d", f.Key, f.Size)
	}
	return nil
}

// localName is the file name of f in Dir: the key's SHA-256, the size, and
// the key's extension when it is a plain one.
func localName(f File) string {
	sum := sha256.Sum256([]byte(f.Key))
	return hex.EncodeToString(sum[:]) + "-" + strconv.FormatInt(f.Size, 10) + extension(f.Key)
}

// extension returns the key's extension (".parquet") if it is a dot and 1
// to maxExtLen ASCII letters or digits, else "".
func extension(key string) string {
	ext := path.Ext(key)
	if !plainExt(ext) {
		return ""
	}
	return ext
}

func plainExt(ext string) bool {
	if len(ext) < 2 || len(ext) > 1+maxExtLen || ext[0] != '.' {
		return false
	}
	for _, r := range ext[1:] {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// parseName returns the size recorded in a name localName made; ok is false
// for any other name.
func parseName(name string) (size int64, ok bool) {
	if len(name) < hashLen+2 || name[hashLen] != '-' {
		return 0, false
	}
	for _, r := range name[:hashLen] {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return 0, false
		}
	}
	rest := name[hashLen+1:]
	digits, ext := rest, ""
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		digits, ext = rest[:i], rest[i:]
		if !plainExt(ext) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != digits {
		return 0, false
	}
	return n, true
}
