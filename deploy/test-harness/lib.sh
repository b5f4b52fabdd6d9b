# shellcheck shell=bash
# Common shell of the pg-cdc test harness (docs/test-harness.md): a
# throwaway PostgreSQL, the pg-cdc configuration, background processes
# tracked by PID, the load generator, verify. Sourced by the scripts beside
# it, never run on its own.
#
# Every process a script starts is recorded in HARNESS_PIDS and stopped by
# PID in the EXIT trap (TERM, then KILL after 10 s); nothing is stopped by
# name. A throwaway PostgreSQL is stopped with pg_ctl on its own data
# directory.

HARNESS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HARNESS_DIR/../.." && pwd)
HARNESS_NAME=${HARNESS_NAME:-$(basename "$0" .sh)}

HARNESS_PIDS=()      # background processes this script started
HARNESS_UNDO=()      # commands the cleanup runs, last first (unmounts, chmods)
HARNESS_FAILED=1     # cleared by harness_done; a failed run keeps its work dir
WORK=""              # work directory: config, sink, state, logs
KEEP=0               # --keep: keep WORK even after a successful run
HARNESS_BIN=$REPO_ROOT/bin/pg-cdc   # --bin; not a PGCDC_* variable: pg-cdc refuses unknown ones
SRC_URL=""           # the source database pg-cdc captures
SLOT=""              # replication slot (and publication) of this run
CONFIG=""            # pg-cdc.yml of this run
SINK=""              # filesystem sink
STATE=""             # state.path
EXTERNAL_SOURCE=0    # 1: SRC_URL was given (--url): tear the capture down at the end
PGCDC_PID=""         # the running 'pg-cdc start', if any
PGCDC_LOG=""         # its log
LOAD_PID=""          # the running load-gen.sh, if any
WAIT_RC=""           # exit code set by wait_exit

PG_DIR=""            # throwaway cluster (pg_throwaway)
PG_PORT=""
PG_BIN=""
PG_RUN_AS=()         # as root, PostgreSQL runs as the postgres OS user

