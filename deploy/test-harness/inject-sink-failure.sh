#!/usr/bin/env bash
# inject-sink-failure.sh: the filesystem sink fails under a streaming
# pg-cdc, then comes back. Shows that start retries (logging
# "replication session failed; retrying"), recovers by itself when the
# fault is short, exits 3 (retries exhausted, docs/exit-codes.md) when it
# lasts past the retry budget (--long: about 3 minutes with the default
# retry.* settings), never confirms past the manifest meanwhile, and that
# nothing is lost (pg-cdc verify).
#
#   inject-sink-failure.sh [--fault readonly|full|both] [--fault-sec 15]
#                          [--long] [--quick-retries] [--rate 200]
#                          [--url URL] [--bin PATH] [--keep] [--self-test]
#
# Faults:
#   readonly  the sink becomes read-only: as root a read-only bind mount on
#             top of it (EROFS), otherwise chmod -R a-w (EACCES)
#   full      the sink lives on a small tmpfs that a filler file fills up
#             (ENOSPC); root only
# Default: both as root, readonly otherwise.
#
# --fault-sec  how long the short fault lasts (default 15)
# --long       then a fault that lasts until pg-cdc exits (3 expected); this
#              script restarts it after the fault, as systemd would
# --quick-retries  for --long, restart pg-cdc first with retry.max_attempts 2
#              and 1 s backoffs: exit 3 within seconds
# --self-test  a throwaway PostgreSQL: a 3 s read-only fault, then (as
#              root) a full sink until exit 3, with --quick-retries
#
# Prints SKIP and exits 0 when no fault can be injected here (root without
# the right to mount).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  usage_header
  usage_common
  exit 2
}

FAULT="" FAULT_SEC=15 LONG=0 QUICK=0 RATE=200 URL="" SELF_TEST=0
while (($#)); do
  case $1 in
  --fault) FAULT=$2 && shift ;;
  --fault-sec) FAULT_SEC=$2 && shift ;;
  --long) LONG=1 ;;
  --quick-retries) QUICK=1 ;;
  --rate) RATE=$2 && shift ;;
  --url) URL=$2 && shift ;;
  --bin) HARNESS_BIN=$2 && shift ;;
  --keep) KEEP=1 ;;
  --self-test) SELF_TEST=1 ;;
  -h | --help) usage ;;
  *) echo "inject-sink-failure: unknown argument $1" >&2 && usage ;;
  esac
  shift
done
if ((SELF_TEST)); then
  FAULT_SEC=3 RATE=100 URL="" QUICK=1
fi
[[ $FAULT_SEC =~ ^[1-9][0-9]*$ ]] || die "--fault-sec: want whole seconds, got $FAULT_SEC"
if [[ -z $FAULT ]]; then
  FAULT="readonly"
  ((EUID != 0)) || FAULT=both
fi
case $FAULT in
readonly) KINDS=(readonly) ;;
full) KINDS=(full) ;;
both) KINDS=(readonly full) ;;
*) die "--fault: want readonly, full or both, got $FAULT" ;;
esac
SHORT_KINDS=("${KINDS[@]}") LONG_KINDS=()
((LONG)) && LONG_KINDS=("${KINDS[@]}")
if ((SELF_TEST)); then
  # Both kinds, in the least time: a short read-only fault, then a full
  # sink until exit 3 (read-only again without root).
  SHORT_KINDS=(readonly) LONG_KINDS=("${KINDS[-1]}")
fi

harness_init
T0=$SECONDS
FS=""
if ((EUID == 0)); then
  # Probe the right to mount once, on a scratch directory.
  mkdir "$WORK/probe"
  if ! mount -t tmpfs -o size=1m pgcdc-probe "$WORK/probe" 2>/dev/null; then
    echo "inject-sink-failure: SKIP: running as root without the right to mount (a read-only bind mount or a tmpfs is how the faults are made)"
    harness_done
    exit 0
  fi
  umount "$WORK/probe"
elif [[ " ${KINDS[*]} " == *" full "* ]]; then
  die "--fault full needs root (the sink goes on a small tmpfs)"
fi
if [[ " ${KINDS[*]} " == *" full "* ]]; then
  FS=$WORK/fs
  mkdir "$FS"
  mount -t tmpfs -o size=256m,mode=0755 pgcdc-sink "$FS"
  HARNESS_UNDO+=("umount -l '$FS'")
  SINK=$FS/sink
fi

if [[ -n $URL ]]; then
  SRC_URL=$URL EXTERNAL_SOURCE=1
else
  pg_throwaway
fi
write_config
pgcdc_init
load_start "$RATE"
pgcdc_start
wait_epoch_after 0 30

fault_on() {
  case $1 in
  readonly)
    if ((EUID == 0)); then
      mount --bind "$SINK" "$SINK"
      HARNESS_UNDO+=("umount -l '$SINK'")
      mount -o remount,bind,ro "$SINK"
    else
      HARNESS_UNDO+=("chmod -R u+w '$SINK'")
      chmod -R a-w "$SINK"
    fi
    ;;
  full)
    HARNESS_UNDO+=("rm -f '$FS/filler'")
    dd if=/dev/zero of="$FS/filler" bs=1M status=none 2>/dev/null || true
    ;;
  esac
}

