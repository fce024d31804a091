#!/usr/bin/env bash
# Fills in issue 21's table on one machine and one PostgreSQL: settlements/s
# and transfers/s with one node and with two nodes (the bench spreading its
# requests over both, so about half reach a node that does not own their
# entity and are forwarded), and the failover time after a SIGKILL.
#
#   bench/several-nodes.sh [runs] [workload...]
#
# workloads: settlements transfers latency failover forwarding (default:
# all but forwarding, which times one card's PATCH at its owner and at the
# other node). A standalone
# `tern sandbox` is the provider of every node. Needs a release build, or
# TERN_BENCH_BIN. Loopback only; medians of the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift $(( $# > 1 ? 1 : $# ))
workloads=${*:-settlements transfers latency failover}
bin=${TERN_BENCH_BIN:-target/release/tern}
ports=(18190 18191)
sandbox=18199
secret=bench-secret
cluster_secret=bench-cluster-secret-of-24-chars
work=$(mktemp -d)
pids=()
sandbox_pid=""
db=""
stop() {
  for pid in "${pids[@]}" $sandbox_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=(); sandbox_pid=""
  [ -n "$db" ] && psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" postgres
  db=""
}
trap 'stop; rm -rf "$work"' EXIT
psql_q() { psql -qAt -h 127.0.0.1 -U postgres "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ready() { for _ in $(seq 1 600); do curl -sf "$1" > /dev/null && return; sleep 0.05; done; echo "$1 not ready" >&2; exit 1; }

node() { # index; starts node $1 on the shared database
  local port=${ports[$1]}
  TERN_DATABASE_URL=$url TERN_BIND=127.0.0.1:$port TERN_ADVERTISE_URL=http://127.0.0.1:$port \
    TERN_CLUSTER_SECRET=$cluster_secret TERN_SANDBOX_BIND=off TERN_PROVIDER_URL=http://127.0.0.1:$sandbox \
    TERN_LOG=error TERN_RATE_LIMITS=off TERN_DATA_DIR=$work/data$1 \
    TERN_CARD_PROVIDER_WEBHOOK_SECRET=$secret "$bin" serve >> "$work/log$1" 2>&1 &
  pids[$1]=$!
  ready "http://127.0.0.1:$port/ready"
}

owned() { # index; slots node $1 owns
  curl -sf "http://127.0.0.1:${ports[$1]}/health/actors" | sed -E 's/.*"slots_owned":([0-9]+).*/\1/'
}

start() { # node count; a fresh database, the sandbox, the nodes, every slot owned, each node some
  local i total each
  db="tern_nodes_$$"
  psql_q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" postgres
  url="postgres://postgres@127.0.0.1:5432/$db"
  TERN_SANDBOX_BIND=127.0.0.1:$sandbox TERN_PUBLIC_URL=http://127.0.0.1:${ports[0]} \
    TERN_CARD_PROVIDER_WEBHOOK_SECRET=$secret TERN_LOG=error "$bin" sandbox > "$work/sandbox" 2>&1 &
  sandbox_pid=$!
  ready "http://127.0.0.1:$sandbox/control/executions"
  for i in $(seq 0 $(( $1 - 1 ))); do node "$i"; done
  for _ in $(seq 1 600); do
    total=0; each=1
    for i in $(seq 0 $(( $1 - 1 ))); do
      o=$(owned "$i"); total=$(( total + o )); [ "$o" -gt 0 ] || each=0
    done
    [ "$total" = 64 ] && [ "$each" = 1 ] && { sleep 1; return; }
    sleep 0.1
  done
  echo "the nodes never owned every slot" >&2; exit 1
}

urls() { local list=""; for i in $(seq 0 $(( $1 - 1 ))); do list+="${list:+,}http://127.0.0.1:${ports[$i]}"; done; echo "$list"; }

run() { # name, nodes, command...
  local name=$1 nodes=$2 i; shift 2
  for i in $(seq 1 "$runs"); do
    start "$nodes"
    out=$(TERN_DATABASE_URL=$url TERN_CARD_PROVIDER_WEBHOOK_SECRET=$secret "$@" --url "$(urls "$nodes")" 2>&1) \
      || { echo "$out"; stop; exit 1; }
    grep -q '^ledger check: ok' <<< "$out" || { echo "$out"; stop; exit 1; }
    stop
    line=$(grep '^completed:' <<< "$out"); latency=$(grep 'create latency:' <<< "$out" | head -1)
    echo "$name, $nodes node(s), run $i: $line; $latency"
    case $name in
      latency) sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<< "$latency" ;;
      *) sed -E 's/.* = ([0-9]+)\/s.*/\1/' <<< "$line" ;;
    esac >> "$work/$name-$nodes"
  done
  echo "$name median, $nodes node(s), $runs runs: $(median < "$work/$name-$nodes")$([ "$name" = latency ] && echo ' ms p50' || echo /s)"
}

