"""Prepares a fresh Tern for the fuzzer (.ci/fuzz-openapi.sh), through the API only.

Registers a person (which registers their merchant and opens a session),
mints an API key of that merchant, and makes one of each resource the
fuzzer cannot make with a valid id by itself (a funded settlement, a card,
a transfer, a device), so that operations on `{id}` reach their handlers
instead of answering 404 to random ids.

    python3 .ci/fuzz-setup.py BASE_URL OUT_DIR

Writes OUT_DIR/api_key, OUT_DIR/session and OUT_DIR/schemathesis.toml.
"""

import http.cookies
import json
import sys
import urllib.error
import urllib.request
import uuid

BASE, OUT = sys.argv[1], sys.argv[2]


def call(method, path, body=None, key=None, session=None, headers=None):
    request = urllib.request.Request(BASE + path, method=method)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if session:
        request.add_header("Cookie", f"svc_session={session}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, data, timeout=30) as response:
            text = response.read().decode()
            return response, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        sys.exit(f"fuzz setup: {method} {path} answered {error.code}: {error.read().decode()}")


response, person = call(
    "POST",
    "/v1/auth/register",
    {"name": "Fuzz Person", "email": "fuzz-person@example.com", "password": "fuzz password 1234"},
)
cookies = http.cookies.SimpleCookie()
for header in response.headers.get_all("Set-Cookie") or []:
    cookies.load(header)
session = cookies["svc_session"].value
user_id = person["user_id"]

_, minted = call("POST", "/v1/api-keys", {"name": "fuzzer"}, session=session)
key = minted["api_key"]

_, accounts = call("GET", "/v1/ledger/accounts", key=key)
usd = next(a["id"] for a in accounts["data"] if a["kind"] == "funding" and a["currency"] == "USD")

settlement_id = str(uuid.uuid4())
call(
    "POST",
    "/v1/settlements",
    {
        "method": "card_charge",
        "amount": {"amount": "50.00", "currency": "USD"},
        "source": usd,
        "destination": "pm_card_visa",
        "recipient_name": "Fuzz Person",
    },
    key=key,
    headers={"Idempotency-Key": settlement_id},
)

_, card = call("POST", "/v1/cards", {"user_id": user_id}, key=key)

_, quote = call(
    "POST",
    "/v1/quotes",
    {"send_currency": "EUR", "send_amount": "100.00", "receive_asset": "USDC", "receive_network": "polygon"},
    key=key,
)
_, transfer = call(
    "POST",
    "/v1/transfers",
    {
        "flow": "tern",
        "quote_id": quote["quote_id"],
        "card_pm": "pm_card_visa",
        "wallet": "0x52908400098527886E0F7030069857D2E4169EE7",
        "network": "polygon",
        "asset": "USDC",
    },
    key=key,
    headers={"Idempotency-Key": str(uuid.uuid4())},
)

_, device = call("POST", "/v1/devices", {"platform": "ios", "token": "fuzz-device-token", "user_id": user_id}, key=key)

# Each {id} template gets the id of its own resource; the fuzzer still
# varies every other parameter, query and body. The built-in simulator is
# the configured card provider.
fixed = [
    (r"^/v1/cards/\{id\}", "id", card["id"]),
    (r"^/v1/settlements/\{id\}", "id", settlement_id),
    (r"^/v1/transfers/\{id\}", "id", transfer["id"]),
    (r"^/v1/devices/\{id\}$", "id", device["id"]),
    (r"^/v1/ledger/accounts/\{id\}/entries$", "id", usd),
    (r"^/v1/webhooks/\{provider\}$", "provider", "sandbox"),
]
with open(f"{OUT}/schemathesis.toml", "w", encoding="utf-8") as config:
    for pattern, name, value in fixed:
        config.write("[[operations]]\n")
        config.write(f"include-path-regex = {json.dumps(pattern)}\n")
        config.write(f"parameters = {{ {json.dumps('path.' + name)} = {json.dumps(value)} }}\n\n")
with open(f"{OUT}/api_key", "w", encoding="utf-8") as handle:
    handle.write(key)
with open(f"{OUT}/session", "w", encoding="utf-8") as handle:
    handle.write(session)
print(f"fuzz setup: merchant {person['merchant_id']}, card {card['id']}, transfer {transfer['id']}")
