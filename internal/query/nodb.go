//go:build nodb

package query

import "context"

// Engine is the query engine's API in a build without DuckDB (-tags nodb):
// it links no cgo, so the binary is static, and it never serves.
type Engine struct{ limits Limits }

// Open returns ErrNoEngine: this build has no query engine. The full build
// is a normal `go build` with cgo (CGO_ENABLED=1, the default where a C
// toolchain is installed), which links DuckDB.
func Open(ctx context.Context, o Options, setup []string) (*Engine, error) {
	return nil, ErrNoEngine
}

// Limits returns the limits in force.
func (e *Engine) Limits() Limits { return e.limits }

// Query returns ErrNoEngine.
func (e *Engine) Query(ctx context.Context, sql string, args ...any) (*Result, error) {
	return nil, ErrNoEngine
}

// Close does nothing.
func (e *Engine) Close() error { return nil }

// Confinement is the zero Confinement: nothing runs.
func (e *Engine) Confinement() Confinement { return Confinement{} }

// CheckIsolation accepts any isolation: this build has no engine to
// isolate (Open returns ErrNoEngine).
func CheckIsolation(isolation string) error { return nil }
