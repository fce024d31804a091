//! Several Tern processes on one PostgreSQL (three nodes, real binaries):
//! an entity's actor is live on the one node owning its slot, a request
//! reaching another node is forwarded there and answered as if served
//! locally, and a node paused past its lease writes nothing once it
//! resumes. Skipped without PostgreSQL.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_actors::adapters::sign_payload;
use tern_actors::runtime::cluster::slot_of;
use uuid::Uuid;

use crate::helpers::humans::sign_up_at;
use crate::nodes::{Nodes, LEASE_TTL};
use crate::processes::SECRET;

const WAIT_MAX: Duration = Duration::from_secs(60);

enum Auth<'a> {
    Cookie(&'a str),
    Key(&'a str),
}

async fn send(
    nodes: &Nodes,
    node: usize,
    auth: &Auth<'_>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = nodes
        .client
        .request(method, format!("{}{path}", nodes.bases[node]));
    request = match auth {
        Auth::Cookie(cookie) => request.header("cookie", *cookie),
        Auth::Key(key) => request.bearer_auth(key),
    };
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("request")
}

async fn get(nodes: &Nodes, node: usize, auth: &Auth<'_>, path: &str) -> Value {
    send(nodes, node, auth, reqwest::Method::GET, path, None)
        .await
        .json()
        .await
        .expect("json")
}

async fn usd_account(nodes: &Nodes, auth: &Auth<'_>) -> String {
    let accounts = get(nodes, 1, auth, "/v1/ledger/accounts").await;
    accounts["data"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["currency"] == "USD"))
        .and_then(|a| a["id"].as_str())
        .expect("USD account")
        .to_owned()
}

/// Creates a settlement through `node` under `key`; answers the status.
async fn settle(nodes: &Nodes, node: usize, auth: &Auth<'_>, key: &str, body: &Value) -> u16 {
    let mut request = nodes
        .client
        .post(format!("{}/v1/settlements", nodes.bases[node]))
        .header("Idempotency-Key", key)
        .json(body);
    request = match auth {
        Auth::Cookie(cookie) => request.header("cookie", *cookie),
        Auth::Key(api_key) => request.bearer_auth(api_key),
    };
    request.send().await.expect("settle").status().as_u16()
}

