//! A transfer's card_charge leg over the real sandbox: on-session, so a 3DS
//! card waits for the payer's challenge, whose outcome reaches Tern by a
//! signed webhook that nudges the leg's actor. Transfers are what make legs;
//! until they exist here, each test writes the leg's row itself and starts
//! its actor, as the transfer will.

use std::time::Duration;

use serde_json::{json, Value};
use tern_actors::settlement::record::entity_id;
use tern_actors::settlement::SettlementCommand;
use tern_schema::models::{SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::settlements as store;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{SettlementKey, TransferId};
use tern_schema::{write_tx, StoreError};
use uuid::Uuid;

use crate::helpers::settlements::{funded, settlement};
use crate::helpers::transfers::answer_challenge;
use crate::helpers::{assert_problem, Merchant, TestApp};

const WAIT_MAX: Duration = Duration::from_secs(20);
const TRANSFER_ID: &str = "tr_0192f1c4-7d2a-7c3e-9b1a-3f6e2d1c0b9a";

/// Writes a 25.00 USD card_charge leg of [`TRANSFER_ID`] and starts it.
async fn leg(app: &TestApp, merchant: &Merchant, source: &str, payment_method: &str) -> String {
    let key = Uuid::new_v4().to_string();
    let mut row = SettlementRow::pending(
        SettlementIntent {
            merchant_id: merchant.merchant_id.clone(),
            idempotency_key: SettlementKey::new(key.as_str()),
            method: tern_schema::vocabulary::SettlementMethod::CardCharge,
            currency: "USD".into(),
            amount_minor: MinorUnits::new(2_500),
            asset: None,
            source: source.to_owned(),
            destination: payment_method.to_owned(),
            recipient_name: "Ada Lovelace".into(),
            reference: None,
            request_id: "req_leg".into(),
        },
        utc_now(),
    );
    row.transfer_id = Some(TransferId::new(TRANSFER_ID));
    let inserted: Result<(), StoreError> =
        write_tx!(app.state.db, |tx| store::insert(tx, &row).await);
    inserted.expect("insert the leg");
    let registry = app.state.settlements.as_ref().expect("a provider");
    registry
        .call(
            &entity_id(&merchant.merchant_id, &SettlementKey::new(key.as_str())),
            SettlementCommand::Start,
        )
        .await
        .expect("start the leg");
    key
}

async fn until(
    app: &TestApp,
    merchant: &Merchant,
    key: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    loop {
        let body = settlement(app, merchant, key).await;
        if done(&body) {
            return body;
        }
        assert!(started.elapsed() < WAIT_MAX, "still waiting: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the challenge and answers its client_secret.
async fn challenge(app: &TestApp, merchant: &Merchant, key: &str) -> String {
    let open = until(app, merchant, key, |body| {
        body["next_action_type"].is_string()
    })
    .await;
    assert_eq!(open["status"], "in_flight");
    assert_eq!(open["next_action_type"], "redirect_to_url");
    assert!(
        open["next_attempt_at"].is_string(),
        "the challenge's deadline"
    );
    open["client_secret"]
        .as_str()
        .expect("a client_secret with the challenge")
        .to_owned()
}

#[actix_web::test]
async fn an_approved_challenge_settles_the_leg_by_webhook_and_only_the_transfer_refunds_it() {
    let app = TestApp::spawn().await;
    let (merchant, usd) = funded(&app, "1.00").await;
    let key = leg(&app, &merchant, &usd, "pm_card_threeDSecureRequired").await;
    let secret = challenge(&app, &merchant, &key).await;
    // The default deadline is 15 minutes: only the webhook's nudge can move
    // the leg within this test.
    answer_challenge(&app, &secret, "approve").await;
    let done = until(&app, &merchant, &key, |body| body["status"] != "in_flight").await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["client_secret"], secret.as_str(), "kept on record");
    assert_eq!(done["next_action_type"], Value::Null);
    assert_eq!(done["next_attempt_at"], Value::Null);
    assert!(done["ledger_transaction_id"].is_string(), "funds credited");

    let response = app
        .post(&format!("/v1/settlements/{key}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&json!({"reason": "customer request"}))
        .send()
        .await
        .expect("request");
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "TRANSFER_LEG");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(TRANSFER_ID)),
        "{problem}"
    );
    assert_eq!(
        settlement(&app, &merchant, &key).await["status"],
        "succeeded"
    );
}

#[actix_web::test]
async fn a_declined_challenge_fails_the_leg_with_authentication_failed() {
    let app = TestApp::spawn().await;
    let (merchant, usd) = funded(&app, "1.00").await;
    let key = leg(&app, &merchant, &usd, "pm_card_threeDSecureRequired").await;
    let secret = challenge(&app, &merchant, &key).await;
    answer_challenge(&app, &secret, "decline").await;
    let done = until(&app, &merchant, &key, |body| body["status"] != "in_flight").await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "authentication_failed");
    assert_eq!(done["client_secret"], secret.as_str());
    assert_eq!(done["next_action_type"], Value::Null);
}

#[actix_web::test]
async fn an_unanswered_challenge_expires() {
    let app = TestApp::spawn_with(|config| {
        config.challenge_ttl = Duration::from_millis(500);
    })
    .await;
    let (merchant, usd) = funded(&app, "1.00").await;
    let key = leg(&app, &merchant, &usd, "pm_card_threeDSecureRequired").await;
    let secret = challenge(&app, &merchant, &key).await;
    let done = until(&app, &merchant, &key, |body| body["status"] != "in_flight").await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "challenge_expired");
    assert_eq!(done["client_secret"], secret.as_str());
    assert_eq!(done["next_action_type"], Value::Null);
}

#[actix_web::test]
async fn a_leg_without_a_challenge_needs_no_payer() {
    let app = TestApp::spawn().await;
    let (merchant, usd) = funded(&app, "1.00").await;
    let key = leg(&app, &merchant, &usd, "pm_card_visa").await;
    let done = until(&app, &merchant, &key, |body| {
        body["status"] != "in_flight" && body["status"] != "pending"
    })
    .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["client_secret"], Value::Null);
}
