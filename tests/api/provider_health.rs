//! /health reports each provider as the adapters observe it: a provider
//! that keeps failing makes the service degraded, naming it, and its first
//! answer restores it.

use serde_json::{json, Value};

use crate::helpers::settlements::{app, create, fault, funded, sandbox, settled};
use crate::helpers::TestApp;

const WALLET: &str = "tron:TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7";

fn payout(source: &str) -> Value {
    json!({"method": "on_chain", "amount": {"amount": "1.00", "currency": "USD"},
        "source": source, "destination": WALLET, "recipient_name": "Ada"})
}

async fn health(app: &TestApp) -> Value {
    let response = app.get("/health").send().await.expect("request");
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

#[actix_web::test]
async fn a_failing_provider_degrades_health_until_it_answers() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let before = health(&app).await;
    assert_eq!(before["status"], "ok", "{before}");
    assert_eq!(before["components"]["card_acquirer"]["status"], "ok");
    assert!(before["components"]["card_acquirer"]["calls"].as_u64() >= Some(1));

    // The custodian answers 503 until the fault is cleared: the payout
    // spends its attempts and fails.
    fault(&app, json!({"target": "custodian", "mode": "transient"})).await;
    let key = create(&app, &merchant, payout(&usd)).await;
    assert_eq!(settled(&app, &merchant, &key).await["status"], "failed");
    let down = health(&app).await;
    assert_eq!(down["status"], "degraded", "{down}");
    let custodian = &down["components"]["custodian"];
    assert_eq!(custodian["status"], "degraded", "{custodian}");
    assert!(
        custodian["failures_in_a_row"].as_u64() >= Some(3),
        "{custodian}"
    );
    // What the provider said is for operators only.
    assert_eq!(custodian["last_failure"], Value::Null, "{custodian}");
    let detailed = app.operator_json("/health").await;
    let custodian = &detailed["components"]["custodian"];
    assert!(custodian["last_failure"].is_string(), "{custodian}");
    assert_eq!(down["components"]["card_acquirer"]["status"], "ok");

    let cleared = app
        .client
        .delete(sandbox(&app, "/control/faults"))
        .send()
        .await
        .expect("request");
    assert!(cleared.status().is_success());
    let key = create(&app, &merchant, payout(&usd)).await;
    assert_eq!(settled(&app, &merchant, &key).await["status"], "succeeded");
    let up = health(&app).await;
    assert_eq!(up["status"], "ok", "{up}");
    assert_eq!(up["components"]["custodian"]["failures_in_a_row"], 0);
}

#[actix_web::test]
async fn without_a_provider_health_says_so() {
    let app = TestApp::spawn_with(|config| config.sandbox_bind = None).await;
    let body = health(&app).await;
    assert_eq!(body["components"]["providers"]["status"], "unconfigured");
}
