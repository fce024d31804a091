//! One authorization id, one authorization per card (decisions §10): a
//! request re-sent under a new event id with the same amount and currency
//! gets the first decision again and holds nothing new; the same id with
//! other data is declined (`duplicate_authorization`) with no hold, and
//! the database refuses a second authorization row under the id.

use serde_json::{json, Value};
use tern_schema::money::MinorUnits;
use tern_schema::store::cards as store;
use tern_schema::vocabulary::{CardId, CardTransactionKind, CardTransactionStatus};

use crate::helpers::cards::{authorization, json_of, provider_event};
use crate::helpers::cards::{balance, funded_card, transactions};
use crate::helpers::TestApp;

/// An `authorization.request` of `amount_minor` under `authorization_id`,
/// with a fresh event id.
fn request(card: &str, authorization_id: &str, amount_minor: i64) -> Value {
    let mut event = authorization(card, amount_minor, "pos", "US");
    event["data"]["authorization_id"] = json!(authorization_id);
    event
}

async fn hold(app: &TestApp, merchant: &crate::helpers::Merchant, card: &str) -> (i64, i64) {
    let body = balance(app, merchant, card).await;
    (
        body["available_minor"].as_i64().expect("available"),
        body["hold_minor"].as_i64().expect("hold"),
    )
}

#[actix_web::test]
async fn a_reused_authorization_id_holds_once_and_one_reversal_releases_it() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let first = json_of(
        provider_event(&app, &request(&card, "auth_reused", 1_000)).await,
        200,
    )
    .await;
    assert_eq!(first["approved"], true, "{first}");
    assert_eq!(first["duplicate"], false, "{first}");

    let other = json_of(
        provider_event(&app, &request(&card, "auth_reused", 2_000)).await,
        200,
    )
    .await;
    assert_eq!(other["approved"], false, "{other}");
    assert_eq!(other["reason"], "duplicate_authorization", "{other}");
    assert!(other["transaction_id"].is_null(), "{other}");
    assert_eq!(hold(&app, &merchant, &card).await, (4_000, 1_000));

    let resent = json_of(
        provider_event(&app, &request(&card, "auth_reused", 1_000)).await,
        200,
    )
    .await;
    assert_eq!(resent["approved"], true, "{resent}");
    assert_eq!(resent["duplicate"], true, "{resent}");
    assert_eq!(resent["transaction_id"], first["transaction_id"]);
    assert_eq!(hold(&app, &merchant, &card).await, (4_000, 1_000));
    assert_eq!(transactions(&app, &merchant, &card).await.len(), 1);

    let reversal = json!({"id": format!("evt_rev_{}", uuid::Uuid::new_v4().simple()),
        "type": "authorization.reversal",
        "data": {"card_id": card, "authorization_id": "auth_reused"}});
    json_of(provider_event(&app, &reversal).await, 200).await;
    assert_eq!(
        hold(&app, &merchant, &card).await,
        (5_000, 0),
        "the one reversal released everything the id held"
    );
}

#[actix_web::test]
async fn the_database_refuses_a_second_authorization_under_one_id() {
    let app = TestApp::spawn().await;
    let (_merchant, card) = funded_card(&app, "50.00").await;
    let first = json_of(
        provider_event(&app, &request(&card, "auth_once", 1_000)).await,
        200,
    )
    .await;
    assert_eq!(first["approved"], true, "{first}");
    let mut pooled = app.state.db.get().await.expect("connection");
    let stored = store::authorization(&mut pooled.tx(), &CardId::new(card.as_str()), "auth_once")
        .await
        .expect("read")
        .expect("the authorization is stored");
    drop(pooled);
    let mut copy = stored.clone();
    copy.id = format!("ctx_{}", uuid::Uuid::now_v7().simple());
    copy.provider_event_id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    copy.status = CardTransactionStatus::Declined;
    let inserted: Result<(), tern_schema::StoreError> =
        tern_schema::write_tx!(app.state.db, |tx| store::insert_transaction(tx, &copy)
            .await);
    assert!(
        matches!(inserted, Err(tern_schema::StoreError::UniqueViolation(_))),
        "{inserted:?}"
    );
    // Another kind under the id (its clearing) is not an authorization.
    let mut clearing = copy.clone();
    clearing.id = format!("ctx_{}", uuid::Uuid::now_v7().simple());
    clearing.kind = CardTransactionKind::Clear;
    clearing.status = CardTransactionStatus::Posted;
    clearing.hold_minor = MinorUnits::ZERO;
    let inserted: Result<(), tern_schema::StoreError> =
        tern_schema::write_tx!(app.state.db, |tx| store::insert_transaction(tx, &clearing)
            .await);
    assert!(inserted.is_ok(), "{inserted:?}");
}
