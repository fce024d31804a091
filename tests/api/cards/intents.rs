//! A freeze, unfreeze or close tells the issuer first, its intent written
//! before the call: dropped when the issuer did not act, finished by Tern
//! when the issuer's answer was lost, so the issuer and Tern never stay
//! apart (decisions §10).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern::config::RateLimits;

use crate::helpers::cards::{authorize, funded_card, get_card, json_of, operate, send};
use crate::helpers::settlements::{app, fast_retries, fault, sandbox};
use crate::helpers::{assert_problem, Merchant, TestApp};

/// The intent's delay (the 700 ms provider timeout and 2 s), a timer poll,
/// and room for a slow machine.
const FINISH_WAIT_MAX: Duration = Duration::from_secs(40);
/// Past the moment a kept intent would have finished its change.
const PAST_INTENT: Duration = Duration::from_secs(5);

/// The keys of the simulated issuer's executions of `operation` (each
/// test has its own simulator).
async fn issuer_keys(app: &TestApp, operation: &str) -> Vec<String> {
    let sandbox_url = sandbox(app, "");
    crate::processes::issuer_keys(&app.client, &sandbox_url, operation).await
}

/// Reads `path` as the merchant until `done` holds; answers that read.
async fn read_until(
    app: &TestApp,
    merchant: &Merchant,
    path: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let found = json_of(send(app, &merchant.api_key, "GET", path, None).await, 200).await;
        if done(&found) {
            return found;
        }
        assert!(
            started.elapsed() < FINISH_WAIT_MAX,
            "{path} never got there: {found}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The issuer carries out the card's next `operation` (`status`,
/// `wallet`) and its answer outlives the provider timeout.
async fn lose_next(app: &TestApp, card: &str, operation: &str, count: u32) {
    fault(
        app,
        json!({"target": "issuer", "match": {"card_id": card, "operation": operation},
               "mode": "timeout_after_success", "count": count}),
    )
    .await;
}

fn lost_answer(problem: &Value) -> bool {
    problem["detail"]
        .as_str()
        .is_some_and(|detail| detail.contains("answer was lost"))
}

#[actix_web::test]
async fn a_freeze_whose_issuer_answer_is_lost_is_finished_by_tern() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    // The issuer freezes the card, then its answer outlives the provider
    // timeout: Tern cannot know it froze.
    lose_next(&app, &card, "status", 1).await;
    let lost = operate(&app, &merchant, &card, "freeze").await;
    let problem = assert_problem(lost, 502, "issuer-unavailable").await;
    assert!(lost_answer(&problem), "{problem}");
    assert_eq!(
        issuer_keys(&app, "status").await.len(),
        1,
        "the issuer froze it"
    );

    let path = format!("/v1/cards/{card}");
    read_until(&app, &merchant, &path, |card| card["status"] == "frozen").await;
    let changes = issuer_keys(&app, "status").await;
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
async fn a_later_change_finishes_the_unconfirmed_one_first() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let path = format!("/v1/cards/{card}");
    assert_eq!(
        operate(&app, &merchant, &card, "freeze").await.status(),
        200
    );
    // An unfreeze whose answer is lost, then a freeze: the freeze is the
    // user's last word, and no late unfreeze undoes it.
    lose_next(&app, &card, "status", 1).await;
    let lost = operate(&app, &merchant, &card, "unfreeze").await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    let frozen = json_of(operate(&app, &merchant, &card, "freeze").await, 200).await;
    assert_eq!(frozen["status"], "frozen", "{frozen}");
    tokio::time::sleep(PAST_INTENT).await;
    assert_eq!(get_card(&app, &merchant, &card).await["status"], "frozen");
    let declined = authorize(&app, &card, 100).await;
    assert_eq!(declined["approved"], false, "{declined}");

    // A close whose answer is lost, then an unfreeze: the close is
    // finished first, and a closed card unfreezes no more.
    lose_next(&app, &card, "status", 1).await;
    let lost = operate(&app, &merchant, &card, "close").await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    let refused = operate(&app, &merchant, &card, "unfreeze").await;
    assert_problem(refused, 409, "conflict").await;
    read_until(&app, &merchant, &path, |card| card["status"] == "closed").await;
    let changes = issuer_keys(&app, "status").await;
    let statuses: Vec<&str> = changes
        .iter()
        .filter_map(|key| key.split(':').nth(1))
        .collect();
    assert_eq!(
        statuses,
        ["frozen", "active", "frozen", "closed"],
        "each once"
    );
}

#[actix_web::test]
async fn the_same_change_asked_again_while_unconfirmed_is_finished_once() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    lose_next(&app, &card, "status", 1).await;
    let lost = operate(&app, &merchant, &card, "freeze").await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    // Asked again while the issuer is unavailable: still unconfirmed, not
    // dropped.
    fault(
        &app,
        json!({"target": "issuer", "match": {"card_id": card, "operation": "status"},
               "mode": "transient", "count": 1}),
    )
    .await;
    let again = operate(&app, &merchant, &card, "freeze").await;
    let problem = assert_problem(again, 502, "issuer-unavailable").await;
    assert!(lost_answer(&problem), "{problem}");
    let path = format!("/v1/cards/{card}");
    read_until(&app, &merchant, &path, |card| card["status"] == "frozen").await;
    let changes = issuer_keys(&app, "status").await;
    assert_eq!(changes.len(), 1, "{changes:?}");
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
    tokio::time::sleep(PAST_INTENT).await;
    assert_eq!(get_card(&app, &merchant, &card).await["status"], "active");
    assert_eq!(issuer_keys(&app, "status").await, Vec::<String>::new());
    let approved = authorize(&app, &card, 100).await;
    assert_eq!(approved["approved"], true, "{approved}");
}

