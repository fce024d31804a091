//! Transfer setup: quotes, transfer bodies and creation under a key, the
//! saga waited on to a state, its legs, and the 3-D Secure challenge.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern::config::Config;
use uuid::Uuid;

use super::settlements::{executions, sandbox};
use super::{Merchant, TestApp};

/// Longest a test waits for the saga to reach a state.
const WAIT_MAX: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// An EIP-55 test vector: valid on every EVM network.
pub(crate) const EVM_WALLET: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
/// The USDT TRC-20 contract: a valid base58check tron address.
pub(crate) const TRON_WALLET: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

/// Short provider retries, so refunds and payouts give up within a test.
pub(crate) fn fast_retries(config: &mut Config) {
    config.settlement_retry_schedule = vec![Duration::from_millis(100); 3];
    config.provider_timeout = Duration::from_millis(700);
}

pub(crate) async fn app() -> TestApp {
    TestApp::spawn_with(fast_retries).await
}

/// A quote of `merchant`; answers its body.
pub(crate) async fn quote(
    app: &TestApp,
    merchant: &Merchant,
    (currency, amount, asset, network): (&str, &str, &str, &str),
) -> Value {
    let response = app
        .post("/v1/quotes")
        .bearer_auth(&merchant.api_key)
        .json(&json!({"send_currency": currency, "send_amount": amount,
            "receive_asset": asset, "receive_network": network}))
        .send()
        .await
        .expect("request");
    super::json_of(response, 201).await
}

/// 100.00 EUR paid out as USDC on polygon: fiat and asset differ, so the
/// conversion's entries show in the ledger check.
pub(crate) async fn eur_quote(app: &TestApp, merchant: &Merchant) -> Value {
    quote(app, merchant, ("EUR", "100.00", "USDC", "polygon")).await
}

/// A request body that agrees with the quote.
pub(crate) fn body(quote: &Value, card_pm: &str, wallet: &str) -> Value {
    json!({
        "flow": "tern",
        "quote_id": quote["quote_id"],
        "card_pm": card_pm,
        "wallet": wallet,
        "network": quote["receive_network"],
        "asset": quote["receive_asset"],
    })
}

/// Creates a transfer under a fresh key; answers its 201 body.
pub(crate) async fn create_with(app: &TestApp, merchant: &Merchant, body: &Value) -> Value {
    let key = Uuid::new_v4().to_string();
    let response = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, body)
        .await;
    super::json_of(response, 201).await
}

/// A fresh EUR -> USDC polygon quote and a transfer on it paid by `card_pm`.
pub(crate) async fn create(app: &TestApp, merchant: &Merchant, card_pm: &str) -> Value {
    let quote = eur_quote(app, merchant).await;
    create_with(app, merchant, &body(&quote, card_pm, EVM_WALLET)).await
}

pub(crate) fn id(transfer: &Value) -> String {
    transfer["id"].as_str().expect("id").to_owned()
}

/// The settlement key of leg `index` (1 or 2).
pub(crate) fn leg_key(transfer: &Value, index: usize) -> String {
    transfer["legs"][index - 1]["settlement_key"]
        .as_str()
        .expect("settlement_key")
        .to_owned()
}

pub(crate) fn leg(transfer: &Value, index: usize) -> &Value {
    &transfer["legs"][index - 1]
}

pub(crate) async fn get(app: &TestApp, merchant: &Merchant, id: &str) -> Value {
    json_of(app, merchant, &format!("/v1/transfers/{id}")).await
}

/// Polls GET /v1/transfers/{id} until `done` holds.
pub(crate) async fn until(
    app: &TestApp,
    merchant: &Merchant,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let transfer = get(app, merchant, id).await;
        if done(&transfer) {
            return transfer;
        }
        assert!(started.elapsed() < WAIT_MAX, "still waiting: {transfer}");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Polls until the transfer is succeeded or failed.
pub(crate) async fn finished(app: &TestApp, merchant: &Merchant, id: &str) -> Value {
    until(app, merchant, id, |t| {
        t["status"] == "succeeded" || t["status"] == "failed"
    })
    .await
}

pub(crate) async fn list(app: &TestApp, merchant: &Merchant, query: &str) -> Value {
    json_of(app, merchant, &format!("/v1/transfers{query}")).await
}

/// How many transfers the merchant has.
pub(crate) async fn total(app: &TestApp, merchant: &Merchant) -> i64 {
    list(app, merchant, "").await["total"]
        .as_i64()
        .expect("total")
}

/// Asserts the simulator executed exactly these (target, operation) pairs
/// for the settlement, in this order: none twice, none missing.
pub(crate) async fn assert_executions(
    app: &TestApp,
    settlement_key: &str,
    expected: &[(&str, &str)],
) {
    let executions = executions(app, settlement_key).await;
    let seen: Vec<(&str, &str)> = executions
        .iter()
        .map(|e| {
            (
                e["target"].as_str().unwrap_or_default(),
                e["operation"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen, expected,
        "executions of {settlement_key}: {executions:?}"
    );
}

/// The `to` of each audited status change of the transfer, oldest first.
pub(crate) async fn audited_statuses(
    app: &TestApp,
    merchant: &Merchant,
    transfer_id: &str,
) -> Vec<String> {
    let events = json_of(app, merchant, "/v1/audit/events?limit=200").await;
    let mut statuses: Vec<String> = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["resource_id"] == transfer_id && e["action"] == "transfer.status_changed")
        .filter_map(|e| e["data"]["to"].as_str().map(str::to_owned))
        .collect();
    statuses.reverse();
    statuses
}

/// Waits for leg 1's open challenge; answers the transfer then.
pub(crate) async fn challenged(app: &TestApp, merchant: &Merchant, transfer_id: &str) -> Value {
    let open = until(app, merchant, transfer_id, |t| {
        leg(t, 1)["next_action_type"].is_string() || t["status"] == "failed"
    })
    .await;
    assert_eq!(open["status"], "leg1_in_flight", "{open}");
    assert_eq!(leg(&open, 1)["status"], "in_flight", "{open}");
    assert_eq!(leg(&open, 1)["next_action_type"], "redirect_to_url");
    assert!(leg(&open, 1)["client_secret"].is_string(), "{open}");
    assert_eq!(leg(&open, 2)["status"], "not_started", "{open}");
    assert_eq!(leg(&open, 2)["client_secret"], Value::Null);
    open
}

pub(crate) fn client_secret(transfer: &Value) -> String {
    leg(transfer, 1)["client_secret"]
        .as_str()
        .expect("client_secret")
        .to_owned()
}

pub(crate) async fn answer_challenge(app: &TestApp, secret: &str, decision: &str) {
    let response = app
        .client
        .post(sandbox(app, &format!("/3ds/{secret}/{decision}")))
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success(), "{}", response.status());
}

/// GET `path` as `merchant`: its 200 body.
pub(crate) async fn json_of(app: &TestApp, merchant: &Merchant, path: &str) -> Value {
    super::json_of(app.get_as(merchant, path).await, 200).await
}
