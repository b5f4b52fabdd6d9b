#!/usr/bin/env bash
# Makes sure the versitygw binary the S3 tests run (internal/blob/s3/s3test)
# is built, so that the first test does not spend a minute or more building
# it. Builds from the Go module proxy into the same cache path the tests
# use, and prints that path:
#
#   $PGCDC_VERSITYGW, if set (then it only checks the file), else
#   ${PGCDC_TOOLS_DIR:-<user cache dir>/pg-cdc/tools}/versitygw-<version>/bin/versitygw
#
# where the user cache dir is Go's os.UserCacheDir: $XDG_CACHE_HOME or
# ~/.cache on Linux, ~/Library/Caches on macOS. Keep VERSION in step with
# s3test.Version.
set -euo pipefail

VERSION=v1.8.0
MODULE=github.com/versity/versitygw/cmd/versitygw

if [ -n "${PGCDC_VERSITYGW:-}" ]; then
  if [ ! -x "$PGCDC_VERSITYGW" ]; then
    echo "PGCDC_VERSITYGW=$PGCDC_VERSITYGW is not an executable file" >&2
    exit 1
  fi
  echo "$PGCDC_VERSITYGW"
  exit 0
fi

if [ -n "${PGCDC_TOOLS_DIR:-}" ]; then
  tools="$PGCDC_TOOLS_DIR"
elif [ "$(uname -s)" = Darwin ]; then
  tools="$HOME/Library/Caches/pg-cdc/tools"
else
  tools="${XDG_CACHE_HOME:-$HOME/.cache}/pg-cdc/tools"
fi
dir="$tools/versitygw-$VERSION"
bin="$dir/bin/versitygw"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$dir/bin"
# The same lock file as s3test.Binary, so a script and a test never build
# at once (where flock(1) exists: not on stock macOS); the binary appears
# by rename, whole, either way.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/build.lock"
  flock 9
fi
if [ ! -x "$bin" ]; then
  scratch="$(mktemp -d "$dir/bin/.install-XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  echo "building versitygw $VERSION (a minute or more the first time)" >&2
  start=$(date +%s)
  (cd "$scratch" && GOBIN="$scratch" GOWORK=off GOFLAGS=-buildvcs=false go install "$MODULE@$VERSION")
  mv "$scratch/versitygw" "$bin"
  echo "built versitygw in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"
