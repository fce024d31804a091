#!/usr/bin/env bash
# Measures the HTTP edge (issue 2): time from start to /ready, requests/s and
# latency of GET /live and an authenticated GET /v1/api-keys, and peak RSS at
# idle and under load. Loopback only; every run is bounded in time.
#
#   bench/edge.sh [sqlite|postgres] [seconds per run] [runs]
#
# Needs wrk (Debian package) and a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-sqlite}
seconds=${2:-10}
runs=${3:-3}
port=18080
bin=target/release/tern
work=$(mktemp -d)
db=""
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "$db" ] && psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db" postgres
  rm -rf "$work"
}
pid=""
trap cleanup EXIT

case $backend in
  sqlite) url="sqlite://$work/tern.db" ;;
  postgres)
    db="tern_bench_$$"
    psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" postgres
    url="postgres://postgres@127.0.0.1:5432/$db" ;;
  *) echo "backend is sqlite or postgres" >&2; exit 2 ;;
esac

start_ns=$(date +%s%N)
TERN_DATABASE_URL=$url TERN_BIND=127.0.0.1:$port TERN_SANDBOX_BIND=off TERN_LOG=error \
  TERN_RATE_LIMITS=off TERN_DATA_DIR=$work "$bin" serve > "$work/log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/ready" > /dev/null; do sleep 0.005; done
ready_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))

key=$(curl -sf -X POST "http://127.0.0.1:$port/v1/auth/m2m/register" -H 'Content-Type: application/json' \
  -d '{"organization_name":"Bench","email":"bench@example.com"}' | sed -E 's/.*"api_key":"([^"]+)".*/\1/')
rss_kb() { awk '/VmHWM/ {print $2}' /proc/$pid/status; }
idle_rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)

run() { # name, path, extra wrk args... (CONNECTIONS overrides 32)
  local name=$1 path=$2; shift 2
  local connections=${CONNECTIONS:-32} threads=2
  [ "$connections" -lt 2 ] && threads=1
  for i in $(seq 1 "$runs"); do
    wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency "$@" "http://127.0.0.1:$port$path" > "$work/$name.$i"
    awk -v n="$name" -v i="$i" '
      /Requests\/sec/ { rps = $2 }
      $1 == "50.000%" { p50 = $2 } $1 == "99.000%" { p99 = $2 }
      $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 }
      END { printf "%s run %d: %s req/s p50 %s p99 %s\n", n, i, rps, p50, p99 }' "$work/$name.$i"
  done
}

echo "backend=$backend ready_after_ms=$ready_ms idle_rss_kb=$idle_rss"
run live /live
run api_keys /v1/api-keys -H "Authorization: Bearer $key"
# One connection: latency is (nearly) server time, no queueing.
CONNECTIONS=1 run live_serial /live
CONNECTIONS=1 run api_keys_serial /v1/api-keys -H "Authorization: Bearer $key"
echo "peak_rss_kb=$(rss_kb)"
