#!/usr/bin/env bash
# bench-workerd.sh [ROUNDS] [DURATION]: throughput of the Cloudflare Worker
# example in workerd, measured from outside with wrk on loopback
# (examples/cloudflare-worker BenchmarkWorkerdThroughput): per crypto path
# (FLASHGATE_CRYPTO=host and =pure), requests/s verifying + forwarding, the
# same worker forwarding an unprotected path, and a worker answering a
# constant, in ROUNDS interleaved rounds (default 3) of DURATION each
# (wrk -d, default 5s), medians, next to a worker doing only the signature
# check (the limit). Prints the table with the host path's ratio next to its
# 60 % budget (OVER when below: it reports, it does not fail).
#
# Needs wrk (installed with apt-get when missing and run as root), workerd (npm ci in
# examples/cloudflare-worker) and the wasm module: $FLASHGATE_WASM, else
# build/flashgate-verifier.wasm, built with scripts/build-wasm.sh if missing.
# FLASHGATE_BENCH_CONNECTIONS (wrk -c, default 32) and FLASHGATE_BENCH_THREADS
# (wrk -t, default 1) are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "bench-workerd.sh: installing wrk (apt)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
  fi
  command -v wrk >/dev/null || { echo "bench-workerd.sh: wrk is not installed: apt-get install -y wrk" >&2; exit 1; }
fi
if [ -z "${FLASHGATE_WASM:-}" ]; then
  FLASHGATE_WASM=$PWD/build/flashgate-verifier.wasm
  [ -f "$FLASHGATE_WASM" ] || scripts/build-wasm.sh "$FLASHGATE_WASM" >/dev/null
fi
export FLASHGATE_WASM
export FLASHGATE_BENCH_ROUNDS=${1:-${FLASHGATE_BENCH_ROUNDS:-3}}
export FLASHGATE_BENCH_DURATION=${2:-${FLASHGATE_BENCH_DURATION:-5s}}
exec go test -count=1 -run '^$' -bench 'WorkerdThroughput$' -benchtime 1x -timeout 30m ./examples/cloudflare-worker/
