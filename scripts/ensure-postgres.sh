#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries (initdb, pg_ctl, postgres) are
# installed, installing Debian's postgresql package if they are missing.
# Tests and the demo start their own throwaway clusters from these binaries;
# no system cluster is used or started.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if have_pg; then
  exit 0
fi

echo "PostgreSQL server binaries not found; installing Debian's postgresql package" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq postgresql >/dev/null
# Debian's package starts a system cluster; we do not need it.
$SUDO pg_ctlcluster --help >/dev/null 2>&1 && for c in $(pg_lsclusters -h 2>/dev/null | awk '{print $1"/"$2}'); do
  $SUDO pg_ctlcluster ${c%/*} ${c#*/} stop || true
done
have_pg || { echo "PostgreSQL installation failed" >&2; exit 1; }
