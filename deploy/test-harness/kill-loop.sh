#!/usr/bin/env bash
# kill-loop.sh: N cycles (default 100) of start pg-cdc, stream under load for
# 1-5 s, kill -9 (exit 137 as the shell reports it); then catch up and
# 'pg-cdc verify': a crash anywhere loses nothing (docs/operations.md,
# "Crash safety"). --help for the options; docs/test-harness.md.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
signal_loop_main KILL 137 "$@"
