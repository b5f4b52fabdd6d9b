#!/usr/bin/env bash
# inject-slot-full.sh: the replication slot is invalidated while pg-cdc is
# down, and the next start must refuse to go on (exit 10, slot lost,
# docs/exit-codes.md) rather than restart from "now".
#
#   inject-slot-full.sh [--rate 200] [--stream-sec 3] [--bin PATH] [--keep]
#                       [--self-test]
#
# It runs its own PostgreSQL (initdb --wal-segsize=1, max_slot_wal_keep_size
# = 4MB), streams under load for --stream-sec, stops pg-cdc with SIGTERM,
# writes and switches WAL segments until a checkpoint invalidates the slot
# (pg_replication_slots.wal_status = 'lost'), then checks that 'pg-cdc
# status' shows it and 'pg-cdc start' exits 10 with a hint. The sink stays
# readable: 'pg-cdc dump' still works. Then it recovers: 'pg-cdc rebuild'
# while the load runs, 'pg-cdc start' streams under load from the new slot
# for --stream-sec, and 'pg-cdc verify' must find the sink equal to the
# source. There is no --url: the cluster's settings are part of the test.
# --self-test is the same with a lighter load.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  usage_header
  exit 2
}

RATE=200 STREAM_SEC=3
while (($#)); do
  case $1 in
  --rate) RATE=$2 && shift ;;
  --stream-sec) STREAM_SEC=$2 && shift ;;
  --bin) HARNESS_BIN=$2 && shift ;;
  --keep) KEEP=1 ;;
  --self-test) RATE=100 STREAM_SEC=2 ;;
  -h | --help) usage ;;
  *) echo "inject-slot-full: unknown argument $1" >&2 && usage ;;
  esac
  shift
done
[[ $STREAM_SEC =~ ^[1-9][0-9]*$ ]] || die "--stream-sec: want whole seconds, got $STREAM_SEC"

harness_init
T0=$SECONDS
# 1 MiB WAL segments, so that a few MiB of WAL pass the limit at once;
# checkpoints only when asked for.
pg_throwaway "max_slot_wal_keep_size = 4MB" "min_wal_size = 2MB" "max_wal_size = 64MB" \
  "checkpoint_timeout = 1h" -- --wal-segsize=1
write_config
pgcdc_init
load_start "$RATE"
pgcdc_start
sleep "$STREAM_SEC"
kill -TERM "$PGCDC_PID"
wait_exit "$PGCDC_PID" 90
[[ $WAIT_RC == 0 ]] || die "pg-cdc exited $WAIT_RC after SIGTERM: $(tail -5 "$PGCDC_LOG")"
load_stop
check_not_over_confirmed
epoch=$(manifest_epoch)
status=$(sql "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$SLOT'")
[[ $status == reserved || $status == extended ]] || die "slot $SLOT is $status after a clean stop, want reserved"
log "pg-cdc stopped at epoch $epoch; slot $status; generating WAL until the slot is invalidated"

# Each round writes about 1 MiB of WAL into a new segment; the checkpoint
# removes the segments the slot no longer may keep, and invalidates it.
rounds=0
while [[ $status != lost ]]; do
  ((rounds < 60)) || die "the slot is still $status after $rounds rounds of WAL"
  sql "INSERT INTO harness_events (account_id, amount) SELECT -1, g FROM generate_series(1, 10000) g; SELECT pg_switch_wal(); CHECKPOINT;" >/dev/null
  rounds=$((rounds + 1))
  status=$(sql "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$SLOT'")
done
log "slot invalidated after $rounds rounds ($(sql "SELECT pg_size_pretty(pg_current_wal_lsn() - '$(manifest_end_lsn)'::pg_lsn)") of WAL past the manifest)"

pgcdc status >"$WORK/status.txt" 2>&1 || true
grep -q 'wal_status lost' "$WORK/status.txt" || die "'pg-cdc status' does not show wal_status lost: $(cat "$WORK/status.txt")"

rc=0
timeout 120 "$HARNESS_BIN" -c "$CONFIG" start >"$WORK/start-lost.log" 2>&1 || rc=$?
[[ $rc == 10 ]] || die "pg-cdc start on an invalidated slot exited $rc, want 10: $(tail -5 "$WORK/start-lost.log")"
grep -q '^pg-cdc: .*invalidated' "$WORK/start-lost.log" || die "no 'invalidated' in the error: $(tail -3 "$WORK/start-lost.log")"
grep -q '^hint: ' "$WORK/start-lost.log" || die "no hint after exit 10: $(tail -3 "$WORK/start-lost.log")"
(($(manifest_epoch) == epoch)) || die "the manifest moved (epoch $epoch -> $(manifest_epoch)) on a lost slot"

# The sink stays readable as of its last epoch.
pgcdc dump --table public.harness_accounts >"$WORK/dump.csv" 2>"$WORK/dump.log" ||
  die "dump of the sink after exit 10 failed: $(tail -3 "$WORK/dump.log")"
dumped=$(($(wc -l <"$WORK/dump.csv") - 1))

# Recovery in place: rebuild while the load runs, stream, verify.
load_start "$RATE"
pgcdc rebuild >"$WORK/rebuild.log" 2>&1 || die "pg-cdc rebuild failed: $(tail -5 "$WORK/rebuild.log")"
grep -q '^rebuilt: slot .* was invalidated' "$WORK/rebuild.log" || die "rebuild did not report the invalidated slot: $(tail -3 "$WORK/rebuild.log")"
generation=$(sed -n 's/.* into generation \(g[0-9]*\) .*/\1/p' "$WORK/rebuild.log")
log "rebuilt into generation $generation: $(grep '^rebuilt: ' "$WORK/rebuild.log" | sed 's/.*; took //')"
pgcdc_start "$WORK/start-rebuilt.log"
sleep "$STREAM_SEC"
check_not_over_confirmed
load_stop
verify_sink

echo "inject-slot-full: PASS: slot invalidated after $rounds WAL rounds (max_slot_wal_keep_size 4MB);" \
  "status shows wal_status lost; start exited 10 with '$(grep '^pg-cdc: ' "$WORK/start-lost.log" | cut -c9-90)…';" \
  "manifest stayed at epoch $epoch; dump still reads $dumped accounts;" \
  "rebuild under load into $generation, then start: verify equal ($VERIFY_SOURCE_ROWS rows); wall time $((SECONDS - T0)) s"
harness_done