async fn wait_for_status(nodes: &Nodes, auth: &Auth<'_>, key: &str, wanted: &str) -> Value {
    let started = Instant::now();
    loop {
        let settlement = get(nodes, 0, auth, &format!("/v1/settlements/{key}")).await;
        if settlement["status"] == wanted {
            return settlement;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "{key} never {wanted}: {settlement}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
}

fn charge(source: &str, amount: &str) -> Value {
    json!({"method": "card_charge", "amount": {"amount": amount, "currency": "USD"},
        "source": source, "destination": "pm_card_visa", "recipient_name": "Ada Lovelace"})
}

/// Posts a signed `authorization.request` for `amount_minor` to `node`.
async fn authorize(nodes: &Nodes, node: usize, card: &str, amount_minor: i64) -> Value {
    let id = Uuid::new_v4().simple();
    let body = json!({"id": format!("evt_{id}"), "type": "authorization.request", "data": {
        "authorization_id": format!("auth_{id}"), "card_id": card, "amount_minor": amount_minor,
        "currency": "USD", "merchant": "Blue Bottle Coffee", "mcc": "5814",
        "channel": "pos", "country": "US"}})
    .to_string();
    let signature = sign_payload(
        SECRET.as_bytes(),
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    let answered = nodes
        .client
        .post(format!("{}/v1/webhooks/sandbox", nodes.bases[node]))
        .header("content-type", "application/json")
        .header("X-Sandbox-Signature", signature)
        .body(body)
        .send()
        .await
        .expect("authorization");
    assert_eq!(answered.status(), 200);
    answered.json().await.expect("json")
}

/// The node owning `route_key`'s slot.
async fn owner_of(nodes: &Nodes, route_key: &str) -> usize {
    let slot = slot_of(route_key);
    for node in 0..nodes.bases.len() {
        if nodes.owned(node).await.contains(&slot) {
            return node;
        }
    }
    panic!("no node owns slot {slot}");
}

#[actix_web::test]
async fn authorizations_sent_round_robin_to_three_nodes_never_pass_the_daily_limit() {
    let Some(nodes) = Nodes::start(3, &[]).await else {
        eprintln!("skipped: several nodes need PostgreSQL (TERN_TEST_DATABASE_URL)");
        return;
    };
    let cookie = sign_up_at(&nodes.client, &nodes.bases[0]).await.0;
    let auth = Auth::Cookie(&cookie);
    let usd = usd_account(&nodes, &auth).await;
    // Funded through node 2: the settlement may live on any node.
    let funding = Uuid::new_v4().to_string();
    assert_eq!(
        settle(&nodes, 2, &auth, &funding, &charge(&usd, "150.00")).await,
        201
    );
    wait_for_status(&nodes, &auth, &funding, "succeeded").await;
    let issued = send(&nodes, 0, &auth, reqwest::Method::POST, "/v1/cards", None).await;
    let status = issued.status();
    let card: Value = issued.json().await.expect("json");
    assert_eq!(status, 201, "{card}");
    let card_id = card["id"].as_str().expect("id").to_owned();

    // A change through a node that does not own the card is forwarded,
    // and answered as the owner answers, under the caller's request id.
    let owner = owner_of(&nodes, &card_id).await;
    let stranger = (owner + 1) % 3;
    let limits = nodes
        .client
        .patch(format!(
            "{}/v1/cards/{card_id}/limits",
            nodes.bases[stranger]
        ))
        .header("cookie", &cookie)
        .header("X-Request-ID", "forwarded-limits-1")
        .json(&json!({"daily_spend_minor": 10_000}))
        .send()
        .await
        .expect("limits");
    assert_eq!(limits.status(), 200);
    assert_eq!(
        limits.headers().get("x-request-id").map(|v| v.as_bytes()),
        Some(&b"forwarded-limits-1"[..])
    );
    let limited: Value = limits.json().await.expect("json");
    assert_eq!(limited["daily_spend_minor"], 10_000, "{limited}");
    // A refusal is forwarded as the owner renders it.
    let refused = nodes
        .client
        .patch(format!(
            "{}/v1/cards/{card_id}/limits",
            nodes.bases[stranger]
        ))
        .header("cookie", &cookie)
        .json(&json!({"daily_spend_minor": "lots"}))
        .send()
        .await
        .expect("limits");
    assert_eq!(refused.status(), 422);
    assert_eq!(
        refused.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/problem+json"[..])
    );

    // 40 swipes of 10.00 against a 100.00 day, spread over every node at
    // once: each node forwards to the card's owner, whose actor counts the
    // day's spend alone.
    let swipes = (0..40).map(|i| authorize(&nodes, i % 3, &card_id, 1_000));
    let decisions = futures_util::future::join_all(swipes).await;
    let approved = decisions.iter().filter(|d| d["approved"] == true).count();
    assert_eq!(approved, 10, "{decisions:?}");
    for declined in decisions.iter().filter(|d| d["approved"] != true) {
        assert_ne!(declined["reason"], Value::Null, "{declined}");
    }
}

#[actix_web::test]
async fn a_node_paused_past_its_lease_writes_nothing_for_what_it_lost() {
    let Some(nodes) = Nodes::start(3, &[]).await else {
        eprintln!("skipped: several nodes need PostgreSQL (TERN_TEST_DATABASE_URL)");
        return;
    };
    let (key, merchant_id) = nodes.register("Paused Node").await;
    let auth = Auth::Key(&key);
    let usd = usd_account(&nodes, &auth).await;
    let funding = Uuid::new_v4().to_string();
    assert_eq!(
        settle(&nodes, 0, &auth, &funding, &charge(&usd, "100.00")).await,
        201
    );
    wait_for_status(&nodes, &auth, &funding, "succeeded").await;

    // A push whose settlement lives on node 1; the provider executes it and
    // answers 3 s later, while node 1 is frozen.
    let paused = 1;
    let owned = nodes.owned(paused).await;
    let push_key = (0..)
        .map(|_| Uuid::new_v4().to_string())
        .find(|key| owned.contains(&slot_of(&format!("{merchant_id}/{key}"))))
        .expect("a key in node 1's slots");
    nodes
        .arm(json!({"target": "card_push", "match": {"destination": "tok_paused"}, "mode": "slow", "count": 1}))
        .await;
    let push = json!({"method": "card_push", "amount": {"amount": "1.00", "currency": "USD"},
        "source": usd, "destination": "tok_paused", "recipient_name": "Ada"});
    assert_eq!(settle(&nodes, paused, &auth, &push_key, &push).await, 201);
    let started = Instant::now();
    while nodes.operations(&push_key).await.is_empty() {
        assert!(started.elapsed() < WAIT_MAX, "the push never executed");
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    nodes.pause(paused);

    // The others take node 1's slots after its lease, and finish the push
    // by asking the provider: no second execution.
    let failover = nodes.settled(&[0, 2]).await;
    let done = wait_for_status(&nodes, &auth, &push_key, "succeeded").await;
    eprintln!("slots moved {failover:?} after the pause (lease {LEASE_TTL:?})");
    let account_before = get(&nodes, 0, &auth, "/v1/ledger/accounts").await;
    let audit_before = get(&nodes, 0, &auth, "/v1/audit/events?limit=100").await;

    // Resumed, node 1 hears the provider's answer and its heartbeat: it
    // finds its slots gone, and nothing it had in flight is written.
    nodes.resume(paused);
    actix_web::rt::time::sleep(LEASE_TTL * 2).await;
    let after = get(&nodes, 0, &auth, &format!("/v1/settlements/{push_key}")).await;
    assert_eq!(after, done, "the paused node wrote the settlement");
    assert_eq!(
        get(&nodes, 0, &auth, "/v1/ledger/accounts").await,
        account_before
    );
    assert_eq!(
        get(&nodes, 0, &auth, "/v1/audit/events?limit=100").await,
        audit_before
    );
    assert_eq!(nodes.operations(&push_key).await, ["push"]);
    // It rejoins: the slots spread over all three again.
    nodes.settled(&[0, 1, 2]).await;
    let listed = nodes.tern_nodes();
    assert!(
        listed.contains("3 node(s), 3 live; 64 of 64 slots owned"),
        "{listed}"
    );
}

/// A forwarded request copied off the node network is taken once, and
/// only by the node it was signed for.
#[actix_web::test]
async fn a_forwarded_request_is_taken_once_and_only_by_its_node() {
    let Some(nodes) = Nodes::start(2, &[]).await else {
        return; // several nodes need PostgreSQL
    };
    let link = tern::cluster::Link::new(crate::nodes::CLUSTER_SECRET).expect("link");
    let body = serde_json::to_vec(
        &json!({"organization_name": "Replay Ltd", "email": "ops@replay.example"}),
    )
    .expect("json");
    let request_id = format!("replay-{}", Uuid::new_v4().simple());
    let path = "/v1/auth/m2m/register";
    let signature = link.sign_forwarded(&tern::cluster::Forwarded {
        to: &nodes.bases[1],
        method: "POST",
        path_and_query: path,
        request_id: &request_id,
        client: None,
        headers: vec![
            String::new(),
            String::new(),
            String::new(),
            "application/json".into(),
        ],
        body: &body,
    });
    let send = |base: &str| {
        nodes
            .client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("x-request-id", &request_id)
            .header(tern::cluster::FORWARDED_HEADER, &signature)
            .body(body.clone())
            .send()
    };
    let refused = |response: reqwest::Response| async move {
        assert_eq!(response.status(), 401);
        let problem: Value = response.json().await.expect("problem");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("forwarding signature")),
            "{problem}"
        );
    };
    refused(send(&nodes.bases[0]).await.expect("request")).await;
    let taken = send(&nodes.bases[1]).await.expect("request");
    assert_eq!(taken.status(), 201, "the node it was signed for takes it");
    refused(send(&nodes.bases[1]).await.expect("request")).await;
}
