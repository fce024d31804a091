//! Three Tern processes on one PostgreSQL, one of them killed with SIGKILL
//! while transfers run and their webhooks are delivered: the others take
//! its slots within the lease TTL and a margin, every acknowledged transfer
//! ends, every provider operation ran once, and each transfer's events
//! reach the merchant in order. Skipped without PostgreSQL.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::transfers::{body, EVM_WALLET};
use crate::helpers::webhooks::{SUCCEEDED_TYPES, WHSEC_SECRET};
use crate::helpers::RequestExt;
use crate::nodes::{Nodes, LEASE_TTL};
use crate::webhook_receiver::{verify, Receiver};

const TRANSFERS: usize = 30;
const WAIT_MAX: Duration = Duration::from_secs(90);

async fn post(
    nodes: &Nodes,
    node: usize,
    key: &str,
    path: &str,
    body: &Value,
    idem: Option<&str>,
) -> Value {
    let mut request = nodes
        .client
        .post(format!("{}{path}", nodes.bases[node]))
        .bearer_auth(key)
        .json(body);
    if let Some(idem) = idem {
        request = request.header("Idempotency-Key", idem);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let body: Value = response.json().await.expect("json");
    assert_eq!(status, 201, "POST {path} on node {node}: {body}");
    body
}

/// A transfer of 100.00 EUR into USDC on polygon, made through `node`;
/// answers its id and leg keys.
async fn transfer(nodes: &Nodes, node: usize, key: &str) -> (String, String, String) {
    let quote = json!({"send_currency": "EUR", "send_amount": "100.00",
        "receive_asset": "USDC", "receive_network": "polygon"});
    let quote = post(nodes, node, key, "/v1/quotes", &quote, None).await;
    let idem = Uuid::new_v4().to_string();
    let created = post(
        nodes,
        node,
        key,
        "/v1/transfers",
        &body(&quote, "pm_card_visa", EVM_WALLET),
        Some(&idem),
    )
    .await;
    let leg = |index: usize| {
        created["legs"][index]["settlement_key"]
            .as_str()
            .expect("leg key")
            .to_owned()
    };
    (
        created["id"].as_str().expect("id").to_owned(),
        leg(0),
        leg(1),
    )
}

async fn wait_succeeded(nodes: &Nodes, key: &str, id: &str) {
    let started = Instant::now();
    loop {
        let body: Value = nodes
            .client
            .get(format!("{}/v1/transfers/{id}", nodes.bases[0]))
            .bearer_auth(key)
            .read_json()
            .await;
        match body["status"].as_str() {
            Some("succeeded") => return,
            Some("failed") => panic!("{id} failed: {body}"),
            _ => {}
        }
        assert!(started.elapsed() < WAIT_MAX, "{id} never ended: {body}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn a_node_killed_under_load_hands_its_transfers_and_deliveries_to_the_others() {
    let receiver = Receiver::start().await;
    let ca = receiver.ca_file().display().to_string();
    let env = [
        ("TERN_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TERN_WEBHOOK_CA_FILE", ca.as_str()),
        (
            "TERN_WEBHOOK_RETRY_SCHEDULE",
            "200ms,200ms,200ms,200ms,200ms",
        ),
        ("TERN_SETTLEMENT_RETRY_SCHEDULE", "200ms,200ms,200ms,200ms"),
    ];
    let Some(mut nodes) = Nodes::start(3, &env).await else {
        eprintln!("skipped: several nodes need PostgreSQL (TERN_TEST_DATABASE_URL)");
        return;
    };
    let (key, _) = nodes.register("Failover").await;
    let put = nodes
        .client
        .put(format!("{}/v1/webhooks/endpoint", nodes.bases[2]))
        .bearer_auth(&key)
        .json(&json!({"url": receiver.url("/failover"), "secret": WHSEC_SECRET}))
        .send()
        .await
        .expect("endpoint");
    assert_eq!(put.status(), 204);

    // Transfers made through every node at once; node 1 dies as soon as
    // the last is acknowledged, with legs and deliveries in flight.
    let made = (0..TRANSFERS).map(|i| transfer(&nodes, i % 3, &key));
    let transfers = futures_util::future::join_all(made).await;
    nodes.kill(1);
    let failover = nodes.settled(&[0, 2]).await;
    eprintln!(
        "after SIGKILL, nodes 0 and 2 owned every slot in {failover:?} (lease {LEASE_TTL:?})"
    );
    assert!(
        failover < LEASE_TTL * 5,
        "slots moved in {failover:?}, lease {LEASE_TTL:?}"
    );

    for (id, leg1, leg2) in &transfers {
        wait_succeeded(&nodes, &key, id).await;
        assert_eq!(nodes.operations(leg1).await, ["charge"], "leg 1 of {id}");
        assert_eq!(nodes.operations(leg2).await, ["payout"], "leg 2 of {id}");
    }

    // Every event of every transfer, in order; a repeat only of a delivery
    // the kill cut short, under the same webhook id.
    let expected = TRANSFERS * SUCCEEDED_TYPES.len();
    let received = receiver.wait_for(expected, WAIT_MAX).await;
    actix_web::rt::time::sleep(Duration::from_secs(1)).await;
    let received = receiver.wait_for(received.len(), WAIT_MAX).await;
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut repeated: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_transfer: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for request in &received {
        let body = verify(WHSEC_SECRET, request).expect("signed");
        let webhook_id = request.header("webhook-id").unwrap_or_default().to_owned();
        let transfer = body["data"]["id"].as_str().unwrap_or_default().to_owned();
        let kind = body["type"].as_str().unwrap_or_default().to_owned();
        let rank = SUCCEEDED_TYPES.iter().position(|t| *t == kind);
        let order = by_transfer.entry(transfer.clone()).or_default();
        if let Some(last) = order.last() {
            let last_rank = SUCCEEDED_TYPES.iter().position(|t| t == last);
            assert!(rank >= last_rank, "{transfer}: {kind} arrived after {last}");
        }
        if seen.insert(webhook_id) {
            order.push(kind);
        } else {
            duplicates += 1;
            *repeated.entry(transfer).or_default() += 1;
        }
    }
    for (id, _, _) in &transfers {
        assert_eq!(
            by_transfer.get(id).map(Vec::as_slice),
            Some(&SUCCEEDED_TYPES.map(str::to_owned)[..]),
            "{id}"
        );
    }
    eprintln!(
        "{} events delivered as {} requests ({duplicates} repeated after the kill)",
        seen.len(),
        received.len()
    );
    // A transfer's events go out one at a time, in order: the kill cut at
    // most one delivery of each transfer, which is then made again.
    assert!(
        repeated.values().all(|count| *count <= 1),
        "deliveries repeated: {repeated:?}"
    );

    nodes.restart(1).await;
    nodes.settled(&[0, 1, 2]).await;
}
