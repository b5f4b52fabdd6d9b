#!/usr/bin/env bash
# Makes sure icebird (npm), an independent Apache Iceberg reader in
# JavaScript, is installed in a cache directory, for the catalog's
# end-to-end test (internal/e2e TestIcebergChangelog), and prints the
# node_modules directory that holds it on stdout (all else goes to stderr):
# the test runs node with NODE_PATH set to it.
#
# The directory is $PGCDCTEST_ICEBIRD_DIR, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/pg-cdc/icebird-<version>. The version is
# pinned (its dependencies, hyparquet and hyparquet-compressors, are pinned
# by icebird itself): the test works around this version's quirks. (Not
# PGCDC_*: pg-cdc refuses an environment variable of its prefix it does not
# know, and the test's pg-cdc processes inherit the environment.)
#
# Exit 1 when node or npm is missing or the install fails: the test then
# fails under CI=true and is skipped elsewhere.
set -euo pipefail

version="${PGCDCTEST_ICEBIRD_VERSION:-0.3.1}"
dir="${PGCDCTEST_ICEBIRD_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/pg-cdc/icebird-$version}"
mods="$dir/node_modules"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-icebird: $tool not found (install Debian's nodejs and npm packages)" >&2
    exit 1
  fi
done

if [ -f "$mods/icebird/package.json" ] && [ -f "$dir/.installed-$version" ]; then
  echo "$mods"
  exit 0
fi

mkdir -p "$dir"
# One install at a time (test binaries run in parallel).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir.lock"
  flock 9
  if [ -f "$mods/icebird/package.json" ] && [ -f "$dir/.installed-$version" ]; then
    echo "$mods"
    exit 0
  fi
fi
echo "ensure-icebird: installing icebird@$version into $dir" >&2
if ! (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
  --prefix "$dir" "icebird@$version" >&2); then
  echo "ensure-icebird: npm install failed" >&2
  exit 1
fi
if [ ! -f "$mods/icebird/package.json" ]; then
  echo "ensure-icebird: $mods/icebird missing after the install" >&2
  exit 1
fi
touch "$dir/.installed-$version"
echo "$mods"
