//! Columns read as enums hold only their enum's codes: the database takes
//! every code and refuses any other text, on SQLite and on PostgreSQL (when
//! TERN_TEST_DATABASE_URL names a server), so no read of a row meets a
//! status it cannot type.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use tern_schema::models::{CardTransactionRow, SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::schema::{card_transactions, cards, settlements};
use tern_schema::store::{cards as card_store, settlements as settlement_store, users};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{
    AccountId, Asset, CardId, CardStatus, CardTransactionKind, CardTransactionStatus, Decline,
    EventSource, MerchantId, SettlementKey, SettlementMethod, WalletStatus,
};
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;

const CARD: &str = "card_codes";
const TRANSACTION: &str = "ctx_codes";
const SETTLEMENT_KEY: &str = "key_codes";

/// The columns without a CHECK of their own until migration 27.
#[derive(Clone, Copy, Debug)]
enum Column {
    WalletStatus,
    ReplacesStatus,
    DeclineReason,
    Asset,
}

/// Writes `code` (NULL for `None`) into `column` of the test's row.
async fn write(db: &Db, merchant: &MerchantId, column: Column, code: Option<&str>) -> bool {
    let code = code.map(str::to_owned);
    let key = SettlementKey::new(SETTLEMENT_KEY);
    let card = CardId::new(CARD);
    let written: Result<usize, StoreError> = write_tx!(db, |tx| {
        let updated = match column {
            Column::WalletStatus => dispatch!(tx, conn => diesel::update(cards::table.find(&card))
                .set(cards::wallet_status.eq(code.clone().unwrap_or_default()))
                .execute(conn)
                .await)?,
            Column::ReplacesStatus => {
                dispatch!(tx, conn => diesel::update(cards::table.find(&card))
                .set(cards::replaces_status.eq(code.clone()))
                .execute(conn)
                .await)?
            }
            Column::DeclineReason => dispatch!(tx, conn => diesel::update(
                    card_transactions::table.find(TRANSACTION))
                .set(card_transactions::decline_reason.eq(code.clone()))
                .execute(conn)
                .await)?,
            Column::Asset => dispatch!(tx, conn => diesel::update(settlements::table
                    .filter(settlements::merchant_id.eq(merchant))
                    .filter(settlements::idempotency_key.eq(&key)))
                .set(settlements::asset.eq(code.clone()))
                .execute(conn)
                .await)?,
        };
        Ok(updated)
    });
    match written {
        Ok(updated) => {
            assert_eq!(updated, 1, "{column:?} names the test's row");
            true
        }
        Err(_) => false,
    }
}

#[tokio::test]
async fn enum_columns_take_every_code_and_refuse_other_text() {
    let (_database, db) = common::setup().await;
    let (merchant, account) = common::merchant(&db).await;
    rows(&db, &merchant, &account).await;

    let cases: [(Column, Vec<&str>, bool); 4] = [
        (
            Column::WalletStatus,
            WalletStatus::ALL.iter().map(|code| code.as_str()).collect(),
            false,
        ),
        (
            Column::ReplacesStatus,
            CardStatus::ALL.iter().map(|code| code.as_str()).collect(),
            true,
        ),
        (
            Column::DeclineReason,
            Decline::ALL.iter().map(|code| code.as_str()).collect(),
            true,
        ),
        (
            Column::Asset,
            Asset::ALL.iter().map(|code| code.as_str()).collect(),
            true,
        ),
    ];
    for (column, codes, nullable) in cases {
        for code in &codes {
            assert!(
                write(&db, &merchant, column, Some(code)).await,
                "{column:?} takes {code}"
            );
        }
        for other in ["Active", "", " none", "bogus", "usdt", "ACTIVE"] {
            if codes.contains(&other) {
                continue;
            }
            assert!(
                !write(&db, &merchant, column, Some(other)).await,
                "{column:?} refuses {other:?}"
            );
        }
        if nullable {
            assert!(
                write(&db, &merchant, column, None).await,
                "{column:?} takes NULL"
            );
        }
    }

    // An insert is held to it too, not only an update: a copy of the
    // transaction with a known reason goes in, one with another text not.
    assert!(copy(&db, "ctx_copy_1", "'insufficient_funds'").await);
    assert!(!copy(&db, "ctx_copy_2", "'not_a_reason'").await);
    assert!(!copy(&db, "ctx_copy_3", "'Insufficient_Funds'").await);
}

/// Inserts a copy of the test's card transaction as `id`, with the decline
/// reason `reason` (SQL text); whether the database took it.
async fn copy(db: &Db, id: &str, reason: &str) -> bool {
    let statement = format!(
        "INSERT INTO card_transactions (id, card_id, merchant_id, provider_event_id, \
         authorization_id, kind, status, amount_minor, currency, merchant_name, mcc, channel, \
         country, decline_reason, ledger_transaction_id, created_at, updated_at, hold_minor, \
         event_source) \
         SELECT '{id}', card_id, merchant_id, 'evt_{id}', 'auth_{id}', kind, status, \
         amount_minor, currency, merchant_name, mcc, channel, country, {reason}, \
         ledger_transaction_id, created_at, updated_at, hold_minor, event_source \
         FROM card_transactions WHERE id = '{TRANSACTION}'"
    );
    let inserted: Result<usize, StoreError> = write_tx!(db, |tx| {
        Ok(dispatch!(tx, conn => diesel::sql_query(statement.as_str()).execute(conn).await)?)
    });
    match inserted {
        Ok(count) => {
            assert_eq!(count, 1, "one row copied");
            true
        }
        Err(_) => false,
    }
}

