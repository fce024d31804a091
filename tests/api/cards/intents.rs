//! A freeze, unfreeze or close tells the issuer first, its intent written
//! before the call: dropped when the issuer did not act, finished by Tern
//! when the issuer's answer was lost, so the issuer and Tern never stay
//! apart (decisions §10).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::cards::{authorize, funded_card, get_card, json_of, operate, send};
use crate::helpers::settlements::{app, fault, sandbox};
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

/// The intent's delay (10 s), a timer poll, and room for a slow machine.
const FINISH_WAIT_MAX: Duration = Duration::from_secs(40);

/// The status changes the simulated issuer executed (each test has its
/// own simulator).
async fn status_changes(app: &TestApp) -> Vec<String> {
    let body: Value = app
        .client
        .get(sandbox(app, "/control/executions"))
        .read_json()
        .await;
    body["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["target"] == "issuer" && e["operation"] == "status")
        .filter_map(|e| e["key"].as_str().map(str::to_owned))
        .collect()
}

async fn wait_for_status(app: &TestApp, merchant: &Merchant, card: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let found = get_card(app, merchant, card).await;
        if found["status"] == status {
            return found;
        }
        assert!(
            started.elapsed() < FINISH_WAIT_MAX,
            "never {status}: {found}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_web::test]
async fn a_freeze_whose_issuer_answer_is_lost_is_finished_by_tern() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    // The issuer freezes the card, then its answer outlives the provider
    // timeout: Tern cannot know it froze.
    fault(
        &app,
        json!({"target": "issuer", "match": {"card_id": card, "operation": "status"},
               "mode": "timeout_after_success", "count": 1}),
    )
    .await;
    let lost = operate(&app, &merchant, &card, "freeze").await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    assert_eq!(status_changes(&app).await.len(), 1, "the issuer froze it");

    let frozen = wait_for_status(&app, &merchant, &card, "frozen").await;
    assert_eq!(frozen["status"], "frozen");
    let changes = status_changes(&app).await;
    assert_eq!(
        changes.len(),
        1,
        "finished without a second change: {changes:?}"
    );
    assert!(changes[0].ends_with(":frozen:1"), "{changes:?}");
    let declined = authorize(&app, &card, 100).await;
    assert_eq!(declined["approved"], false, "{declined}");
    // The next change is the user's own, nothing left over reverses it.
    let unfrozen = operate(&app, &merchant, &card, "unfreeze").await;
    assert_eq!(unfrozen.status(), 200);
    let approved = authorize(&app, &card, 100).await;
    assert_eq!(approved["approved"], true, "{approved}");
}

#[actix_web::test]
async fn a_change_the_issuer_refused_or_never_saw_stays_undone() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    for mode in ["fail", "decline", "transient"] {
        fault(
            &app,
            json!({"target": "issuer", "match": {"card_id": card, "operation": "status"},
                   "mode": mode, "count": 1}),
        )
        .await;
        let refused = operate(&app, &merchant, &card, "freeze").await;
        assert_problem(refused, 502, "issuer-unavailable").await;
    }
    // Past the moment a kept intent would have finished the freeze.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(get_card(&app, &merchant, &card).await["status"], "active");
    assert_eq!(status_changes(&app).await, Vec::<String>::new());
    let approved = authorize(&app, &card, 100).await;
    assert_eq!(approved["approved"], true, "{approved}");
}

async fn wallet_provisionings(app: &TestApp) -> usize {
    let body: Value = app
        .client
        .get(sandbox(app, "/control/executions"))
        .read_json()
        .await;
    body["data"]
        .as_array()
        .map(|data| {
            data.iter()
                .filter(|e| e["target"] == "issuer" && e["operation"] == "wallet")
                .count()
        })
        .unwrap_or_default()
}

#[actix_web::test]
async fn a_wallet_token_whose_issuer_answer_is_lost_is_recorded_by_tern() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    // The issuer makes the token, then its answer outlives the provider
    // timeout; its `wallet_token.updated` follows two seconds later.
    fault(
        &app,
        json!({"target": "issuer", "match": {"card_id": card, "operation": "wallet"},
               "mode": "timeout_after_success", "count": 1}),
    )
    .await;
    let path = format!("/v1/cards/{card}/wallet/apple_pay");
    let lost = send(&app, &merchant.api_key, "POST", &path, Some(json!({}))).await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    assert_eq!(wallet_provisionings(&app).await, 1);

    // Tern records the token the issuer made, and the issuer's update,
    // refused until then, lands on it.
    let status_path = format!("/v1/cards/{card}/wallet/status");
    let started = Instant::now();
    let view = loop {
        let view = json_of(
            send(&app, &merchant.api_key, "GET", &status_path, None).await,
            200,
        )
        .await;
        if view["tokens"][0]["status"] == "active" {
            break view;
        }
        assert!(started.elapsed() < FINISH_WAIT_MAX, "never active: {view}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(view["tokens"].as_array().map(Vec::len), Some(1), "{view}");
    assert_eq!(view["status"], "active", "{view}");
    assert_eq!(
        wallet_provisionings(&app).await,
        1,
        "made once at the issuer"
    );
}
