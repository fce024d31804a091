//! A transfer's leg keys cannot be taken, and a key taken anyway never
//! wedges the transfer (decisions §4, §7): a merchant's POST
//! /v1/settlements under a leg's key is a 409 that stores nothing; a legacy
//! transfer (UUID leg keys, as before leg keys took their own form) whose
//! leg key a merchant took fails with nothing charged, or refunds the payer.

use serde_json::{json, Value};
use tern_actors::ports::{Asset, Network};
use tern_actors::runtime::cluster;
use tern_actors::settlement::record::entity_id as settlement_entity_id;
use tern_actors::transfer::{self, legs, Created, NewTransfer};
use tern_schema::audit::AuditActor;
use tern_schema::models::{SettlementIntent, SettlementRow, TransferRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::{settlements, transfers};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{SettlementKey, TransferId};
use tern_schema::{write_tx, StoreError};
use uuid::Uuid;

use crate::helpers::settlements::{charge, funding_account, sandbox};
use crate::helpers::transfers::{answer_challenge, audited_statuses, challenged, client_secret};
use crate::helpers::transfers::{
    app, assert_executions, eur_quote, finished, get, id, leg, leg_key, EVM_WALLET,
};
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

/// A card charge of the merchant's, as its own integration would send it.
async fn own_charge(app: &TestApp, merchant: &Merchant) -> Value {
    let usd = funding_account(app, merchant, "USD").await;
    charge(&usd, "5.00", "pm_card_visa")
}

/// Asserts the merchant's POST /v1/settlements under `key` is refused as a
/// leg's key, and that nothing was stored under it by that request.
async fn assert_refused_as_leg_key(app: &TestApp, merchant: &Merchant, key: &str) {
    let body = own_charge(app, merchant).await;
    let response = app
        .post_with_key("/v1/settlements", &merchant.api_key, key, &body)
        .await;
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "TRANSFER_LEG_KEY", "{problem}");
}

