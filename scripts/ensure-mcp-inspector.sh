#!/usr/bin/env bash
# Makes sure the official MCP inspector CLI (@modelcontextprotocol/inspector
# from npm) is installed in a cache directory, for the MCP server's client
# tests (internal/mcpserver), and prints the path of its mcp-inspector
# command on stdout (all else goes to stderr).
#
# The directory is $PGCDC_MCP_INSPECTOR_DIR, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/pg-cdc/mcp-inspector-<version>. The
# version is pinned: the tests check what this version's --strict mode
# reports. Node 20 runs it, although the package declares node >= 22.
#
# Exit 1 when node or npm is missing or the install fails: the test then
# fails under CI=true and is skipped elsewhere.
set -euo pipefail

version="${PGCDC_MCP_INSPECTOR_VERSION:-2.12.0}"
dir="${PGCDC_MCP_INSPECTOR_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/pg-cdc/mcp-inspector-$version}"
bin="$dir/node_modules/.bin/mcp-inspector"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ensure-mcp-inspector: $tool not found (install Debian's nodejs and npm packages)" >&2
    exit 1
  fi
done

if [ -x "$bin" ] && [ -f "$dir/.installed-$version" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$dir"
# One install at a time (test binaries run in parallel).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir.lock"
  flock 9
  if [ -x "$bin" ] && [ -f "$dir/.installed-$version" ]; then
    echo "$bin"
    exit 0
  fi
fi
echo "ensure-mcp-inspector: installing @modelcontextprotocol/inspector@$version into $dir" >&2
if ! (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --engine-strict=false \
  --prefix "$dir" "@modelcontextprotocol/inspector@$version" >&2); then
  echo "ensure-mcp-inspector: npm install failed" >&2
  exit 1
fi
if [ ! -x "$bin" ]; then
  echo "ensure-mcp-inspector: $bin missing after the install" >&2
  exit 1
fi
touch "$dir/.installed-$version"
echo "$bin"
