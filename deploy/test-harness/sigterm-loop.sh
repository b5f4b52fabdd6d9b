#!/usr/bin/env bash
# sigterm-loop.sh: N cycles (default 100) of start pg-cdc, stream under load
# for 1-5 s, SIGTERM, expect exit 0 ("stopped cleanly"); then catch up and
# 'pg-cdc verify': nothing may be lost. --help for the options;
# docs/test-harness.md for what it shows and a recorded run.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
signal_loop_main TERM 0 "$@"