async fn settlement_status(app: &TestApp, merchant: &Merchant, key: &str) -> u16 {
    app.get(&format!("/v1/settlements/{key}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

async fn all_executions(app: &TestApp) -> Vec<Value> {
    let body: Value = app
        .client
        .get(sandbox(app, "/control/executions"))
        .read_json()
        .await;
    body["data"].as_array().cloned().unwrap_or_default()
}

#[actix_web::test]
async fn a_merchant_cannot_take_a_legs_key_and_the_transfer_still_succeeds() {
    let app = app().await;
    let merchant = app.merchant().await;
    let created =
        crate::helpers::transfers::create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    let transfer_id = id(&created);
    let (leg1, leg2) = (leg_key(&created, 1), leg_key(&created, 2));
    assert_eq!(leg1, format!("{transfer_id}.leg1"));
    assert_eq!(leg2, format!("{transfer_id}.leg2"));
    let open = challenged(&app, &merchant, &transfer_id).await;

    // Leg 2 does not exist yet, leg 1 does: neither key can be taken.
    assert_eq!(settlement_status(&app, &merchant, &leg2).await, 404);
    for key in [&leg2, &leg1] {
        assert_refused_as_leg_key(&app, &merchant, key).await;
    }
    assert_eq!(
        settlement_status(&app, &merchant, &leg2).await,
        404,
        "nothing stored"
    );
    // Not a UUID, and not a leg of this merchant's: malformed, as ever.
    let other = app.merchant().await;
    let body = own_charge(&app, &other).await;
    for key in [leg2.clone(), format!("tr_{}.leg2", Uuid::now_v7().simple())] {
        let response = app
            .post_with_key("/v1/settlements", &other.api_key, &key, &body)
            .await;
        assert_problem(response, 400, "invalid-idempotency-key").await;
    }

    answer_challenge(&app, &client_secret(&open), "approve").await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 2)["status"], "succeeded", "{done}");
    assert_eq!(settlement_status(&app, &merchant, &leg2).await, 200);
    assert_refused_as_leg_key(&app, &merchant, &leg2).await;
    assert_executions(&app, &leg1, &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg2, &[("custodian", "payout")]).await;
}

/// Gives the transfer the leg keys transfers had before leg keys took their
/// own form: UUIDs, which a merchant could take.
async fn make_legacy(app: &TestApp, transfer_id: &str, leg1: Option<&str>, leg2: Option<&str>) {
    let updated: Result<bool, StoreError> = write_tx!(app.state.db, |tx| {
        let row = transfers::find(tx, &TransferId::new(transfer_id))
            .await?
            .expect("the transfer");
        let next = TransferRow {
            leg1_key: leg1.map_or(row.leg1_key.clone(), SettlementKey::new),
            leg2_key: leg2.map_or(row.leg2_key.clone(), SettlementKey::new),
            version: row.version + 1,
            ..row.clone()
        };
        transfers::update_if_version(tx, &next, row.version).await
    });
    assert!(updated.expect("the transfer is updated"));
}

/// A transfer durable and not yet started (the edge starts it after its
/// 201): what every transfer was at the moment an upgrade found it.
async fn unstarted(app: &TestApp, merchant: &Merchant, card_pm: &str) -> String {
    let quote = eur_quote(app, merchant).await;
    let new = NewTransfer {
        merchant_id: merchant.merchant_id.clone(),
        idempotency_key: Uuid::new_v4().to_string(),
        quote_id: quote["quote_id"].as_str().expect("quote_id").to_owned(),
        card_pm: card_pm.to_owned(),
        wallet: EVM_WALLET.to_owned(),
        network: Network::parse("polygon").expect("network"),
        asset: Asset::parse("USDC").expect("asset"),
        request_id: Uuid::new_v4().to_string(),
        actor: AuditActor::System,
    };
    let created = transfer::create(
        app.state.transfers.as_ref().expect("transfers"),
        &new,
        "digest",
        utc_now(),
        &app.state.outbox,
        |_| String::new(),
    )
    .await
    .expect("the transfer is created");
    match created {
        Created::Created { row, .. } => row.id.into_inner(),
        _ => panic!("a fresh key creates"),
    }
}

async fn start(app: &TestApp, transfer_id: &str) {
    let registry = app.state.transfers.as_ref().expect("transfers run");
    registry
        .activate(transfer_id)
        .await
        .expect("the transfer starts");
}

#[actix_web::test]
async fn a_legacy_leg_2_key_taken_by_the_merchant_refunds_the_payer() {
    let app = app().await;
    let merchant = app.merchant().await;
    let created =
        crate::helpers::transfers::create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    let transfer_id = id(&created);
    let open = challenged(&app, &merchant, &transfer_id).await;
    // Before its leg 2 exists, the merchant settles under the legacy key.
    let taken = Uuid::new_v4().to_string();
    make_legacy(&app, &transfer_id, None, Some(&taken)).await;
    let body = own_charge(&app, &merchant).await;
    let response = app
        .post_with_key("/v1/settlements", &merchant.api_key, &taken, &body)
        .await;
    assert_eq!(response.status(), 201, "a legacy key is a UUID");

    answer_challenge(&app, &client_secret(&open), "approve").await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "leg_key_taken", "{done}");
    assert_eq!(leg(&done, 1)["status"], "reversed", "{done}");
    assert_eq!(leg(&done, 2)["status"], "failed", "{done}");
    let leg1 = leg_key(&done, 1);
    assert_executions(
        &app,
        &leg1,
        &[("acquirer", "charge"), ("acquirer", "refund")],
    )
    .await;
    // The merchant's own charge, and no payout: leg 2 never existed.
    assert_executions(&app, &taken, &[("acquirer", "charge")]).await;
    assert_eq!(
        audited_statuses(&app, &merchant, &transfer_id).await,
        [
            "leg1_in_flight",
            "leg1_succeeded",
            "leg2_in_flight",
            "compensating",
            "failed"
        ]
    );
}

/// A settlement of the merchant's under `key`, written as an earlier
/// version of Tern would have let the merchant's own request write it,
/// already failed so that nothing executes it.
async fn foreign_settlement(app: &TestApp, merchant: &Merchant, key: &str) {
    let intent = SettlementIntent {
        merchant_id: merchant.merchant_id.clone(),
        idempotency_key: SettlementKey::new(key),
        method: tern_schema::vocabulary::SettlementMethod::CardCharge,
        currency: "USD".into(),
        amount_minor: MinorUnits::new(500),
        asset: None,
        source: funding_account(app, merchant, "USD").await,
        destination: "pm_card_visa".into(),
        recipient_name: "Ada Lovelace".into(),
        reference: None,
        request_id: Uuid::new_v4().to_string(),
    };
    let mut row = SettlementRow::pending(intent, utc_now());
    row.status = tern_schema::vocabulary::SettlementStatus::Failed;
    row.failure_reason = Some("card_declined".into());
    let inserted: Result<(), StoreError> =
        write_tx!(app.state.db, |tx| settlements::insert(tx, &row).await);
    inserted.expect("the settlement is stored");
}

