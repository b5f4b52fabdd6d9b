#!/usr/bin/env bash
# load-gen.sh: a steady insert/update/delete workload against a database,
# through one psql session, at a fixed rate of transactions per second.
#
#   load-gen.sh --url URL [--rate 200] [--duration 0] [--batch-every 200]
#   load-gen.sh --url URL --setup     create the tables and exit
#   load-gen.sh --self-test           run against a throwaway PostgreSQL
#
# Tables (created if missing): harness_accounts (id primary key) and
# harness_events (id bigserial primary key). Each transaction is one of:
# insert an account (45 %); update an account and insert an event in one
# transaction (30 %); delete an account (15 %); update ten accounts in one
# statement (10 %). Every --batch-every-th transaction inserts 5,000 events
# at once, which PostgreSQL streams in progress when
# logical_decoding_work_mem is small.
#
# --duration 0 runs until SIGTERM or SIGINT. On exit it prints one line:
#   load-gen: 1234 transactions (555 inserts, ...) in 6.2 s
# A psql error stops it with a non-zero exit.
set -euo pipefail
HARNESS_NAME=load-gen
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

URL="" RATE=200 DURATION=0 BATCH_EVERY=200 SETUP=0 SELF_TEST=0

usage() {
  usage_header
  exit 2
}

while (($#)); do
  case $1 in
  --url) URL=$2 && shift ;;
  --rate) RATE=$2 && shift ;;
  --duration) DURATION=$2 && shift ;;
  --batch-every) BATCH_EVERY=$2 && shift ;;
  --setup) SETUP=1 ;;
  --bin) shift ;; # accepted like the other scripts; load-gen needs no pg-cdc
  --self-test) SELF_TEST=1 ;;
  -h | --help) usage ;;
  *) echo "load-gen: unknown argument $1" >&2 && usage ;;
  esac
  shift
done
[[ $RATE =~ ^[1-9][0-9]*$ ]] || die "--rate: want a positive integer, got $RATE"
[[ $DURATION =~ ^[0-9]+$ ]] || die "--duration: want seconds, got $DURATION"
[[ $BATCH_EVERY =~ ^[0-9]+$ ]] || die "--batch-every: want an integer (0: never), got $BATCH_EVERY"

SCHEMA_SQL="
CREATE TABLE IF NOT EXISTS harness_accounts (
  id bigint PRIMARY KEY, balance bigint NOT NULL, note text, updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS harness_events (
  id bigserial PRIMARY KEY, account_id bigint NOT NULL, amount bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());"

if ((SELF_TEST)); then
  # A throwaway cluster, two seconds of load, then count what arrived.
  HARNESS_BIN=/bin/true harness_init
  pg_throwaway
  "$HARNESS_DIR/load-gen.sh" --url "$SRC_URL" --setup
  "$HARNESS_DIR/load-gen.sh" --url "$SRC_URL" --rate 100 --duration 2 --batch-every 50 >"$WORK/load.log" 2>&1 ||
    die "load-gen failed: $(tail -5 "$WORK/load.log")"
  summary=$(tail -1 "$WORK/load.log")
  [[ $summary =~ ^load-gen:\ ([0-9]+)\ transactions ]] || die "no summary line: $summary"
  ((BASH_REMATCH[1] >= 150)) || die "only ${BASH_REMATCH[1]} transactions in 2 s at 100/s"
  rows=$(sql "SELECT (SELECT count(*) FROM harness_accounts) + (SELECT count(*) FROM harness_events)")
  ((rows > 0)) || die "no rows written"
  log "self-test passed: $summary; $rows rows"
  harness_done
  exit 0
fi

[[ -n $URL ]] || die "--url is required (or --self-test)"
SRC_URL=$URL

if ((SETUP)); then
  sql "$SCHEMA_SQL" >/dev/null
  exit 0
fi

next_id=$(sql "SELECT coalesce(max(id), 0) + 1 FROM harness_accounts")
sent=0 n_tx=0 n_ins=0 n_upd=0 n_del=0 n_multi=0 n_batch=0
stop=0
start_us=${EPOCHREALTIME/./}

exec {PSQL}> >(exec psql -X -q -v ON_ERROR_STOP=1 -d "$URL" >/dev/null)
PSQL_PID=$!

finish() {
  exec {PSQL}>&-
  local rc=0
  wait "$PSQL_PID" || rc=$?
  local el_us=$((${EPOCHREALTIME/./} - start_us))
  printf 'load-gen: %d transactions (%d inserts, %d update+event, %d deletes, %d multi-row updates, %d batches of 5000 events) in %d.%d s\n' \
    "$n_tx" "$n_ins" "$n_upd" "$n_del" "$n_multi" "$n_batch" $((el_us / 1000000)) $((el_us / 100000 % 10))
  ((rc == 0)) || die "psql exited $rc"
}
trap 'stop=1' TERM INT
# A dead psql fails the next write (and the script) instead of killing it
# silently with SIGPIPE.
trap '' PIPE

# one_tx writes one transaction to the psql session.
one_tx() {
  local r=$((RANDOM % 100)) id
  if ((BATCH_EVERY > 0 && n_tx % BATCH_EVERY == BATCH_EVERY - 1)); then
    printf 'INSERT INTO harness_events (account_id, amount) SELECT g %% 100, g FROM generate_series(1, 5000) g;\n' >&"$PSQL"
    n_batch=$((n_batch + 1))
  elif ((r < 45 || next_id < 20)); then
    printf "INSERT INTO harness_accounts (id, balance, note) VALUES (%d, %d, 'n%d');\n" "$next_id" $((RANDOM % 1000)) "$RANDOM" >&"$PSQL"
    next_id=$((next_id + 1))
    n_ins=$((n_ins + 1))
  elif ((r < 75)); then
    id=$((1 + (RANDOM * 32768 + RANDOM) % (next_id - 1)))
    printf 'BEGIN; UPDATE harness_accounts SET balance = balance + %d, updated_at = now() WHERE id = %d; INSERT INTO harness_events (account_id, amount) VALUES (%d, %d); COMMIT;\n' \
      $((RANDOM % 100)) "$id" "$id" $((RANDOM % 100)) >&"$PSQL"
    n_upd=$((n_upd + 1))
  elif ((r < 90)); then
    id=$((1 + (RANDOM * 32768 + RANDOM) % (next_id - 1)))
    printf 'DELETE FROM harness_accounts WHERE id = %d;\n' "$id" >&"$PSQL"
    n_del=$((n_del + 1))
  else
    id=$((1 + (RANDOM * 32768 + RANDOM) % (next_id - 1)))
    printf "UPDATE harness_accounts SET note = md5(note), updated_at = now() WHERE id BETWEEN %d AND %d;\n" "$id" $((id + 9)) >&"$PSQL"
    n_multi=$((n_multi + 1))
  fi
  n_tx=$((n_tx + 1))
}

while ((!stop)); do
  el_us=$((${EPOCHREALTIME/./} - start_us))
  ((DURATION == 0 || el_us < DURATION * 1000000)) || break
  due=$((el_us * RATE / 1000000))
  # More than a second behind (psql or the server is slower than the rate):
  # skip ahead rather than burst.
  ((due - sent <= RATE)) || sent=$((due - RATE))
  while ((sent < due && !stop)); do
    one_tx
    sent=$((sent + 1))
  done
  sleep 0.02
done
finish
