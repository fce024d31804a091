//! Typed ids and amounts through the database: written as text or BIGINT
//! and read back as the same value, on SQLite and on PostgreSQL (when
//! TERN_TEST_DATABASE_URL names a server).

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;
use tern_schema::money::MinorUnits;
use tern_schema::schema::{ledger_accounts, merchants};
use tern_schema::vocabulary::MerchantId;
use tern_schema::{dispatch, write_tx, StoreError};

mod common;

#[tokio::test]
async fn ids_and_amounts_round_trip_through_the_database() {
    let (_database, db) = common::setup().await;
    let (merchant, account) = common::merchant(&db).await;
    let id = MerchantId::new(merchant.clone());
    let credited = MinorUnits::new(1_234);
    let written: Result<(), StoreError> = write_tx!(db, |tx| {
        dispatch!(tx, conn => diesel::update(ledger_accounts::table.find(&account))
            .set(ledger_accounts::posted_credits_minor.eq(credited))
            .execute(conn)
            .await)?;
        Ok(())
    });
    written.expect("write");

    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    let found: Vec<MerchantId> = dispatch!(tx, conn => merchants::table
        .filter(merchants::id.eq(&id))
        .select(merchants::id)
        .load(conn)
        .await)
    .expect("merchants");
    assert_eq!(found, std::slice::from_ref(&id));
    let owned: Vec<(Option<MerchantId>, MinorUnits)> = dispatch!(tx, conn => ledger_accounts::table
        .filter(ledger_accounts::merchant_id.eq(&id))
        .filter(ledger_accounts::id.eq(&account))
        .select((ledger_accounts::merchant_id, ledger_accounts::posted_credits_minor))
        .load(conn)
        .await)
    .expect("accounts");
    assert_eq!(owned, [(Some(id.clone()), credited)]);

    let bound: (
        MerchantId,
        Option<MerchantId>,
        MinorUnits,
        Option<MinorUnits>,
    ) = dispatch!(tx, conn => diesel::select((
            id.clone().into_sql::<Text>(),
            sql::<Nullable<Text>>("NULL"),
            MinorUnits::new(i64::MIN).into_sql::<BigInt>(),
            sql::<Nullable<BigInt>>("NULL"),
        ))
        .get_result(conn)
        .await)
    .expect("select");
    assert_eq!(bound, (id, None, MinorUnits::new(i64::MIN), None));
}
