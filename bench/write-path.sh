#!/usr/bin/env bash
# Fills in issue 20's table: settlements, transfers and card authorization
# decisions per second, on a fresh database per run, with the ledger check
# after each; then the median of the runs. On PostgreSQL, with
# pg_stat_statements loaded (shared_preload_libraries), also the statements
# the server ran per settlement and per transfer.
#
#   bench/write-path.sh [sqlite|postgres] [runs] [workload...]
#
# workloads: settlements transfers authorizations paced (default: all).
# Needs a release build (cargo build --release), or TERN_BENCH_BIN naming
# another binary (to compare builds). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-sqlite}
runs=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
workloads=${*:-settlements transfers authorizations paced}
bin=${TERN_BENCH_BIN:-target/release/tern}
port=18090
sandbox=18091
secret=bench-secret
work=$(mktemp -d)
pid=""
db=""
stop() {
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  pid=""
  [ -n "$db" ] && psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" postgres
  db=""
}
trap 'stop; rm -rf "$work"' EXIT
psql_q() { psql -qAt -h 127.0.0.1 -U postgres "$@"; }
stats=$( [ "$backend" = postgres ] && psql_q -c "SHOW shared_preload_libraries" postgres | grep -c pg_stat_statements || true)

# Starts a server on a fresh database; sets $url.
start() {
  case $backend in
    sqlite) rm -rf "$work/data"; mkdir -p "$work/data"; url="sqlite://$work/data/tern.db" ;;
    postgres)
      db="tern_bench_$$"
      psql_q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" postgres
      [ "${stats:-0}" -gt 0 ] && psql_q -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" "$db"
      url="postgres://postgres@127.0.0.1:5432/$db" ;;
    *) echo "backend is sqlite or postgres" >&2; exit 2 ;;
  esac
  TERN_DATABASE_URL=$url TERN_BIND=127.0.0.1:$port TERN_SANDBOX_BIND=127.0.0.1:$sandbox \
    TERN_LOG=error TERN_RATE_LIMITS=off TERN_DATA_DIR=$work/data \
    TERN_CARD_PROVIDER_WEBHOOK_SECRET=$secret "$bin" serve > "$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/ready" > /dev/null && return; sleep 0.05; done
  echo "the server did not become ready" >&2; cat "$work/log" >&2; exit 1
}

# Statements the server ran since the reset, and round trips (calls).
statements() {
  [ "${stats:-0}" -gt 0 ] || return 0
  psql_q -c "SELECT sum(calls) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db') AND query NOT ILIKE '%pg_stat_statements%'" "$db"
}
reset_statements() {
  [ "${stats:-0}" -gt 0 ] && psql_q -c "SELECT pg_stat_statements_reset()" "$db" > /dev/null
  return 0
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

run() { # name, command... ; prints the figure line and records the rate
  local name=$1; shift
  for i in $(seq 1 "$runs"); do
    start
    reset_statements
    out=$(TERN_DATABASE_URL=$url TERN_CARD_PROVIDER_WEBHOOK_SECRET=$secret \
      "$@" --url "http://127.0.0.1:$port" 2>&1) || { echo "$out"; stop; exit 1; }
    grep -q '^ledger check: ok' <<< "$out" || { echo "$out"; stop; exit 1; }
    calls=$(statements)
    stop
    case $name in
      settlements|transfers) line=$(grep '^completed:' <<< "$out") ;;
      authorizations) line=$(grep '^decisions:' <<< "$out") ;;
      paced) line=$(grep '^create latency:' <<< "$out") ;;
    esac
    echo "$name run $i: $line${calls:+ (statements: $calls)}"
    case $name in
      paced) sed -E 's/.*p99 ([0-9.]+) ms.*/\1/' <<< "$line" ;;
      authorizations) sed -E 's/.* = ([0-9]+)\/s overall.*/\1/' <<< "$line" ;;
      *) sed -E 's/.* = ([0-9]+)\/s.*/\1/' <<< "$line" ;;
    esac >> "$work/$name"
  done
  echo "$name median ($backend, $runs runs): $(median < "$work/$name")"
}

big=$([ "$backend" = sqlite ] && echo 1 || echo 0)
for workload in $workloads; do
  case $workload in
    settlements) run settlements "$bin" bench settlements -n 10000 -c 64 ;;
    transfers) run transfers "$bin" bench transfers -n "$([ $big = 1 ] && echo 5000 || echo 3000)" -c 64 ;;
    authorizations)
      run authorizations "$bin" bench authorizations \
        -n "$([ $big = 1 ] && echo 50000 || echo 20000)" -c 64 --cards 16 ;;
    paced) run paced "$bin" bench settlements -n 10000 -c 256 --rate 1000 ;;
    *) echo "unknown workload $workload" >&2; exit 2 ;;
  esac
done
