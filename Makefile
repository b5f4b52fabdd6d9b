# pg-cdc — see README.md. The two commands a new user needs:
#   make demo   a throwaway PostgreSQL, a sample workload, pg-cdc streaming it, a summary
#   make test   the whole test suite (starts its own PostgreSQL clusters)

GO      ?= go
BIN     := bin/pg-cdc
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# Pure packages run under the race detector; integration packages run
# without it to keep the suite fast on two cores.
PURE_PKGS := ./internal/cdc/... ./internal/manifest/... ./internal/flush/... \
             ./internal/txn/... ./internal/pgoutput/... ./internal/config/... \
             ./internal/blob/... ./internal/failpoint/... ./internal/replicate/... \
             ./internal/health/... ./internal/metrics/... ./internal/sdnotify/... \
             ./internal/logging/... ./internal/runs/... ./internal/backfill/... \
             ./internal/control/... ./internal/audit/... ./internal/capture/... ./internal/daemon/... \
             ./internal/blobcache/... ./internal/refs/...
PURE_RE   := /internal/(cdc|manifest|flush|txn|pgoutput|config|blob|failpoint|replicate|health|metrics|sdnotify|logging|runs|backfill|control|audit|capture|daemon|blobcache|refs)(/|$$)

.PHONY: all build test unit integration demo check fmt vet tidy clean postgres versitygw shellcheck bench

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pg-cdc

postgres:
	@./scripts/ensure-postgres.sh

# The S3 tests run a real S3-compatible server (versitygw), built once from
# the Go module proxy into the user cache; building it here keeps a cold
# build out of the tests' timeouts.
versitygw:
	@./scripts/ensure-versitygw.sh >/dev/null

# The harness scripts' lint test needs shellcheck (Debian's package).
shellcheck:
	@./scripts/ensure-shellcheck.sh

test: postgres versitygw shellcheck
	$(GO) vet ./...
	@# The streaming-only build: static, no cgo, no DuckDB (design.md §11), no Iceberg publisher.
	CGO_ENABLED=0 $(GO) build -tags nodb -o /dev/null ./cmd/pg-cdc
	$(GO) test -race -count=1 -timeout 10m $(PURE_PKGS)
	$(GO) test -count=1 -timeout 25m $$($(GO) list ./... | grep -v -E '$(PURE_RE)')

unit:
	$(GO) test -race -count=1 $(PURE_PKGS)

# The demo streams and reads back; it needs no Iceberg publisher, whose
# dependencies (iceberg-go, arrow-go, SQLite) would more than double its
# cold build (docs/decisions.md).
demo: postgres
	$(GO) build -tags noiceberg -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pg-cdc
	$(GO) run ./cmd/pg-cdc-demo --bin $(BIN)

# Benchmarks (issue 3): a throwaway PostgreSQL, the workloads, pg-cdc
# against the reference clients of bench/; writes BENCHMARKS.md in 10–20
# minutes. BENCH_FLAGS=--full uses the 10M-row table for the snapshot and
# compaction; see --help.
BENCH_FLAGS ?=
bench: postgres build
	$(GO) run ./bench/cmd/pgcdc-bench --bin $(BIN) --out BENCHMARKS.md $(BENCH_FLAGS)

check: fmt vet unit

fmt:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }

vet:
	$(GO) vet ./...

tidy:
	$(GO) mod tidy

clean:
	rm -rf bin demo-out
