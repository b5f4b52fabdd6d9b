package iceberg

import (
	"context"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
)

// Lazy is a catalog opened at its first use and again after a failed
// open: a REST catalog that is down when pg-cdc start begins must not stop
// the stream, so its open is one more call the publisher retries.
type Lazy struct {
	open func(context.Context) (*Adapter, func() error, error)

	mu    sync.Mutex
	ad    *Adapter
	close func() error
}

// NewLazy returns a catalog that opens with open when first used.
func NewLazy(open func(context.Context) (*Adapter, func() error, error)) *Lazy {
	return &Lazy{open: open}
}

func (l *Lazy) get(ctx context.Context) (*Adapter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ad != nil {
		return l.ad, nil
	}
	ad, closeFn, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	l.ad, l.close = ad, closeFn
	return ad, nil
}

// Close closes the catalog if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.close == nil {
		return nil
	}
	err := l.close()
	l.ad, l.close = nil, nil
	return err
}

func (l *Lazy) Load(ctx context.Context, id catalog.Ident) (catalog.Published, bool, error) {
	ad, err := l.get(ctx)
	if err != nil {
		return catalog.Published{}, false, err
	}
	return ad.Load(ctx, id)
}

func (l *Lazy) Create(ctx context.Context, id catalog.Ident, s icebergschema.Schema, props map[string]string) error {
	ad, err := l.get(ctx)
	if err != nil {
		return err
	}
	return ad.Create(ctx, id, s, props)
}

func (l *Lazy) Commit(ctx context.Context, c catalog.Commit) error {
	ad, err := l.get(ctx)
	if err != nil {
		return err
	}
	return ad.Commit(ctx, c)
}

func (l *Lazy) ReplaceState(ctx context.Context, c catalog.StateCommit) error {
	ad, err := l.get(ctx)
	if err != nil {
		return err
	}
	return ad.ReplaceState(ctx, c)
}

func (l *Lazy) CommitTables(ctx context.Context, c catalog.Commit, s catalog.StateCommit) error {
	ad, err := l.get(ctx)
	if err != nil {
		return err
	}
	return ad.CommitTables(ctx, c, s)
}

func (l *Lazy) Expire(ctx context.Context, id catalog.Ident, maxAge time.Duration, keep int) (int, error) {
	ad, err := l.get(ctx)
	if err != nil {
		return 0, err
	}
	return ad.Expire(ctx, id, maxAge, keep)
}

func (l *Lazy) Referenced(ctx context.Context, id catalog.Ident) (map[string]bool, error) {
	ad, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return ad.Referenced(ctx, id)
}

func (l *Lazy) MetadataLocation(ctx context.Context, id catalog.Ident) (string, error) {
	ad, err := l.get(ctx)
	if err != nil {
		return "", err
	}
	return ad.MetadataLocation(ctx, id)
}