#[actix_web::test]
async fn a_legacy_leg_1_key_taken_fails_the_transfer_with_nothing_charged() {
    let app = app().await;
    let merchant = app.merchant().await;
    let transfer_id = unstarted(&app, &merchant, "pm_card_visa").await;
    let taken = Uuid::new_v4().to_string();
    make_legacy(&app, &transfer_id, Some(&taken), None).await;
    foreign_settlement(&app, &merchant, &taken).await;

    start(&app, &transfer_id).await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "leg_key_taken", "{done}");
    assert_eq!(leg(&done, 1)["status"], "failed", "{done}");
    assert_eq!(leg(&done, 2)["status"], "not_started", "{done}");
    assert_eq!(
        all_executions(&app).await,
        Vec::<Value>::new(),
        "nothing charged"
    );
    let foreign = crate::helpers::settlements::settlement(&app, &merchant, &taken).await;
    assert_eq!(foreign["status"], "failed", "untouched: {foreign}");
    assert_eq!(
        audited_statuses(&app, &merchant, &transfer_id).await,
        ["leg1_in_flight", "failed"]
    );
}

/// Reads the legacy leg keys again, as a start of the process does.
async fn restart_reads_legacy_keys(app: &TestApp) {
    app.state
        .legacy_leg_keys
        .refresh(&app.state.db)
        .await
        .expect("the legacy leg keys are read");
}

#[actix_web::test]
async fn legacy_leg_keys_are_refused_before_and_after_their_legs_exist() {
    let app = app().await;
    let merchant = app.merchant().await;
    // Found by a start of the process before its legs existed.
    let found = unstarted(&app, &merchant, "pm_card_visa").await;
    let (found1, found2) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    make_legacy(&app, &found, Some(&found1), Some(&found2)).await;
    restart_reads_legacy_keys(&app).await;
    for key in [&found2, &found1] {
        assert_refused_as_leg_key(&app, &merchant, key).await;
        assert_eq!(settlement_status(&app, &merchant, key).await, 404);
    }
    start(&app, &found).await;
    let done = finished(&app, &merchant, &found).await;
    assert_eq!(
        done["status"], "succeeded",
        "refused to the merchant, not to its legs: {done}"
    );
    assert_executions(&app, &found1, &[("acquirer", "charge")]).await;
    assert_executions(&app, &found2, &[("custodian", "payout")]).await;

    // Legacy, but made after the start (by an older node during an
    // upgrade): once its legs exist, their rows refuse their keys.
    let late = unstarted(&app, &merchant, "pm_card_visa").await;
    let (late1, late2) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    make_legacy(&app, &late, Some(&late1), Some(&late2)).await;
    start(&app, &late).await;
    assert_eq!(
        finished(&app, &merchant, &late).await["status"],
        "succeeded"
    );
    for key in [&late1, &late2, &found1, &found2] {
        assert_refused_as_leg_key(&app, &merchant, key).await;
    }
    assert_eq!(
        get(&app, &merchant, &found).await["legs"][1]["settlement_key"],
        json!(found2)
    );
}

/// Where several nodes share PostgreSQL, a legacy leg (a UUID key, which
/// names no transfer) is placed with its transfer as a leg key in the leg
/// form is, so the saga reaches it in memory on one node; its route is
/// pinned once, and every node reads the same.
#[actix_web::test]
async fn legacy_legs_are_placed_with_their_transfer() {
    let app = app().await;
    if app.state.runtime.ownership().is_none() {
        return; // SQLite: one process owns every entity
    }
    let merchant = app.merchant().await;
    let transfer_id = unstarted(&app, &merchant, "pm_card_visa").await;
    let (key1, key2) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    make_legacy(&app, &transfer_id, Some(&key1), Some(&key2)).await;
    let db = &app.state.db;
    assert_eq!(legs::pin_legacy_legs(db).await.expect("pinned"), 2);
    assert_eq!(
        legs::pin_legacy_legs(db).await.expect("pinned"),
        0,
        "a route is pinned once"
    );
    cluster::load_pinned_routes(db).await.expect("loaded");
    let settlements = app.state.settlements.as_ref().expect("settlements run");
    let transfers = app.state.transfers.as_ref().expect("transfers run");
    let home = transfers.slot(&transfer_id);
    for key in [&key1, &key2] {
        let leg = settlement_entity_id(&merchant.merchant_id, &SettlementKey::new(key.as_str()));
        assert_eq!(
            settlements.slot(&leg),
            home,
            "the leg lives with its transfer"
        );
        assert_eq!(
            cluster::slot_for("settlement", &leg),
            home,
            "so do its timers"
        );
    }
    start(&app, &transfer_id).await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_executions(&app, &key1, &[("acquirer", "charge")]).await;
    assert_executions(&app, &key2, &[("custodian", "payout")]).await;
}
