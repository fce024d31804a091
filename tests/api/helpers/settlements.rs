//! Settlement setup: funded merchants, settlements created under a key and
//! waited on, the simulator's faults and execution log, and ledger reads.

use std::time::Duration;

use serde_json::{json, Value};
use tern::config::Config;
use tern_schema::ledger;
use uuid::Uuid;

use super::{Merchant, RequestExt, TestApp};

pub(crate) const WAIT_MAX: Duration = Duration::from_secs(20);

pub(crate) fn fast_retries(config: &mut Config) {
    config.settlement_retry_schedule = vec![Duration::from_millis(100); 3];
    config.provider_timeout = Duration::from_millis(700);
}

pub(crate) async fn app() -> TestApp {
    TestApp::spawn_with(fast_retries).await
}

/// The merchant's ledger accounts, as GET /v1/ledger/accounts lists them.
pub(crate) async fn accounts(app: &TestApp, merchant: &Merchant) -> Vec<Value> {
    let body: Value = app
        .get("/v1/ledger/accounts")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    body["data"].as_array().expect("accounts").clone()
}

pub(crate) async fn funding_account(app: &TestApp, merchant: &Merchant, currency: &str) -> String {
    accounts(app, merchant)
        .await
        .iter()
        .find(|a| a["currency"] == currency)
        .and_then(|a| a["id"].as_str())
        .expect("a funding account per currency")
        .to_owned()
}

pub(crate) async fn account(app: &TestApp, merchant: &Merchant, id: &str) -> Value {
    accounts(app, merchant)
        .await
        .into_iter()
        .find(|a| a["id"] == id)
        .expect("the account")
}

/// Creates a settlement; answers its key.
pub(crate) async fn create(app: &TestApp, merchant: &Merchant, body: Value) -> String {
    let key = Uuid::new_v4().to_string();
    let response = app
        .post_with_key("/v1/settlements", &merchant.api_key, &key, &body)
        .await;
    let status = response.status();
    let text = response.text().await.expect("body");
    assert_eq!(status, 201, "{text}");
    key
}

pub(crate) fn charge(source: &str, amount: &str, payment_method: &str) -> Value {
    json!({"method": "card_charge", "amount": {"amount": amount, "currency": "USD"},
        "source": source, "destination": payment_method, "recipient_name": "Ada Lovelace"})
}

pub(crate) fn push(source: &str, amount: &str, card: &str) -> Value {
    json!({"method": "card_push", "amount": {"amount": amount, "currency": "USD"},
        "source": source, "destination": card, "recipient_name": "Ada Lovelace"})
}

/// Polls until the settlement is succeeded, failed or reversed.
pub(crate) async fn settled(app: &TestApp, merchant: &Merchant, key: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let body = settlement(app, merchant, key).await;
        if ["succeeded", "failed", "reversed"].contains(&body["status"].as_str().unwrap_or("")) {
            return body;
        }
        assert!(started.elapsed() < WAIT_MAX, "never settled: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A funded merchant: `amount` USD collected with a card charge.
pub(crate) async fn funded(app: &TestApp, amount: &str) -> (Merchant, String) {
    let merchant = app.merchant().await;
    let usd = funding_account(app, &merchant, "USD").await;
    let key = create(app, &merchant, charge(&usd, amount, "pm_card_visa")).await;
    assert_eq!(settled(app, &merchant, &key).await["status"], "succeeded");
    (merchant, usd)
}

pub(crate) fn sandbox(app: &TestApp, path: &str) -> String {
    format!(
        "{}{path}",
        app.sandbox_address.as_deref().expect("sandbox on")
    )
}

pub(crate) async fn fault(app: &TestApp, spec: Value) {
    let response = app
        .client
        .post(sandbox(app, "/control/faults"))
        .json(&spec)
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success(), "{}", response.status());
}

pub(crate) async fn executions(app: &TestApp, settlement_key: &str) -> Vec<Value> {
    let body: Value = app
        .client
        .get(sandbox(
            app,
            &format!("/control/executions?settlement_key={settlement_key}"),
        ))
        .read_json()
        .await;
    body["data"].as_array().cloned().unwrap_or_default()
}

pub(crate) async fn assert_ledger_balanced(app: &TestApp) {
    let mut pooled = app.state.db.get().await.expect("connection");
    let report = ledger::check(&mut pooled.tx()).await.expect("check runs");
    assert!(report.is_ok(), "{:?}", report.violations);
}

/// GET /v1/settlements/{key} as `merchant`: the response.
pub(crate) async fn settlement_response(
    app: &TestApp,
    merchant: &Merchant,
    key: &str,
) -> reqwest::Response {
    app.get_as(merchant, &format!("/v1/settlements/{key}"))
        .await
}

/// GET /v1/settlements/{key} as `merchant`: its 200 body.
pub(crate) async fn settlement(app: &TestApp, merchant: &Merchant, key: &str) -> Value {
    let response = settlement_response(app, merchant, key).await;
    super::json_of(response, 200).await
}