#[actix_web::test]
async fn a_wallet_token_whose_issuer_answer_is_lost_is_recorded_by_tern() {
    let app = app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    // The issuer makes the token, then its answer outlives the provider
    // timeout; its `wallet_token.updated` follows two seconds later.
    lose_next(&app, &card, "wallet", 1).await;
    let path = format!("/v1/cards/{card}/wallet/apple_pay");
    let lost = send(&app, &merchant.api_key, "POST", &path, Some(json!({}))).await;
    assert_problem(lost, 502, "issuer-unavailable").await;
    assert_eq!(issuer_keys(&app, "wallet").await.len(), 1);

    // Tern records the token the issuer made, and the issuer's update,
    // refused until then, lands on it.
    let path = format!("/v1/cards/{card}/wallet/status");
    let view = read_until(&app, &merchant, &path, |view| {
        view["tokens"][0]["status"] == "active"
    })
    .await;
    assert_eq!(view["tokens"].as_array().map(Vec::len), Some(1), "{view}");
    assert_eq!(view["status"], "active", "{view}");
    assert_eq!(
        issuer_keys(&app, "wallet").await.len(),
        1,
        "made once at the issuer"
    );
}

#[actix_web::test]
async fn tokens_still_being_provisioned_count_against_the_cap() {
    // More provisionings than a merchant may make a minute.
    let app = TestApp::spawn_with(|config| {
        fast_retries(config);
        config.rate_limits = RateLimits::parse(
            "m2m_register=10000/1s,register=10000/1s,login=10000/1s,wallet_provision=10000/1s",
        )
        .expect("valid limits");
    })
    .await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let path = format!("/v1/cards/{card}/wallet/google_pay");
    for _ in 0..48 {
        let made = send(&app, &merchant.api_key, "POST", &path, Some(json!({}))).await;
        assert_eq!(made.status(), 200);
    }
    lose_next(&app, &card, "wallet", 2).await;
    for _ in 0..2 {
        let lost = send(&app, &merchant.api_key, "POST", &path, Some(json!({}))).await;
        assert_problem(lost, 502, "issuer-unavailable").await;
    }
    // 48 tokens and 2 the issuer may have made: the cap of 50 is reached.
    let capped = send(&app, &merchant.api_key, "POST", &path, Some(json!({}))).await;
    assert_problem(capped, 409, "conflict").await;
    let status_path = format!("/v1/cards/{card}/wallet/status");
    read_until(&app, &merchant, &status_path, |view| {
        view["tokens"].as_array().map(Vec::len) == Some(50)
    })
    .await;
    assert_eq!(issuer_keys(&app, "wallet").await.len(), 50);
}
