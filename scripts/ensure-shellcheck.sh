#!/usr/bin/env bash
# Makes sure shellcheck is installed (Debian's shellcheck package), for the
# lint test of deploy/test-harness. Best effort: a machine without the
# Debian mirror keeps going, and the test then fails under CI=true and is
# skipped elsewhere.
set -euo pipefail

command -v shellcheck >/dev/null 2>&1 && exit 0
echo "shellcheck not found; installing Debian's shellcheck package" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq shellcheck >/dev/null; }; then
  echo "warning: could not install shellcheck; the harness lint test will not run" >&2
fi
exit 0
