//! The connection pool after a caller gave up on a statement mid-flight: a
//! client that hung up drops its request's future, and a readiness check
//! drops its ping at its deadline, while the statement still runs.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

mod common;

use std::time::Duration;

use diesel_async::SimpleAsyncConnection;
use tern_schema::db::DatabaseUrl;
use tern_schema::db::{POSTGRES_POOL_SIZE_MAX, SQLITE_POOL_SIZE_MAX};
use tern_schema::{Backend, Pooled, StoreError, Tx};

/// A statement that runs for a good fraction of a second on either backend.
async fn slow_statement(pooled: &mut Pooled) {
    let result = match pooled {
        Pooled::Sqlite(conn) => {
            conn.batch_execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) \
                 SELECT count(*) FROM c",
            )
            .await
        }
        Pooled::Pg(conn) => conn.batch_execute("SELECT pg_sleep(0.5)").await,
    };
    result.expect("slow statement");
}

async fn select_one(tx: &mut Tx<'_>) -> Result<(), StoreError> {
    tern_schema::dispatch!(tx, conn => conn.batch_execute("SELECT 1").await)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_statement_was_abandoned_serves_the_next_caller() {
    let (_database, db) = common::setup().await;
    let mut pooled = db.get().await.expect("checkout");
    let abandoned =
        tokio::time::timeout(Duration::from_millis(20), slow_statement(&mut pooled)).await;
    assert!(
        abandoned.is_err(),
        "the statement should outlast its caller"
    );
    drop(pooled);

    // Check out the whole pool, so the abandoned connection is among them.
    let size = match db.backend() {
        Backend::Sqlite => SQLITE_POOL_SIZE_MAX,
        Backend::Postgres => POSTGRES_POOL_SIZE_MAX,
    };
    let mut held = Vec::new();
    for _ in 0..size {
        let mut pooled = db
            .get()
            .await
            .expect("checkout after an abandoned statement");
        select_one(&mut pooled.tx()).await.expect("a statement");
        held.push(pooled);
    }
    drop(held);
    // And a write transaction on whichever connection comes next.
    let written: Result<(), StoreError> = tern_schema::write_tx!(db, |tx| select_one(tx).await);
    written.expect("a write transaction after an abandoned statement");
}

/// A write transaction whose caller gave up while `BEGIN IMMEDIATE` waited
/// for SQLite's write lock takes the lock once it is free. Its connection
/// must not then sit in the pool holding it: every later writer, the
/// committer included, would wait out its busy timeout and fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_write_transaction_does_not_keep_the_write_lock() {
    use diesel::connection::SimpleConnection as _;
    use diesel::Connection as _;

    let (_database, db) = common::setup().await;
    let DatabaseUrl::Sqlite(path) = db.url().clone() else {
        return; // PostgreSQL has no database-wide write lock.
    };
    let mut holder = diesel::SqliteConnection::establish(&path).expect("a second connection");
    holder
        .batch_execute("PRAGMA busy_timeout = 5000; BEGIN IMMEDIATE")
        .expect("take the write lock");
    let abandoned = tokio::time::timeout(Duration::from_millis(50), async {
        let written: Result<(), StoreError> = tern_schema::write_tx!(db, |tx| select_one(tx).await);
        written
    })
    .await;
    assert!(
        abandoned.is_err(),
        "the transaction should wait for the lock"
    );
    holder
        .batch_execute("COMMIT")
        .expect("release the write lock");
    // The abandoned BEGIN IMMEDIATE retries within its busy timeout and
    // gets the lock; nobody checks its connection out meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder
        .batch_execute("PRAGMA busy_timeout = 3000; BEGIN IMMEDIATE")
        .expect("the write lock, once the abandoned transaction let go of it");
    holder.batch_execute("COMMIT").expect("commit");
    let written: Result<(), StoreError> = tern_schema::write_tx!(db, |tx| select_one(tx).await);
    written.expect("a write transaction from the pool");
}
