package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ErrConditionalIgnored is returned by ProbeConditional when the store
// accepted a conditional put it should have refused: it ignores the
// condition, so two writers could overwrite each other's manifest.
var ErrConditionalIgnored = errors.New("the sink ignores conditional writes")

// ConditionalStore is a Store that can compare-and-swap.
type ConditionalStore interface {
	Store
	Conditional
}

// ProbeConditional checks that s honours its preconditions (design.md §2):
// a create-only PutIf on an existing key must fail, and so must a PutIf
// with a stale version. Many S3-compatible stores ignore conditional
// headers silently; they fail the probe with an error matching
// ErrConditionalIgnored that names the condition ignored. Any other error
// is the store failing to answer, not a verdict.
//
// The probe writes, overwrites and finally deletes key, which must not be
// used by anything else: two probes running at once on one key would make
// each other fail. A key left behind by a probe that crashed is deleted
// first.
func ProbeConditional(ctx context.Context, s ConditionalStore, key string) (err error) {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("probe conditional writes: %w", err)
	}
	if err := s.Delete(ctx, key); err != nil {
		return fmt.Errorf("probe conditional writes: remove an old probe object: %w", err)
	}
	defer func() {
		if derr := s.Delete(context.WithoutCancel(ctx), key); derr != nil {
			err = errors.Join(err, fmt.Errorf("probe conditional writes: remove the probe object: %w", derr))
		}
	}()
	// Every write has different content, so that stores whose versions are
	// content hashes (S3 ETags, the filesystem's SHA-256) give each write a
	// new version.
	created := []byte("pg-cdc conditional write probe: created")
	first, err := s.PutIf(ctx, key, created, "")
	if err != nil {
		return fmt.Errorf("probe conditional writes: create %q: %w", key, err)
	}

	_, err = s.PutIf(ctx, key, []byte("pg-cdc conditional write probe: created again"), "")
	switch {
	case err == nil:
		return fmt.Errorf("probe conditional writes: a create-only put (If-None-Match: *) on the existing %q succeeded: %w", key, ErrConditionalIgnored)
	case !errors.Is(err, ErrPrecondition):
		return fmt.Errorf("probe conditional writes: create-only put on the existing %q: %w", key, err)
	}
	if err := wantContent(ctx, s, key, created, first); err != nil {
		return fmt.Errorf("probe conditional writes: a refused create-only put %w", err)
	}

	replaced := []byte("pg-cdc conditional write probe: replaced")
	second, err := s.PutIf(ctx, key, replaced, first)
	if err != nil {
		return fmt.Errorf("probe conditional writes: replace %q at its current version: %w", key, err)
	}
	_, err = s.PutIf(ctx, key, []byte("pg-cdc conditional write probe: stale"), first)
	switch {
	case err == nil:
		return fmt.Errorf("probe conditional writes: a put with a stale version (If-Match) on %q succeeded: %w", key, ErrConditionalIgnored)
	case !errors.Is(err, ErrPrecondition):
		return fmt.Errorf("probe conditional writes: put with a stale version on %q: %w", key, err)
	}
	if err := wantContent(ctx, s, key, replaced, second); err != nil {
		return fmt.Errorf("probe conditional writes: a refused put with a stale version %w", err)
	}
	return nil
}

// wantContent checks that a refused put changed nothing.
func wantContent(ctx context.Context, c Conditional, key string, data []byte, version Version) error {
	got, v, err := c.ReadVersion(ctx, key)
	if err != nil {
		return fmt.Errorf("could not be checked: read %q: %w", key, err)
	}
	if !bytes.Equal(got, data) || v != version {
		return fmt.Errorf("changed %q anyway (version %q, want %q): %w", key, v, version, ErrConditionalIgnored)
	}
	return nil
}
