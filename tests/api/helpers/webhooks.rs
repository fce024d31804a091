//! Webhook setup: the merchant's endpoint, fast delivery settings, and the
//! deliveries and events read back.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern::config::Config;

use super::{Merchant, TestApp};

/// Longest a test waits for deliveries to settle.
pub(crate) const WAIT_MAX: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// A 24-character secret used as its UTF-8 bytes.
pub(crate) const PLAIN_SECRET: &str = "plain-secret-of-24-chars";
/// The Standard Webhooks example secret: base64 after the prefix.
pub(crate) const WHSEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Short webhook and provider retries, so dead letters come within a test.
pub(crate) fn fast_webhooks(config: &mut Config) {
    super::transfers::fast_retries(config);
    config.webhook_retry_schedule = vec![Duration::from_millis(100); 2];
}

pub(crate) async fn put_endpoint(app: &TestApp, api_key: &str, body: &Value) -> reqwest::Response {
    app.client
        .put(app.url("/v1/webhooks/endpoint"))
        .bearer_auth(api_key)
        .json(body)
        .send()
        .await
        .expect("request")
}

/// Stores `url` with `secret` as the merchant's endpoint.
pub(crate) async fn configure(app: &TestApp, merchant: &Merchant, url: &str, secret: &str) {
    let response = put_endpoint(
        app,
        &merchant.api_key,
        &json!({"url": url, "secret": secret}),
    )
    .await;
    assert_eq!(response.status(), 204, "{:?}", response.text().await);
}

pub(crate) async fn replay(app: &TestApp, api_key: &str, body: &Value) -> reqwest::Response {
    app.post("/v1/webhooks/replay")
        .bearer_auth(api_key)
        .json(body)
        .send()
        .await
        .expect("request")
}

/// GET /v1/webhooks/deliveries with `query`; answers the items.
pub(crate) async fn deliveries(app: &TestApp, merchant: &Merchant, query: &str) -> Vec<Value> {
    let response = app
        .get_as(merchant, &format!("/v1/webhooks/deliveries{query}"))
        .await;
    let body = super::json_of(response, 200).await;
    body["items"].as_array().cloned().unwrap_or_default()
}

/// The transfer's events, oldest first, once `done` holds for them.
pub(crate) async fn events_when(
    app: &TestApp,
    merchant: &Merchant,
    transfer_id: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let mut items = deliveries(app, merchant, &format!("?transfer_id={transfer_id}")).await;
        items.reverse();
        if done(&items) {
            return items;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "still waiting: {}",
            Value::from(items)
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The event types of a transfer that succeeded, in the order they happen.
pub(crate) const SUCCEEDED_TYPES: [&str; 5] = [
    "transfer.pending",
    "transfer.leg1_in_flight",
    "transfer.leg1_succeeded",
    "transfer.leg2_in_flight",
    "transfer.succeeded",
];

pub(crate) fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Whether every event is in a final delivery state.
pub(crate) fn all_settled(events: &[Value]) -> bool {
    events.iter().all(|event| event["status"] != "pending")
}
