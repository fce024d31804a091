//! GET /v1/audit/verify: truthful under concurrent commits (one snapshot),
//! cheap on long chains (checkpoints and a bounded rescan), still finding
//! tampered events around the checkpoint, and rate limited per merchant.

use std::time::Duration;

use serde_json::{json, Value};
use tern::config::RateLimits;
use tern_schema::audit::{self, AuditActor, AuditRecord, RESCAN_ROWS_PER_CALL};
use tern_schema::StoreError;

use crate::helpers::settlements::{charge, create, funding_account, settled};
use crate::helpers::{assert_problem, Merchant, TestApp};

/// Events appended per group-committed unit while building long chains.
const EVENTS_PER_UNIT: usize = 500;

/// An app whose verify limit does not get in the way of the test.
async fn app() -> TestApp {
    TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse(
            "m2m_register=10000/1s,register=10000/1s,login=10000/1s,audit_verify=10000/1s",
        )
        .expect("valid limits");
    })
    .await
}

async fn verify_with(app: &TestApp, api_key: &str) -> reqwest::Response {
    app.get("/v1/audit/verify")
        .bearer_auth(api_key)
        .send()
        .await
        .expect("request")
}

async fn verify(app: &TestApp, merchant: &Merchant) -> Value {
    let response = verify_with(app, &merchant.api_key).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

/// Appends `n` events to the merchant's chain through the store, as the
/// service's own writes do (group-committed, chained at the batch's end).
async fn append(app: &TestApp, merchant: &Merchant, n: usize) {
    let mut left = n;
    while left > 0 {
        let count = left.min(EVENTS_PER_UNIT);
        left -= count;
        let merchant_id = merchant.merchant_id.clone();
        app.state
            .db
            .write(move |tx| {
                Box::pin(async move {
                    for i in 0..count {
                        let record = AuditRecord {
                            merchant_id: merchant_id.clone(),
                            actor: AuditActor::System,
                            action: APPENDED_ACTION,
                            resource_type: "settlement",
                            resource_id: format!("s{i}"),
                            request_id: format!("req-{i}"),
                            data: json!({"i": i}),
                        };
                        audit::append(tx, record).await?;
                    }
                    Ok::<_, StoreError>(())
                })
            })
            .await
            .expect("append");
    }
}

async fn sql(app: &TestApp, statement: &str) {
    app.sql(statement).await.expect("sql");
}

const APPENDED_ACTION: &str = "settlement.status_changed";

/// Sets the action of event `seq`: anything else than [`APPENDED_ACTION`]
/// tampers with an appended event, that restores it.
fn set_action(merchant: &Merchant, seq: i64, action: &str) -> String {
    format!(
        "UPDATE audit_events SET action = '{action}' WHERE merchant_id = '{}' AND seq = {seq}",
        merchant.merchant_id
    )
}

fn delete(merchant: &Merchant, seq: i64) -> String {
    format!(
        "DELETE FROM audit_events WHERE merchant_id = '{}' AND seq = {seq}",
        merchant.merchant_id
    )
}

/// Settlements are created and settle, their audit events committed in
/// group-commit batches, while verify runs again and again: an untouched
/// chain is valid in every answer. On main, verify read the head and the
/// event pages in separate statements, so a batch landing between them
/// made the chain look longer than its head: valid false, with a
/// first_invalid_seq one past the head it had read.
#[actix_web::test]
async fn verify_is_valid_while_settlements_commit() {
    let app = app().await;
    let merchant = app.merchant().await;
    let usd = funding_account(&app, &merchant, "USD").await;
    let writers = async {
        let mut keys = Vec::new();
        for round in 0..10 {
            let batch = (0..4).map(|i| {
                let amount = format!("{}.00", round * 4 + i + 1);
                create(&app, &merchant, charge(&usd, &amount, "pm_card_visa"))
            });
            keys.extend(futures_util::future::join_all(batch).await);
        }
        for key in &keys {
            settled(&app, &merchant, key).await;
        }
    };
    let verifier = async {
        let mut answers = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while answers.len() < 400 && std::time::Instant::now() < deadline {
            answers.push(verify(&app, &merchant).await);
        }
        answers
    };
    let ((), answers) = futures_util::join!(writers, verifier);
    let invalid: Vec<&Value> = answers.iter().filter(|a| a["valid"] != true).collect();
    assert!(
        invalid.is_empty(),
        "{} of {} answers invalid, the first: {}",
        invalid.len(),
        answers.len(),
        invalid[0]
    );
    let last = verify(&app, &merchant).await;
    assert_eq!(last["valid"], true, "{last}");
    assert!(last["head_seq"].as_i64().unwrap_or(0) > 40, "{last}");
}

/// A long chain is verified whole once; the next call walks what was
/// appended since the checkpoint, plus one bounded window of older events.
#[actix_web::test]
async fn a_second_verify_checks_only_what_was_appended_since() {
    let app = app().await;
    let merchant = app.merchant().await;
    append(&app, &merchant, 3_000).await;
    let first = verify(&app, &merchant).await;
    let head = first["head_seq"].as_i64().expect("head_seq");
    assert!(head > 3_000, "{first}");
    assert_eq!(
        (&first["valid"], &first["checkpoint_seq"], &first["checked"]),
        (&json!(true), &json!(0), &json!(head))
    );
    assert_eq!(first["checked_since_checkpoint"], head);
    assert!(first["rescanned_from_seq"].is_null());

    append(&app, &merchant, 7).await;
    let second = verify(&app, &merchant).await;
    assert_eq!(second["valid"], true, "{second}");
    assert_eq!(second["checkpoint_seq"], head);
    assert_eq!(second["checked_since_checkpoint"], 7);
    assert_eq!(second["head_seq"], head + 7);
    assert_eq!(
        (
            &second["rescanned_from_seq"],
            &second["rescanned_through_seq"]
        ),
        (&json!(1), &json!(RESCAN_ROWS_PER_CALL))
    );
    // The appended events, the rescanned ones and the checkpoint's own.
    assert_eq!(second["checked"], 7 + RESCAN_ROWS_PER_CALL + 1);
}

/// Calls verify until it reports the chain broken; answers that answer,
/// or panics after `calls_max` valid ones.
async fn reported_within(app: &TestApp, merchant: &Merchant, calls_max: i64) -> Value {
    for _ in 0..calls_max {
        let answer = verify(app, merchant).await;
        if answer["valid"] == false {
            return answer;
        }
    }
    panic!("not reported within {calls_max} calls");
}

/// Edited and deleted events are reported with their seq: after the
/// checkpoint by the next call; before it once the rescan reaches them,
/// within ceil(checkpoint_seq / 2000) + 1 calls; and by every call after
/// that until repaired.
#[actix_web::test]
async fn tampering_around_the_checkpoint_is_reported_with_its_seq() {
    let app = app().await;
    let merchant = app.merchant().await;
    // Events are edited and deleted on purpose, to see verify find them.
    app.allow_broken_audit_chain(&merchant);
    append(&app, &merchant, 3_000).await;
    let first = verify(&app, &merchant).await;
    let checkpoint = first["head_seq"].as_i64().expect("head_seq");
    append(&app, &merchant, 10).await;

    // After the checkpoint: the next call.
    sql(&app, &set_action(&merchant, checkpoint + 4, "tampered")).await;
    let after = verify(&app, &merchant).await;
    assert_eq!(
        (
            &after["valid"],
            &after["first_invalid_seq"],
            &after["checkpoint_seq"]
        ),
        (&json!(false), &json!(checkpoint + 4), &json!(checkpoint)),
        "{after}"
    );
    sql(&app, &delete(&merchant, checkpoint + 2)).await;
    let deleted = verify(&app, &merchant).await;
    assert_eq!(deleted["first_invalid_seq"], checkpoint + 2, "{deleted}");
    assert_eq!(deleted["checkpoint_seq"], checkpoint, "never moved past it");

    // Before the checkpoint, on another merchant whose chain is sound.
    let other = app.merchant().await;
    // Its events are edited and deleted on purpose too.
    app.allow_broken_audit_chain(&other);
    append(&app, &other, 3_000).await;
    let checkpoint = verify(&app, &other).await["head_seq"]
        .as_i64()
        .expect("head_seq");
    let calls_max = (checkpoint + RESCAN_ROWS_PER_CALL - 1) / RESCAN_ROWS_PER_CALL + 1;
    sql(&app, &set_action(&other, 2_700, "tampered")).await;
    let edited = reported_within(&app, &other, calls_max).await;
    assert_eq!(edited["first_invalid_seq"], 2_700, "{edited}");
    for _ in 0..2 {
        assert_eq!(verify(&app, &other).await["first_invalid_seq"], 2_700);
    }
    // While 2,700 stays broken the rescan stays on its window, so an event
    // deleted further back shows once 2,700 is repaired.
    sql(&app, &delete(&other, 150)).await;
    assert_eq!(verify(&app, &other).await["first_invalid_seq"], 2_700);
    sql(&app, &set_action(&other, 2_700, APPENDED_ACTION)).await;
    let deleted = reported_within(&app, &other, calls_max).await;
    assert_eq!(deleted["first_invalid_seq"], 150, "{deleted}");
}

/// The limit is the merchant's, whatever key calls: another key of the
/// same merchant is refused too, another merchant is not.
#[actix_web::test]
async fn verify_is_rate_limited_per_merchant() {
    // The test defaults keep audit_verify at 10 per minute.
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let second_key = app.key_with_scopes(&merchant, &["audit:read"]).await;
    for call in 0..10 {
        let key = if call % 2 == 0 {
            &merchant.api_key
        } else {
            &second_key
        };
        assert_eq!(verify_with(&app, key).await.status(), 200, "call {call}");
    }
    for key in [&merchant.api_key, &second_key] {
        let refused = verify_with(&app, key).await;
        let retry_after: u64 = refused
            .headers()
            .get("Retry-After")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("Retry-After in seconds");
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        assert_problem(refused, 429, "rate-limited").await;
    }
    let other = app.merchant().await;
    assert_eq!(verify_with(&app, &other.api_key).await.status(), 200);
}
