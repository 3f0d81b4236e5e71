#!/usr/bin/env bash
# with-redis.sh CMD…: runs CMD with REDIS_URL pointing at a throwaway
# redis-server on a free loopback port (unless REDIS_URL is already set),
# and stops that server afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${REDIS_URL:-}" ]; then
  exec "$@"
fi
scripts/ensure-redis.sh
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do
  port=$((20000 + RANDOM % 20000))
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$dir" \
    --loglevel warning --logfile "$dir/redis.log" &
  pid=$!
  for _ in $(seq 50); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break 2; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=
done
[ -n "$pid" ] || { echo "could not start redis-server" >&2; cat "$dir/redis.log" >&2 || true; exit 1; }
export REDIS_URL="redis://127.0.0.1:$port/0"
echo ">> redis-server $(redis-server --version | awk '{print $3}') on $REDIS_URL" >&2
"$@"
