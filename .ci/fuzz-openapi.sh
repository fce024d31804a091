#!/usr/bin/env bash
# Fuzzes the running service against its own served /openapi.json with an
# independent tool (schemathesis, pinned, installed into a venv under
# target/). Any finding of the checks below fails the run: a status the
# operation does not document, a 5xx, a Content-Type or a body that does not
# match the document.
#
#   .ci/fuzz-openapi.sh [BINARY]        (default: target/debug/tern)
#
# .ci/fuzz-setup.py registers a person and their merchant through the API
# and makes one resource of each kind for the operations on `{id}`.
# FUZZ_MAX_EXAMPLES (default 10) bounds the cases per operation and phase;
# FUZZ_SEED replays the seed a failed run printed. The run takes about a
# minute on 2 cores with the defaults; FUZZ_TIMEOUT_S (default 600) stops a
# run that hangs and fails it.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
BINARY=${1:-target/debug/tern}
MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-10}
TIMEOUT_S=${FUZZ_TIMEOUT_S:-600}
VENV="$PWD/target/fuzz-venv"

if ! "$VENV/bin/st" --version 2>/dev/null | grep -qxF "st, version $SCHEMATHESIS_VERSION"; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tern-fuzz.XXXXXX")
server_pid=
stop() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid"
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
sandbox_port=$(free_port)
base="http://127.0.0.1:$port"

# A fresh data dir and database. A dispatch secret, so that push dispatch
# is exercised (without one it is a deliberate 503 that not_a_server_error
# counts). Rate limits stay on, so their 429s are checked against the
# document, except that login and the two registrations (per IP, a few a
# minute) are raised far enough for the fuzzer to reach their handlers.
TERN_DATA_DIR="$work/data" \
TERN_DISPATCH_SECRET="fuzz-dispatch-secret-$RANDOM$RANDOM$RANDOM" \
TERN_RATE_LIMITS="login=1000/1m,register=1000/1m,m2m_register=1000/1h" \
TERN_DATABASE_URL="sqlite://$work/data/tern.db" \
TERN_BIND="127.0.0.1:$port" \
TERN_PUBLIC_URL="$base" \
TERN_SANDBOX_BIND="127.0.0.1:$sandbox_port" \
TERN_COOKIE_SECURE=false \
TERN_LOG=warn \
    "$BINARY" >"$work/server.log" 2>&1 &
server_pid=$!

# Ready only when our own process answers: a port taken meanwhile by another
# process would make it exit, and the fuzzer must never talk to a stranger.
for _ in $(seq 1 60); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        cat "$work/server.log" >&2
        echo "fuzz: the service exited before it was ready" >&2
        exit 1
    fi
    curl -fsS "$base/live" >/dev/null 2>&1 && break
    sleep 1
done
curl -fsS "$base/live" >/dev/null
kill -0 "$server_pid"

python3 .ci/fuzz-setup.py "$base" "$work"
key=$(cat "$work/api_key")
session=$(cat "$work/session")

seed_args=()
if [ -n "${FUZZ_SEED:-}" ]; then
    seed_args=(--seed "$FUZZ_SEED")
fi

# The key wins over the cookie wherever both are accepted, so the session
# serves only the session operations (/v1/auth/me, /v1/profile, ...).
# Two operations are left out because they end the fuzzer's own credential
# and every later call would only test the 401 path: DELETE
# /v1/api-keys/{id} (fed an id from GET /v1/api-keys it revokes the key in
# use) and POST /v1/auth/logout (it revokes the session).
status=0
# Run from the scratch dir: schemathesis keeps a .schemathesis/ cache in its
# working directory.
(cd "$work" && timeout "$TIMEOUT_S" "$VENV/bin/st" --config-file "$work/schemathesis.toml" run "$base/openapi.json" \
    --header "Authorization: Bearer $key" \
    --header "Cookie: svc_session=$session" \
    --checks "$CHECKS" \
    --exclude-operation-id revoke_api_key \
    --exclude-operation-id logout \
    --max-examples "$MAX_EXAMPLES" \
    --workers 2 \
    --generation-database none \
    --no-color \
    "${seed_args[@]}") || status=$?

if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "fuzz: the service died during the run" >&2
    tail -50 "$work/server.log" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    cp "$work/server.log" target/fuzz-server.log
    echo "fuzz: schemathesis exited $status (findings above; 124 means it timed out)" >&2
    echo "fuzz: the service's errors and panics (whole log: target/fuzz-server.log):" >&2
    grep -E '"level":"ERROR"|panicked' "$work/server.log" | tail -20 >&2 || true
fi
exit "$status"