failover() { # three nodes; SIGKILL one; time until the two others own all 64 slots
  local i
  ports=(18190 18191 18192)
  for i in $(seq 1 "$runs"); do
    start 3
    kill -9 "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
    killed=$(date +%s%N)
    while [ "$(( $(owned 0) + $(owned 2) ))" != 64 ]; do sleep 0.02; done
    ms=$(( ($(date +%s%N) - killed) / 1000000 ))
    echo "failover run $i: every slot owned by the survivors ${ms} ms after SIGKILL (TERN_LEASE_TTL 5s)"
    echo "$ms" >> "$work/failover"
    pids[1]=""; stop
  done
  echo "failover median, $runs runs: $(median < "$work/failover") ms"
}

pct() { # percentile $1 of the numbers on stdin
  sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100); if (i<1) i=1; print a[i]}'
}

forwarding() { # two nodes; one card; 500 PATCHes of its limits to its owner, 500 to the other node
  start 2
  local jar=$work/jar base=http://127.0.0.1:${ports[0]} card slot owner other i
  curl -sf -c "$jar" -H 'content-type: application/json' "$base/v1/auth/register" \
    -d "{\"name\":\"Bench\",\"email\":\"f$$@bench.example\",\"password\":\"correct horse battery\"}" > /dev/null
  card=$(curl -sf -b "$jar" -X POST "$base/v1/cards" | sed -E 's/.*"id":"([^"]+)".*/\1/')
  slot=$(python3 -c "import hashlib,sys; print(int(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16],16) % 64)" "$card")
  owner=0; curl -sf "http://127.0.0.1:${ports[1]}/health/actors" | grep -Eq "\"owned_slots\":\[([0-9]+,)*$slot[],]" && owner=1
  other=$(( 1 - owner ))
  for target in "$owner" "$other"; do
    for i in $(seq 1 500); do
      curl -s -o /dev/null -w '%{time_total}\n' -b "$jar" -X PATCH -H 'content-type: application/json' \
        "http://127.0.0.1:${ports[$target]}/v1/cards/$card/limits" -d '{"daily_spend_minor": 100000}'
    done > "$work/forwarding-$target"
    echo "PATCH card limits at node $target ($([ "$target" = "$owner" ] && echo owner || echo forwarded)): p50 $(pct 50 < "$work/forwarding-$target") s, p95 $(pct 95 < "$work/forwarding-$target") s, 500 requests one at a time"
  done
  stop
}

for workload in $workloads; do
  case $workload in
    settlements) for n in 1 2; do run settlements "$n" "$bin" bench settlements -n 6000 -c 64; done ;;
    transfers) for n in 1 2; do run transfers "$n" "$bin" bench transfers -n 2000 -c 64; done ;;
    # One request at a time: the create latency with one node, and with two
    # where about half the requests are forwarded; the p50 difference,
    # doubled, is the cost of one forward.
    latency) for n in 1 2; do run latency "$n" "$bin" bench settlements -n 2000 -c 1; done ;;
    failover) failover ;;
    forwarding) forwarding ;;
    *) echo "unknown workload $workload" >&2; exit 2 ;;
  esac
done
