#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed, and curl (the README
# test runs the curl commands of README.md and docs/ as written): installs Debian's
# redis-server and curl packages when missing and we are root; otherwise explains.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "redis-server or curl is not installed. Install them with: sudo apt-get install -y redis-server curl" >&2
  echo "(or point the tests at a running server: REDIS_URL=redis://127.0.0.1:6379/0 make test)" >&2
  exit 1
fi
echo ">> installing redis-server and curl (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq redis-server curl >/dev/null
# Debian's package starts a system service; the tests use their own servers.
(systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null 2>&1
