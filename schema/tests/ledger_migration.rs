//! Migration 000015 carries a ledger written before it over as it is:
//! holds that were edited in place keep meaning what their status says,
//! the holds still open are resolved the new way, and the offline check
//! passes before and after. Its down migration turns resolutions back
//! into holds edited in place, and up again reads them as such.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::backend::Backend;
use diesel::migration::{Migration, MigrationConnection, MigrationSource};
use diesel::pg::Pg;
use diesel::sqlite::Sqlite;
use diesel::{Connection, SqliteConnection};
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness};
use tern_schema::db::DatabaseUrl;
use tern_schema::ledger::{self, LedgerError};
use tern_schema::migrate::{self, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};
use tern_schema::store::ledger as store;
use tern_schema::testing::TestDatabase;
use tern_schema::vocabulary::AccountId;
use tern_schema::{dispatch, Db};

mod common;
use common::{account, check};

const APPEND_ONLY: &str = "2026-11-27-000015_ledger_append_only";

/// Applies every migration before `APPEND_ONLY`, or reverts every one
/// from the newest back to it included.
#[derive(Clone, Copy)]
enum Step {
    UpToBefore,
    DownThrough,
}

fn sorted<DB: Backend>(source: &EmbeddedMigrations) -> Vec<Box<dyn Migration<DB>>> {
    let mut migrations = MigrationSource::<DB>::migrations(source).expect("migrations");
    migrations.sort_by_key(|migration| migration.name().to_string());
    migrations
}

fn step_with<DB: Backend, C: MigrationHarness<DB> + MigrationConnection>(
    conn: &mut C,
    source: &EmbeddedMigrations,
    step: Step,
) {
    let migrations = sorted::<DB>(source);
    match step {
        Step::UpToBefore => {
            conn.setup().expect("the migrations table");
            for migration in migrations
                .iter()
                .filter(|m| m.name().to_string().as_str() < APPEND_ONLY)
            {
                conn.run_migration(&**migration).expect("migration");
            }
        }
        Step::DownThrough => {
            let newer = migrations
                .iter()
                .rev()
                .filter(|m| m.name().to_string().as_str() >= APPEND_ONLY);
            for migration in newer {
                conn.revert_migration(&**migration).expect("revert");
            }
        }
    }
}

async fn migrate(url: &str, step: Step) {
    let url = DatabaseUrl::parse(url).expect("url");
    tokio::task::spawn_blocking(move || match url {
        DatabaseUrl::Sqlite(path) => {
            let mut conn = SqliteConnection::establish(&path).expect("sqlite");
            diesel::connection::SimpleConnection::batch_execute(
                &mut conn,
                "PRAGMA busy_timeout = 10000",
            )
            .expect("busy timeout");
            step_with::<Sqlite, _>(&mut conn, &SQLITE_MIGRATIONS, step);
        }
        DatabaseUrl::Postgres(url) => {
            let mut conn: AsyncConnectionWrapper<AsyncPgConnection> =
                AsyncConnectionWrapper::establish(&url).expect("postgres");
            step_with::<Pg, _>(&mut conn, &POSTGRES_MIGRATIONS, step);
        }
    })
    .await
    .expect("migration thread");
}

async fn execute(db: &Db, sql: &str) {
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => conn.batch_execute(sql).await).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A transaction's status, read alone: the down migration drops a column
/// the row model names.
async fn status(db: &Db, id: &str) -> String {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use tern_schema::schema::ledger_transactions;
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => ledger_transactions::table
        .find(id)
        .select(ledger_transactions::status)
        .first::<String>(conn)
        .await)
    .expect("transaction")
}

const AT: &str = "'2026-01-01 00:00:00'";

/// A two-line transaction of `amount_minor` from `debit` to `credit`.
fn transaction(id: &str, status: &str, debit: &str, credit: &str, amount_minor: i64) -> String {
    format!(
        "INSERT INTO ledger_transactions (id, status, merchant_id, settlement_key, description, created_at, updated_at) \
         VALUES ('{id}', '{status}', 'm1', 'key-{id}', '{id}', {AT}, {AT}); \
         INSERT INTO ledger_entries (id, transaction_id, account_id, direction, amount_minor, currency, created_at) VALUES \
         ('len_{id}_d', '{id}', '{debit}', 'debit', {amount_minor}, 'USD', {AT}), \
         ('len_{id}_c', '{id}', '{credit}', 'credit', {amount_minor}, 'USD', {AT});"
    )
}

