#!/usr/bin/env bash
# bench-http.sh [ROUNDS] [REQUESTS]: the HTTP benchmarks interleaved (ROUNDS
# rounds, default 3), so each
# ratio compares neighbours of one round on a machine whose speed drifts.
# Every round runs the bare fiber handler, bare + one Redis PING, enter
# (coalesced, then ScriptBatch 1), status (exact, the default) and status with
# the snapshot (FLASHGATE_STATUS_SNAPSHOT, the opt-in), REQUESTS each (default 40000),
# with Redis flushed in between, and prints each as a percentage of the bare
# handler's requests/s; the last line gives the medians. Needs REDIS_URL
# (make bench-http starts a throwaway redis-server). This is the Go-client
# half of make bench-http; the external half (wrk against flashgate serve)
# is tools/benchwrk.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${2:-40000}
: "${REDIS_URL:?run through scripts/with-redis.sh (make bench-http)}"
bin=$(mktemp -d)/server.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./server/
benches=('BareFiber$' 'FiberRedisPing$' 'EnterHTTP/batch=32$' 'EnterHTTP/batch=1$' 'StatusHTTP$' 'StatusHTTPSnapshot$')
echo "round  bare ns/op |  PING  enter  enter(batch=1)  status  status(snapshot)  (% of bare req/s)  users/call"
cols=("" "" "" "" "")
for r in $(seq "$rounds"); do
  ns=() users=
  for b in "${benches[@]}"; do
    redis-cli -u "$REDIS_URL" flushall >/dev/null
    out=$(cd server && "$bin" -test.run '^$' -test.bench "$b" -test.benchtime "${n}x" | grep '^Benchmark')
    ns+=("$(awk '{print $3}' <<<"$out")")
    u=$(grep -o '[0-9.]* users/call' <<<"$out" | awk '{print $1}' || true)
    if [ -n "$u" ] && [ -z "$users" ]; then users=$u; fi
  done
  printf '%5d  %9s |' "$r" "${ns[0]}"
  for i in 1 2 3 4 5; do
    pct=$(awk -v a="${ns[0]}" -v b="${ns[$i]}" 'BEGIN { printf "%.0f", 100 * a / b }')
    cols[i-1]="${cols[i-1]} $pct"
    printf ' %5s%%' "$pct"
  done
  printf '  %s\n' "$users"
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf 'median           |'
for i in 0 1 2 3 4; do printf ' %5s%%' "$(median "${cols[i]}")"; done
echo
