#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are
# installed and prints the directory holding them. Debian keeps them under
# /usr/lib/postgresql/<major>/bin, off PATH; internal/testing/pgtest looks there too
# (or in $FLASHGATE_PG_BIN). Installs Debian's postgresql package when they
# are missing and we are root; otherwise explains and exits 1.
set -euo pipefail

find_bin() {
  local d
  if [ -n "${FLASHGATE_PG_BIN:-}" ]; then
    if [ -x "$FLASHGATE_PG_BIN/initdb" ] && [ -x "$FLASHGATE_PG_BIN/pg_ctl" ] && [ -x "$FLASHGATE_PG_BIN/postgres" ]; then
      echo "$FLASHGATE_PG_BIN"; return 0
    fi
    echo "FLASHGATE_PG_BIN=$FLASHGATE_PG_BIN does not hold initdb, pg_ctl and postgres" >&2
    exit 1
  fi
  # Newest major first (15 on Debian 12).
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rn); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
      echo "$d"; return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

if find_bin; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not installed." >&2
  echo "Install them with: sudo apt-get install -y postgresql" >&2
  echo "(or set FLASHGATE_PG_BIN to a directory holding them)" >&2
  exit 1
fi
echo ">> installing postgresql (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq postgresql >/dev/null
# Debian's package creates and starts a system cluster; the tests use their own.
(systemctl stop postgresql 2>/dev/null || service postgresql stop 2>/dev/null || true) >/dev/null 2>&1
find_bin || { echo "postgresql installed but initdb/pg_ctl/postgres not found under /usr/lib/postgresql" >&2; exit 1; }