fault_off() {
  case $1 in
  readonly)
    if ((EUID == 0)); then
      umount -l "$SINK"
    else
      chmod -R u+w "$SINK"
    fi
    ;;
  full) rm -f "$FS/filler" ;;
  esac
  unset 'HARNESS_UNDO[${#HARNESS_UNDO[@]}-1]'
}

retries() { grep -c 'replication session failed; retrying' "$PGCDC_LOG" || true; }

RESULTS=()

# short_fault KIND: start keeps running, retries, and recovers by itself.
short_fault() {
  local kind=$1 before epoch n s t
  before=$(retries)
  fault_on "$kind"
  # A flush that finished while the fault was being set up may have moved
  # the manifest; from here on nothing can.
  epoch=$(manifest_epoch)
  log "fault $kind on for $FAULT_SEC s at epoch $epoch"
  for ((s = 0; s < FAULT_SEC; s++)); do
    sleep 1
    alive "$PGCDC_PID" || {
      wait_exit "$PGCDC_PID" 1
      die "pg-cdc exited $WAIT_RC during a $FAULT_SEC s $kind fault; want it to retry: $(tail -5 "$PGCDC_LOG")"
    }
    check_not_over_confirmed
  done
  (($(manifest_epoch) == epoch)) || die "the manifest moved during a $kind fault (epoch $epoch -> $(manifest_epoch))"
  n=$(($(retries) - before))
  ((n > 0)) || die "no retry logged during a $FAULT_SEC s $kind fault: $(tail -5 "$PGCDC_LOG")"
  grep -q 'sink request failed' "$PGCDC_LOG" || die "the retries do not name the sink: $(tail -3 "$PGCDC_LOG")"
  fault_off "$kind"
  t=$SECONDS
  wait_epoch_after "$epoch" 90
  RESULTS+=("$kind ${FAULT_SEC}s: $n retries, recovered $((SECONDS - t)) s after the fault ended")
  log "${RESULTS[-1]}"
}

# long_fault KIND: the retry budget runs out, start exits 3, and the
# supervisor (here: this script) starts it again once the sink is back.
long_fault() {
  local kind=$1 epoch t budget="the default retry budget (about 3 minutes)"
  if ((QUICK)); then
    kill -TERM "$PGCDC_PID"
    wait_exit "$PGCDC_PID" 90
    [[ $WAIT_RC == 0 ]] || die "pg-cdc exited $WAIT_RC after SIGTERM: $(tail -5 "$PGCDC_LOG")"
    write_config "$(printf 'retry:\n  initial_backoff: 1s\n  max_backoff: 1s\n  max_attempts: 2')"
    budget="retry.max_attempts 2, 1 s backoff"
    epoch=$(manifest_epoch)
    pgcdc_start
    wait_epoch_after "$epoch" 30
  fi
  fault_on "$kind"
  epoch=$(manifest_epoch)
  t=$SECONDS
  log "fault $kind on until pg-cdc gives up ($budget)"
  while alive "$PGCDC_PID"; do
    ((SECONDS - t < 600)) || die "pg-cdc still retries after 10 minutes of a $kind fault"
    check_not_over_confirmed
    sleep 1
  done
  wait_exit "$PGCDC_PID" 1
  [[ $WAIT_RC == 3 ]] || die "pg-cdc exited $WAIT_RC after a long $kind fault, want 3 (retries exhausted): $(tail -5 "$PGCDC_LOG")"
  grep -q '^pg-cdc: retries exhausted' "$PGCDC_LOG" || die "exit 3 without 'pg-cdc: retries exhausted': $(tail -3 "$PGCDC_LOG")"
  (($(manifest_epoch) == epoch)) || die "the manifest moved during a long $kind fault"
  check_not_over_confirmed
  fault_off "$kind"
  RESULTS+=("$kind until exit: exit 3 after $((SECONDS - t)) s ($budget)")
  log "${RESULTS[-1]}"
  ((QUICK)) && write_config
  pgcdc_start
  wait_epoch_after "$epoch" 90
}

for kind in "${SHORT_KINDS[@]}"; do
  short_fault "$kind"
done
for kind in "${LONG_KINDS[@]}"; do
  long_fault "$kind"
done

load_stop
load_summary=$(tail -1 "$WORK/load.log")
verify_sink
check_not_over_confirmed
printf -v joined '%s; ' "${RESULTS[@]}"
echo "inject-sink-failure: PASS: ${joined}${load_summary#load-gen: };" \
  "verify: equal, $VERIFY_SOURCE_ROWS rows in the source, $VERIFY_SINK_ROWS in the sink, $VERIFY_MISSING lost;" \
  "wall time $((SECONDS - T0)) s"
harness_done