log() { printf '%s %s: %s\n' "$(date +%H:%M:%S)" "$HARNESS_NAME" "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

# now_ms prints the wall clock in milliseconds (bash 5: no fork).
now_ms() {
  local t=${EPOCHREALTIME/./}
  echo $((10#$t / 1000))
}

sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# ---------------------------------------------------------------- processes

track() { HARNESS_PIDS+=("$1"); }

untrack() {
  local keep=() p
  for p in "${HARNESS_PIDS[@]}"; do
    [[ $p == "$1" ]] || keep+=("$p")
  done
  HARNESS_PIDS=("${keep[@]}")
}

# alive PID: the process runs (a zombie, exited but not yet waited for,
# does not count).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

# wait_exit PID SECONDS: waits for a child of this shell to exit and sets
# WAIT_RC to its exit code (128+signal when a signal ended it), or to 124
# when it still runs after SECONDS (it is left running and tracked).
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  WAIT_RC=124
  # bash reports a background child that a signal ended ("Killed") on
  # stderr as soon as it reaps it, which happens in this loop: not news here.
  {
    while alive "$pid"; do
      ((SECONDS < deadline)) || return 0
      sleep 0.1
    done
    WAIT_RC=0
    wait "$pid" || WAIT_RC=$?
    true
  } 2>/dev/null
  untrack "$pid"
  [[ $pid != "$PGCDC_PID" ]] || PGCDC_PID=""
}

# stop_pid PID: TERM, then KILL after 10 s; waits for it.
stop_pid() {
  local pid=$1
  alive "$pid" || {
    wait "$pid" 2>/dev/null || true
    untrack "$pid"
    return 0
  }
  kill -TERM "$pid" 2>/dev/null || true
  wait_exit "$pid" 10
  if [[ $WAIT_RC == 124 ]]; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    untrack "$pid"
  fi
}

harness_cleanup() {
  local rc=$? p i
  trap - EXIT INT TERM
  for p in "${HARNESS_PIDS[@]}"; do
    [[ -n $p ]] && stop_pid "$p"
  done
  for ((i = ${#HARNESS_UNDO[@]} - 1; i >= 0; i--)); do
    eval "${HARNESS_UNDO[i]}" || true
  done
  if ((EXTERNAL_SOURCE)) && [[ -n $CONFIG && -f $CONFIG ]]; then
    # A slot left behind on someone's database pins WAL forever.
    "$HARNESS_BIN" -c "$CONFIG" teardown --yes >>"$WORK/teardown.log" 2>&1 ||
      log "teardown failed (see $WORK/teardown.log): drop slot $SLOT and publication $SLOT by hand"
  fi
  if [[ -n $PG_DIR ]]; then
    [[ -n $WORK && -d $WORK && -f $PG_DIR/postgres.log ]] && cp "$PG_DIR/postgres.log" "$WORK/postgres.log" 2>/dev/null
    pg_stop
    rm -rf "$PG_DIR"
  fi
  if [[ -n $WORK && -d $WORK ]]; then
    if ((HARNESS_FAILED || KEEP)); then
      log "work directory kept: $WORK"
    else
      rm -rf "$WORK"
    fi
  fi
  exit "$rc"
}

# harness_init: work directory, traps, the pg-cdc binary.
harness_init() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/pgcdc-$HARNESS_NAME.XXXXXX")
  trap harness_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  [[ -x $HARNESS_BIN ]] || die "no pg-cdc binary at $HARNESS_BIN: run 'make build' or pass --bin"
  command -v psql >/dev/null || die "psql not found (Debian: apt-get install postgresql-client)"
  SINK=$WORK/sink
  STATE=$WORK/state
  CONFIG=$WORK/pg-cdc.yml
  SLOT=pgcdc_harness_$(date +%s)_$$
}

# harness_done marks the run successful (its work dir is removed at exit).
harness_done() { HARNESS_FAILED=0; }

# ---------------------------------------------------------------- PostgreSQL

pg_bindir() {
  local d
  if d=$(dirname "$(command -v pg_ctl 2>/dev/null)" 2>/dev/null) && [[ -x $d/initdb && -x $d/postgres ]]; then
    echo "$d"
    return
  fi
  # Debian keeps server binaries off PATH; 15 is the version the project
  # is developed against.
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]] && {
      echo "$d"
      return
    }
  done
  die "no PostgreSQL server binaries (initdb, pg_ctl): run scripts/ensure-postgres.sh"
}

# pg_cmd PROGRAM ARGS...: runs a PostgreSQL program as the cluster's owner
# with a small fixed environment (PGDATA and friends must not leak in).
pg_cmd() {
  local prog=$1
  shift
  (cd "$PG_DIR" && env -i PATH="$PATH" LC_ALL=C HOME="$PG_DIR" "${PG_RUN_AS[@]}" "$PG_BIN/$prog" "$@")
}

free_port() {
  local p _
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  die "no free loopback port found"
}

# pg_throwaway [SETTING...] [-- INITDB_ARG...]: initdb in a new temporary
# directory and start it on a free loopback port with wal_level=logical
# (the settings of internal/pgtest), trust authentication on loopback only.
# Extra "name = value" settings win over the defaults. Sets PG_PORT and
# SRC_URL (database "harness").
pg_throwaway() {
  local settings=() initdb_args=() attempt
  while (($#)); do
    if [[ $1 == -- ]]; then
      shift
      initdb_args=("$@")
      break
    fi
    settings+=("$1")
    shift
  done
  PG_BIN=$(pg_bindir)
  PG_DIR=$(mktemp -d /tmp/pgcdc-harness-pg.XXXXXX)
  if ((EUID == 0)); then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres OS user to run PostgreSQL as"
    chown postgres: "$PG_DIR"
    PG_RUN_AS=(setpriv --reuid=postgres --regid=postgres --init-groups)
  fi
  pg_cmd initdb -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync "${initdb_args[@]}" \
    >"$PG_DIR/initdb.log" 2>&1 || die "initdb failed: $(tail -5 "$PG_DIR/initdb.log")"
  echo "include 'harness.conf'" >>"$PG_DIR/data/postgresql.conf"
  cat >"$PG_DIR/data/pg_hba.conf" <<'EOF'
local all         all                trust
host  all         all  127.0.0.1/32  trust
host  replication all  127.0.0.1/32  trust
EOF
  for attempt in 1 2 3; do
    PG_PORT=$(free_port)
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $PG_PORT"
      echo "unix_socket_directories = '$PG_DIR'"
      echo "wal_level = logical"
      echo "max_replication_slots = 8"
      echo "max_wal_senders = 8"
      echo "max_connections = 50"
      # Small, so that the load's larger transactions are streamed in
      # progress and exercise the assembler (as in internal/pgtest).
      echo "logical_decoding_work_mem = 64kB"
      echo "fsync = off"
      echo "full_page_writes = off"
      echo "shared_buffers = 32MB"
      printf '%s\n' "${settings[@]}"
    } >"$PG_DIR/data/harness.conf"
    [[ -n ${PG_RUN_AS[*]} ]] && chown postgres: "$PG_DIR/data/harness.conf" "$PG_DIR/data/pg_hba.conf"
    if pg_cmd pg_ctl -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 start >"$PG_DIR/pg_ctl.log" 2>&1; then
      SRC_URL="postgres://postgres@127.0.0.1:$PG_PORT/harness?sslmode=disable"
      psql -X -q -v ON_ERROR_STOP=1 -d "postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable" \
        -c "CREATE DATABASE harness" >/dev/null || die "create database harness"
      log "throwaway PostgreSQL on 127.0.0.1:$PG_PORT ($PG_DIR)"
      return
    fi
    grep -q -e 'could not bind' -e 'already in use' "$PG_DIR/postgres.log" 2>/dev/null || break
    log "port $PG_PORT was taken (attempt $attempt); picking another"
  done
  die "PostgreSQL did not start: $(tail -5 "$PG_DIR/postgres.log" 2>/dev/null)"
}

pg_stop() {
  [[ -n $PG_DIR && -f $PG_DIR/data/postmaster.pid ]] || return 0
  pg_cmd pg_ctl -D "$PG_DIR/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
    pg_cmd pg_ctl -D "$PG_DIR/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
}

# sql SQL: one statement on the source; prints unaligned tuples.
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC_URL" -c "$1"; }

# ---------------------------------------------------------------- pg-cdc

# write_config [EXTRA_YAML]: the run's pg-cdc.yml, capturing the load
# generator's tables only. A flush every second, so that a short run goes
# through many epochs; the metrics endpoint on a free port, so that runs
# side by side do not collide on 9090. EXTRA_YAML adds whole sections.
write_config() {
  cat >"$CONFIG" <<EOF
source:
  postgres:
    url: "$SRC_URL"
tables:
  include: ["public.harness_accounts", "public.harness_events"]
replication:
  publication: $SLOT
  slot: $SLOT
  standby_interval_sec: 1
  memory_budget_bytes: 1048576
storage:
  type: filesystem
  path: "$SINK"
flush:
  interval_sec: 1
  drain_timeout_sec: 30
state:
  path: "$STATE"
log:
  level: info
metrics:
  listen: "127.0.0.1:0"
${1:-}
EOF
}

# pgcdc COMMAND ARGS...: runs pg-cdc in the foreground.
pgcdc() { "$HARNESS_BIN" -c "$CONFIG" "$@"; }

# pgcdc_init: the load generator's tables, then pg-cdc init.
pgcdc_init() {
  "$HARNESS_DIR/load-gen.sh" --url "$SRC_URL" --setup
  mkdir -p "$SINK"
  pgcdc init >"$WORK/init.log" 2>&1 || die "pg-cdc init failed: $(tail -5 "$WORK/init.log")"
  log "initialized: slot $SLOT, sink $SINK"
}

# pgcdc_start [LOG]: 'pg-cdc start' in the background; sets PGCDC_PID.
pgcdc_start() {
  PGCDC_LOG=${1:-$WORK/start.log}
  "$HARNESS_BIN" -c "$CONFIG" start >>"$PGCDC_LOG" 2>&1 &
  PGCDC_PID=$!
  track "$PGCDC_PID"
}

# manifest_end_lsn: the manifest's end LSN (the durable position).
manifest_end_lsn() { manifest_field end_lsn; }

# manifest_field NAME: the first value of NAME in the manifest, which is
# the top-level one (it precedes the tables and the history). One awk that
# stops reading: a "grep | head" would die of SIGPIPE under pipefail once
# the manifest grows.
manifest_field() {
  awk -v key="\"$1\":" '{
    i = index($0, key)
    if (i == 0) next
    v = substr($0, i + length(key))
    sub(/^ *"?/, "", v)
    sub(/["},].*$/, "", v)
    print v
    exit
  }' "$SINK/_pgcdc/manifest.json"
}

# manifest_epoch: the manifest's epoch (0 right after init).
manifest_epoch() { manifest_field epoch; }

# wait_epoch_after EPOCH SECONDS: waits until the manifest's epoch passes
# EPOCH; fails after SECONDS.
wait_epoch_after() {
  local deadline=$((SECONDS + $2))
  while (($(manifest_epoch) <= $1)); do
    ((SECONDS < deadline)) || die "the manifest stayed at epoch $(manifest_epoch) for $2 s: $(tail -5 "$PGCDC_LOG")"
    sleep 0.2
  done
}

# check_not_over_confirmed: DESIGN §1 rule 1, seen from outside: the slot is
# never confirmed past the manifest's end LSN. Valid while pg-cdc runs too:
# the slot is read first, and the manifest only moves forward.
check_not_over_confirmed() {
  local confirmed end ok
  confirmed=$(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
  end=$(manifest_end_lsn)
  [[ -n $end ]] || die "no end LSN in $SINK/_pgcdc/manifest.json"
  [[ -n $confirmed ]] || return 0
  ok=$(sql "SELECT '$confirmed'::pg_lsn <= '$end'::pg_lsn")
  [[ $ok == t ]] || die "slot $SLOT is confirmed at $confirmed, past the manifest's end LSN $end"
}

# load_start RATE: load-gen.sh in the background until load_stop.
load_start() {
  "$HARNESS_DIR/load-gen.sh" --url "$SRC_URL" --rate "$1" >"$WORK/load.log" 2>&1 &
  LOAD_PID=$!
  track "$LOAD_PID"
  log "load: $1 transactions/s (load-gen.sh pid $LOAD_PID)"
}

# load_stop: stops the load generator and checks that it ran without error.
load_stop() {
  [[ -n $LOAD_PID ]] || return 0
  alive "$LOAD_PID" || die "load-gen.sh died early: $(tail -5 "$WORK/load.log")"
  kill -TERM "$LOAD_PID"
  wait_exit "$LOAD_PID" 30
  [[ $WAIT_RC == 0 ]] || die "load-gen.sh exited $WAIT_RC: $(tail -5 "$WORK/load.log")"
  LOAD_PID=""
  log "$(tail -1 "$WORK/load.log")"
}

# verify_sink: with the load stopped, runs 'pg-cdc verify' beside a running
# 'pg-cdc start' (the one already running, or a new one that catches up:
# verify waits until the manifest passes its watermark), then stops start
# with SIGTERM (exit 0 expected). Sets VERIFY_SOURCE_ROWS, VERIFY_SINK_ROWS
# and VERIFY_MISSING (summed over the tables), and fails unless every table
# is equal.
verify_sink() {
  local rc=0 line
  if [[ -n $PGCDC_PID ]] && ! alive "$PGCDC_PID"; then
    wait_exit "$PGCDC_PID" 1
    die "'pg-cdc start' exited $WAIT_RC before verify: $(tail -5 "$PGCDC_LOG")"
  fi
  [[ -n $PGCDC_PID ]] || pgcdc_start "$WORK/catchup.log"
  pgcdc verify --wait 5m >"$WORK/verify.txt" 2>&1 || rc=$?
  kill -TERM "$PGCDC_PID"
  wait_exit "$PGCDC_PID" 90
  [[ $WAIT_RC == 0 ]] || die "'pg-cdc start' exited $WAIT_RC after SIGTERM at the end: $(tail -5 "$PGCDC_LOG")"
  VERIFY_SOURCE_ROWS=0 VERIFY_SINK_ROWS=0 VERIFY_MISSING=0
  while IFS= read -r line; do
    if [[ $line =~ ^[^\ ]+:\ (equal|DIFFERENT):\ ([0-9]+)\ rows\ in\ the\ source,\ ([0-9]+)\ in\ the\ sink ]]; then
      VERIFY_SOURCE_ROWS=$((VERIFY_SOURCE_ROWS + BASH_REMATCH[2]))
      VERIFY_SINK_ROWS=$((VERIFY_SINK_ROWS + BASH_REMATCH[3]))
      if [[ $line =~ ([0-9]+)\ missing\ in\ the\ sink ]]; then
        VERIFY_MISSING=$((VERIFY_MISSING + BASH_REMATCH[1]))
      fi
    fi
  done <"$WORK/verify.txt"
  case $rc in
  0) log "verify: $(tail -1 "$WORK/verify.txt"); $VERIFY_SOURCE_ROWS rows in the source, $VERIFY_SINK_ROWS in the sink, 0 missing" ;;
  19)
    cat "$WORK/verify.txt" >&2
    die "verify found differences (exit 19): $VERIFY_MISSING rows missing in the sink"
    ;;
  *)
    cat "$WORK/verify.txt" >&2
    die "verify failed with exit $rc"
    ;;
  esac
}

# usage_header: the calling script's header comment, as help text.
usage_header() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$HARNESS_DIR/$(basename "$0")"
}

# usage_common: the options every script shares.
usage_common() {
  cat <<'EOF'
  --url URL      source database (wal_level=logical, a superuser or a role with
                 REPLICATION); its tables harness_accounts and harness_events are
                 created, and the slot and publication are dropped at the end.
                 Without --url: a throwaway PostgreSQL in a temp dir.
  --bin PATH     the pg-cdc binary (default: bin/pg-cdc, from 'make build')
  --keep         keep the work directory (config, sink, logs) after success
  --self-test    run on a throwaway PostgreSQL with small counts; exit non-zero
                 on any failure (what the Go test runs)
EOF
}

# ---------------------------------------------------------------- loops

# signal_loop_main SIGNAL EXPECTED_EXIT ARGS...: what sigterm-loop.sh and
# kill-loop.sh run. N cycles of: start pg-cdc, let it stream under load for
# a random time, send SIGNAL, expect EXPECTED_EXIT; after each cycle the
# slot must not be confirmed past the manifest. Then stop the load, catch
# up and verify (nothing lost), and print one result line.
signal_loop_main() {
  local signal=$1 expected=$2 cycles=100 rate=200 min_sec=1 max_sec=5 self_test=0 url=""
  local set_cycles="" set_max="" set_rate=""
  shift 2
  while (($#)); do
    case $1 in
    --cycles) set_cycles=$2 && shift ;;
    --rate) set_rate=$2 && shift ;;
    --min-sec) min_sec=$2 && shift ;;
    --max-sec) set_max=$2 && shift ;;
    --url) url=$2 && shift ;;
    --bin) HARNESS_BIN=$2 && shift ;;
    --keep) KEEP=1 ;;
    --self-test) self_test=1 ;;
    -h | --help) signal_loop_usage "$signal" "$expected" ;;
    *) echo "$HARNESS_NAME: unknown argument $1" >&2 && signal_loop_usage "$signal" "$expected" ;;
    esac
    shift
  done
  if ((self_test)); then
    cycles=3 max_sec=2 rate=100 url=""
  fi
  cycles=${set_cycles:-$cycles} max_sec=${set_max:-$max_sec} rate=${set_rate:-$rate}
  [[ $cycles =~ ^[1-9][0-9]*$ ]] || die "--cycles: want a positive integer, got $cycles"
  if ! [[ $min_sec =~ ^[0-9]+$ && $max_sec =~ ^[0-9]+$ ]] || ((min_sec > max_sec || max_sec == 0)); then
    die "--min-sec and --max-sec: want whole seconds, min <= max"
  fi

  harness_init
  local t0=$SECONDS
  if [[ -n $url ]]; then
    SRC_URL=$url EXTERNAL_SOURCE=1
  else
    pg_throwaway
  fi
  write_config
  pgcdc_init
  load_start "$rate"

  local i ms span=$(((max_sec - min_sec) * 1000 + 1)) streamed_ms=0
  for ((i = 1; i <= cycles; i++)); do
    echo "=== cycle $i" >>"$WORK/start.log"
    pgcdc_start
    ms=$((min_sec * 1000 + (RANDOM * 32768 + RANDOM) % span))
    sleep_ms "$ms"
    streamed_ms=$((streamed_ms + ms))
    alive "$PGCDC_PID" || {
      wait_exit "$PGCDC_PID" 1
      die "cycle $i: pg-cdc exited $WAIT_RC before SIG$signal: $(tail -5 "$WORK/start.log")"
    }
    kill -s "$signal" "$PGCDC_PID"
    wait_exit "$PGCDC_PID" 120
    [[ $WAIT_RC == "$expected" ]] ||
      die "cycle $i: pg-cdc exited $WAIT_RC after SIG$signal at $ms ms, want $expected: $(tail -8 "$WORK/start.log")"
    if [[ $signal == TERM ]]; then
      [[ $(tail -3 "$WORK/start.log") == *'msg="stopped cleanly"'* ]] ||
        die "cycle $i: exit 0 without 'stopped cleanly': $(tail -5 "$WORK/start.log")"
    fi
    check_not_over_confirmed
    ((i % 10 == 0 || i == cycles)) && log "cycle $i/$cycles: exit $WAIT_RC, manifest end LSN $(manifest_end_lsn)"
  done

  load_stop
  local load_summary
  load_summary=$(tail -1 "$WORK/load.log")
  verify_sink
  check_not_over_confirmed
  local epoch
  epoch=$(manifest_epoch)
  local unclean
  unclean=$(grep -c 'replication session failed; retrying' "$WORK/start.log" || true)
  echo "$HARNESS_NAME: PASS: $cycles cycles of start, $min_sec-$max_sec s under load, SIG$signal, exit $expected" \
    "(streamed $((streamed_ms / 1000)) s in all; $unclean session retries logged);" \
    "${load_summary#load-gen: };" \
    "verify: equal, $VERIFY_SOURCE_ROWS rows in the source, $VERIFY_SINK_ROWS in the sink, $VERIFY_MISSING lost;" \
    "manifest epoch $epoch; wall time $((SECONDS - t0)) s"
  harness_done
}

signal_loop_usage() {
  cat <<EOF
usage: $HARNESS_NAME.sh [--cycles 100] [--rate 200] [--min-sec 1] [--max-sec 5]
                        [--url URL] [--bin PATH] [--keep] [--self-test]

N cycles of: start pg-cdc, stream under load-gen.sh for a random --min-sec to
--max-sec, SIG$1, expect exit $2; after each cycle the slot must not be
confirmed past the manifest. Then stop the load, run pg-cdc once more to catch
up, and 'pg-cdc verify' (exit 19 on a difference): nothing may be lost.
--self-test: 3 cycles of 1-2 s at 100 transactions/s on a throwaway cluster.

  --cycles N     cycles (default 100)
  --rate R       load, transactions per second (default 200)
  --min-sec S    shortest streaming time per cycle (default 1)
  --max-sec S    longest (default 5)
EOF
  usage_common
  exit 2
}
