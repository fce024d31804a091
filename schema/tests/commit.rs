//! The group committer on a real database: a unit whose pipelined write
//! fails its check rolls back alone, and a unit without a savepoint that
//! fails takes its whole batch with it, never half of it.

use futures_util::future::join_all;
use tern_schema::models::{MerchantRow, SettlementIntent, SettlementRow};
use tern_schema::store::{merchants, settlements};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::{migrate, Db, Rollback, StoreError};

async fn setup() -> (TestDatabase, Db) {
    let database = TestDatabase::create().await;
    migrate::run_pending(database.url())
        .await
        .expect("migrations");
    let db = Db::connect(database.url()).await.expect("connect");
    (database, db)
}

fn merchant(id: &str) -> MerchantRow {
    let now = utc_now();
    MerchantRow {
        id: id.to_owned(),
        organization_name: "M".into(),
        status: "active".into(),
        created_at: now,
        updated_at: now,
    }
}

/// A settlement row that was never inserted: updating it changes no row.
fn missing_settlement(merchant_id: &str) -> SettlementRow {
    SettlementRow::pending(
        SettlementIntent {
            merchant_id: merchant_id.to_owned(),
            idempotency_key: "never-inserted".into(),
            method: "card_push".into(),
            currency: "USD".into(),
            amount_minor: 100,
            asset: None,
            source: "acct_x".into(),
            destination: "tok_x".into(),
            recipient_name: "Ada".into(),
            reference: None,
            request_id: "req".into(),
        },
        utc_now(),
    )
}

async fn exists(db: &Db, id: &str) -> bool {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    merchants::find(&mut tx, id).await.expect("read").is_some()
}

#[tokio::test]
async fn a_unit_whose_checked_write_fails_rolls_back_alone() {
    let (_database, db) = setup().await;
    let ids: Vec<String> = (0..40)
        .map(|i| format!("m_{i}_{}", uuid::Uuid::new_v4()))
        .collect();
    let writes = ids.iter().enumerate().map(|(i, id)| {
        let db = db.clone();
        let row = merchant(id);
        async move {
            db.write(move |tx| {
                Box::pin(async move {
                    merchants::insert(tx, &row).await?;
                    if i % 2 == 1 {
                        // Zero rows changed: a conflict, judged when the unit
                        // ends on PostgreSQL and at once on SQLite.
                        settlements::update_at_version(tx, &missing_settlement(&row.id), 1).await?;
                    }
                    Ok::<_, StoreError>(())
                })
            })
            .await
        }
    });
    let outcomes = join_all(writes).await;
    for (i, (id, outcome)) in ids.iter().zip(outcomes).enumerate() {
        if i % 2 == 1 {
            assert!(
                matches!(outcome, Err(StoreError::Conflict(_))),
                "unit {i}: {outcome:?}"
            );
            assert!(!exists(&db, id).await, "unit {i} was rolled back");
        } else {
            assert!(outcome.is_ok(), "unit {i}: {outcome:?}");
            assert!(exists(&db, id).await, "unit {i} committed");
        }
    }
}

#[tokio::test]
async fn a_failing_unit_without_a_savepoint_takes_its_batch_with_it() {
    let (_database, db) = setup().await;
    let ids: Vec<String> = (0..60)
        .map(|i| format!("m_{i}_{}", uuid::Uuid::new_v4()))
        .collect();
    let writes = ids.iter().enumerate().map(|(i, id)| {
        let db = db.clone();
        let row = merchant(id);
        let rollback = if i % 3 == 0 {
            Rollback::WithBatch
        } else {
            Rollback::Alone
        };
        async move {
            db.write_as(rollback, move |tx| {
                Box::pin(async move {
                    merchants::insert(tx, &row).await?;
                    match i % 6 {
                        // Fails on its own account, after writing.
                        0 => Err(StoreError::Conflict("refused".into())),
                        // Fails through a pipelined write's check.
                        3 => {
                            settlements::update_at_version(tx, &missing_settlement(&row.id), 1)
                                .await
                        }
                        _ => Ok(()),
                    }
                })
            })
            .await
        }
    });
    let outcomes = join_all(writes).await;
    let mut committed = 0;
    for (i, (id, outcome)) in ids.iter().zip(outcomes).enumerate() {
        let stored = exists(&db, id).await;
        // Every writer is told the truth: Ok exactly when its writes are there.
        assert_eq!(outcome.is_ok(), stored, "unit {i}: {outcome:?}");
        if i % 3 == 0 {
            assert!(outcome.is_err(), "unit {i} failed");
        }
        committed += usize::from(stored);
    }
    // Batches without a failing unit commit; the writes are not all lost.
    assert!(committed <= 40, "{committed} committed");
    // Later work on the same committer still commits.
    let after = merchant(&format!("after_{}", uuid::Uuid::new_v4()));
    let id = after.id.clone();
    let written: Result<(), StoreError> = db
        .write(move |tx| Box::pin(async move { merchants::insert(tx, &after).await }))
        .await;
    written.expect("the committer carries on");
    assert!(exists(&db, &id).await);
}
