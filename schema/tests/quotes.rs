//! Quote rows on a real database: stored exactly, found only by their
//! merchant, never changed by expiry.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use chrono::Duration;
use tern_schema::models::QuoteRow;
use tern_schema::money::MinorUnits;
use tern_schema::store::{merchants, quotes};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{Asset, MerchantId, Network, QuoteId};
use tern_schema::{write_tx, Db, StoreError};

mod common;

use common::setup;

async fn merchant(db: &Db) -> MerchantId {
    let row = common::merchant_row(&MerchantId::generate());
    let made: Result<(), StoreError> = write_tx!(db, |tx| merchants::insert(tx, &row).await);
    made.expect("merchant");
    row.id
}

fn quote(merchant_id: &MerchantId, id: &str) -> QuoteRow {
    let now = utc_now();
    QuoteRow {
        id: QuoteId::new(id),
        merchant_id: merchant_id.clone(),
        send_currency: "EUR".into(),
        send_amount_minor: MinorUnits::new(10_000),
        receive_asset: Asset::Usdc,
        receive_network: Network::Ethereum,
        rate: "1.08".into(),
        platform_fee_minor: MinorUnits::new(100),
        network_fee_minor: MinorUnits::new(231),
        receive_amount_minor: MinorUnits::new(104_425_200),
        request_id: "req".into(),
        created_at: now,
        expires_at: now + Duration::seconds(60),
    }
}

#[tokio::test]
async fn a_quote_round_trips_and_belongs_to_its_merchant() {
    let (_database, db) = setup().await;
    let owner = merchant(&db).await;
    let other = merchant(&db).await;
    let row = quote(&owner, "qt_0001");
    let inserted: Result<(), StoreError> = write_tx!(db, |tx| quotes::insert(tx, &row).await);
    inserted.expect("insert");

    let mut pooled = db.get().await.expect("conn");
    let found = quotes::find_for_merchant(&mut pooled.tx(), &owner, &QuoteId::new("qt_0001"))
        .await
        .expect("find");
    assert_eq!(found.as_ref(), Some(&row));
    let hidden = quotes::find_for_merchant(&mut pooled.tx(), &other, &QuoteId::new("qt_0001"))
        .await
        .expect("find");
    assert_eq!(hidden, None, "another merchant's quote is not found");
    let missing = quotes::find_for_merchant(&mut pooled.tx(), &owner, &QuoteId::new("qt_none"))
        .await
        .expect("find");
    assert_eq!(missing, None);
}

#[tokio::test]
async fn an_expired_quote_is_still_stored() {
    let (_database, db) = setup().await;
    let owner = merchant(&db).await;
    let mut row = quote(&owner, "qt_0002");
    row.expires_at = row.created_at + Duration::milliseconds(1);
    let inserted: Result<(), StoreError> = write_tx!(db, |tx| quotes::insert(tx, &row).await);
    inserted.expect("insert");

    let later = row.expires_at + Duration::seconds(1);
    let mut pooled = db.get().await.expect("conn");
    let found = quotes::find_for_merchant(&mut pooled.tx(), &owner, &QuoteId::new("qt_0002"))
        .await
        .expect("find")
        .expect("kept after expiry");
    assert!(found.is_expired_at(later));
    assert!(
        found.is_expired_at(found.expires_at),
        "expires_at itself is past"
    );
    assert!(!found.is_expired_at(found.created_at));
}

#[tokio::test]
async fn the_database_refuses_impossible_quotes() {
    let (_database, db) = setup().await;
    let owner = merchant(&db).await;
    let mut unpriced = quote(&owner, "qt_0003");
    unpriced.receive_amount_minor = MinorUnits::ZERO;
    let mut backwards = quote(&owner, "qt_0005");
    backwards.expires_at = backwards.created_at;
    // An unknown network cannot be written at all: the row's type refuses it.
    for row in [unpriced, backwards] {
        let id = row.id.clone();
        let inserted: Result<(), StoreError> = write_tx!(db, |tx| quotes::insert(tx, &row).await);
        assert!(inserted.is_err(), "{id} was accepted");
    }
    let duplicate = quote(&owner, "qt_0006");
    let again = duplicate.clone();
    let first: Result<(), StoreError> = write_tx!(db, |tx| quotes::insert(tx, &duplicate).await);
    first.expect("insert");
    let second: Result<(), StoreError> = write_tx!(db, |tx| quotes::insert(tx, &again).await);
    assert!(
        matches!(second, Err(StoreError::UniqueViolation(_))),
        "{second:?}"
    );
}