/// The merchant's user and card, one card transaction and one settlement.
async fn rows(db: &Db, merchant: &MerchantId, account: &AccountId) {
    let user = common::user_row("user_codes", merchant);
    let card = common::card_row(CARD, merchant, user.id.as_str());
    let transaction = transaction_row(merchant, TRANSACTION);
    let settlement = SettlementRow::pending(
        SettlementIntent {
            merchant_id: merchant.clone(),
            idempotency_key: SettlementKey::new(SETTLEMENT_KEY),
            method: SettlementMethod::OnChain,
            currency: "USD".into(),
            amount_minor: MinorUnits::new(100),
            asset: Some(Asset::Usdc),
            source: account.to_string(),
            destination: "polygon:0x52908400098527886E0F7030069857D2E4169EE7".into(),
            recipient_name: "codes".into(),
            reference: None,
            request_id: "req".into(),
        },
        utc_now(),
    );
    let made: Result<(), StoreError> = write_tx!(db, |tx| {
        users::insert(tx, &user).await?;
        card_store::insert(tx, &card).await?;
        card_store::insert_transaction(tx, &transaction).await?;
        settlement_store::insert(tx, &settlement).await?;
        Ok(())
    });
    made.expect("rows");
}

fn transaction_row(merchant: &MerchantId, id: &str) -> CardTransactionRow {
    let now = utc_now();
    CardTransactionRow {
        id: id.into(),
        card_id: CardId::new(CARD),
        merchant_id: merchant.clone(),
        provider_event_id: format!("evt_{id}"),
        authorization_id: format!("auth_{id}"),
        kind: CardTransactionKind::Authorization,
        status: CardTransactionStatus::Declined,
        amount_minor: MinorUnits::new(100),
        currency: "USD".into(),
        merchant_name: "Shop".into(),
        mcc: "5411".into(),
        channel: "online".into(),
        country: "US".into(),
        decline_reason: Some(Decline::InsufficientFunds),
        ledger_transaction_id: None,
        created_at: now,
        updated_at: now,
        hold_minor: MinorUnits::ZERO,
        event_source: EventSource::Provider,
    }
}

/// A row written with another text before the checks existed (by hand, say)
/// does not stop the upgrade: the migration checks new writes only, on
/// both backends, and the row's own reads are all it costs.
#[tokio::test]
async fn a_stray_code_already_stored_does_not_stop_the_migration() {
    let (database, db) = common::setup().await;
    let (merchant, account) = common::merchant(&db).await;
    rows(&db, &merchant, &account).await;
    step(database.url(), Step::RevertLast).await;
    assert!(
        write(&db, &merchant, Column::WalletStatus, Some("Active")).await,
        "before the checks, any text was taken"
    );
    step(database.url(), Step::RunPending).await;
    assert!(!write(&db, &merchant, Column::ReplacesStatus, Some("bogus")).await);
    assert!(write(&db, &merchant, Column::WalletStatus, Some("active")).await);
    assert!(!write(&db, &merchant, Column::WalletStatus, Some("Active")).await);
}

#[derive(Clone, Copy)]
enum Step {
    RevertLast,
    RunPending,
}

/// Reverts the newest migration (the checks) or runs what is pending.
async fn step(url: &str, step: Step) {
    use diesel::Connection;
    use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
    use diesel_async::AsyncPgConnection;
    use diesel_migrations::{EmbeddedMigrations, MigrationHarness};
    use tern_schema::db::DatabaseUrl;
    use tern_schema::migrate::{POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};

    fn run<DB: diesel::backend::Backend>(
        conn: &mut impl MigrationHarness<DB>,
        source: EmbeddedMigrations,
        step: Step,
    ) {
        match step {
            Step::RevertLast => {
                conn.revert_last_migration(source).expect("revert");
            }
            Step::RunPending => {
                conn.run_pending_migrations(source).expect("migrate");
            }
        }
    }
    let url = DatabaseUrl::parse(url).expect("url");
    tokio::task::spawn_blocking(move || match url {
        DatabaseUrl::Sqlite(path) => {
            let mut conn = diesel::SqliteConnection::establish(&path).expect("sqlite");
            diesel::connection::SimpleConnection::batch_execute(
                &mut conn,
                "PRAGMA busy_timeout = 10000",
            )
            .expect("busy timeout");
            run(&mut conn, SQLITE_MIGRATIONS, step);
        }
        DatabaseUrl::Postgres(url) => {
            let mut conn: AsyncConnectionWrapper<AsyncPgConnection> =
                AsyncConnectionWrapper::establish(&url).expect("postgres");
            run(&mut conn, POSTGRES_MIGRATIONS, step);
        }
    })
    .await
    .expect("migration thread");
}