/// A ledger as the code before migration 000015 left it: a funding of
/// 10,000, a hold of 3,000 posted in place, one of 2,000 voided in place,
/// and one of 1,000 still open, with the balances those imply.
fn legacy_ledger() -> String {
    let (funding, acquirer, push) = ("acct_m1_usd", "sys_card_acquirer_usd", "sys_card_push_usd");
    let account = |id: &str, merchant: &str, kind: &str, buckets: [i64; 4]| {
        let [posted_debits, posted_credits, pending_debits, pending_credits] = buckets;
        format!(
            "INSERT INTO ledger_accounts (id, merchant_id, kind, currency, posted_debits_minor, \
             posted_credits_minor, pending_debits_minor, pending_credits_minor, created_at, updated_at) \
             VALUES ('{id}', {merchant}, '{kind}', 'USD', {posted_debits}, {posted_credits}, \
             {pending_debits}, {pending_credits}, {AT}, {AT});"
        )
    };
    [
        format!(
            "INSERT INTO merchants (id, organization_name, status, created_at, updated_at) \
             VALUES ('m1', 'M', 'active', {AT}, {AT});"
        ),
        account(funding, "'m1'", "funding", [3_000, 10_000, 1_000, 0]),
        account(acquirer, "NULL", "card_acquirer", [10_000, 0, 0, 0]),
        account(push, "NULL", "card_push", [0, 3_000, 0, 1_000]),
        transaction("ltx_fund", "posted", acquirer, funding, 10_000),
        transaction("ltx_posted", "posted", funding, push, 3_000),
        transaction("ltx_voided", "voided", funding, push, 2_000),
        transaction("ltx_open", "pending", funding, push, 1_000),
    ]
    .concat()
}

#[tokio::test]
async fn a_ledger_from_before_carries_over_as_it_is_and_back() {
    let database = TestDatabase::create().await;
    migrate(database.url(), Step::UpToBefore).await;
    let db = Db::connect(database.url()).await.expect("connect");
    execute(&db, &legacy_ledger()).await;
    migrate::run_pending(database.url()).await.expect("up");

    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.entries, 8);
    for (hold, status) in [("ltx_posted", "posted"), ("ltx_voided", "voided")] {
        let again = ledger::post(&db, hold).await;
        assert!(
            matches!(&again, Err(LedgerError::NotPending { status: found, .. }) if found == status),
            "a hold edited in place stays resolved: {again:?}"
        );
    }
    let posting = ledger::post(&db, "ltx_open")
        .await
        .expect("an open hold is posted the new way");
    assert_eq!(status(&db, "ltx_open").await, "pending");
    let funding = account(&db, &AccountId::new("acct_m1_usd")).await;
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.pending_debits_minor.get()
        ),
        (6_000, 0)
    );
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    {
        let mut pooled = db.get().await.expect("conn");
        let mut tx = pooled.tx();
        let listed = store::account_entries(&mut tx, &AccountId::new("acct_m1_usd"), None, 10)
            .await
            .expect("entries");
        let seen: Vec<(&str, &str, Option<&str>)> = listed
            .iter()
            .map(|(line, status, _, pending)| {
                (
                    line.transaction_id.as_str(),
                    status.as_str(),
                    pending.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen[0],
            (posting.as_str(), "posted", Some("ltx_open")),
            "{seen:?}"
        );
        for legacy in [
            ("ltx_posted", "posted", None),
            ("ltx_voided", "voided", None),
            ("ltx_open", "pending", None),
        ] {
            assert!(seen.contains(&legacy), "{legacy:?} in {seen:?}");
        }
    }

    // Down: the posting becomes an edit of its hold again, balances as they were.
    db.close();
    drop(db);
    migrate(database.url(), Step::DownThrough).await;
    let db = Db::connect(database.url()).await.expect("connect");
    assert_eq!(status(&db, "ltx_open").await, "posted");
    {
        let mut pooled = db.get().await.expect("conn");
        let mut tx = pooled.tx();
        assert!(store::transaction_entries(&mut tx, &posting)
            .await
            .expect("query")
            .is_empty());
    }
    // Up again: that edit reads as a hold resolved in place.
    migrate::run_pending(database.url())
        .await
        .expect("up again");
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.entries, 8);
}
