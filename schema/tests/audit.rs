//! The audit chain on a real database: appends link, verification passes,
//! and an edited or deleted row is found.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]
#![allow(clippy::string_slice, reason = "test code: a bad slice fails the test")]

use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::vocabulary::MerchantId;
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;

/// A migrated database and a merchant whose chain is open.
async fn setup() -> (tern_schema::testing::TestDatabase, Db, MerchantId) {
    let (database, db) = common::setup().await;
    let id = common::merchant_with_chain(&db).await;
    (database, db, id)
}

async fn append(db: &Db, merchant_id: &MerchantId, n: usize) {
    for i in 0..n {
        let appended: Result<_, StoreError> = write_tx!(db, |tx| {
            audit::append(
                tx,
                AuditRecord {
                    merchant_id: merchant_id.clone(),
                    actor: AuditActor::ApiKey("key".into()),
                    action: "settlement.created",
                    resource_type: "settlement",
                    resource_id: format!("s{i}"),
                    request_id: format!("req-{i}"),
                    data: json!({"amount_minor": i}),
                },
            )
            .await
        });
        appended.expect("append");
    }
}

/// Verifies as GET /v1/audit/verify does (from the checkpoint), and checks
/// that a full verification from the first event agrees.
async fn verify(db: &Db, merchant_id: &MerchantId) -> audit::Verification {
    let mut pooled = db.get().await.expect("conn");
    let full = audit::verify_full(&mut pooled.tx(), merchant_id)
        .await
        .expect("verify in full");
    drop(pooled);
    let checked = audit::verify(db, merchant_id).await.expect("verify");
    assert_eq!(
        (checked.valid, checked.first_invalid_seq, &checked.head_hash),
        (full.valid, full.first_invalid_seq, &full.head_hash),
        "the checkpointed and the full verification agree here"
    );
    checked
}

async fn sql(db: &Db, statement: &str) {
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => diesel_async::SimpleAsyncConnection::batch_execute(conn, statement).await).expect("sql");
}

#[tokio::test]
async fn a_chain_verifies_and_an_edit_is_found() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 5).await;
    let ok = verify(&db, &merchant).await;
    assert_eq!(
        (ok.valid, ok.checked, ok.first_invalid_seq),
        (true, 5, None)
    );
    sql(&db, &format!("UPDATE audit_events SET data = '{{\"amount_minor\":999}}' WHERE merchant_id = '{merchant}' AND seq = 3")).await;
    let broken = verify(&db, &merchant).await;
    assert!(!broken.valid);
    assert_eq!(broken.first_invalid_seq, Some(3));
}

#[tokio::test]
async fn deleted_rows_are_found_in_the_middle_and_at_the_end() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 4).await;
    sql(
        &db,
        &format!("DELETE FROM audit_events WHERE merchant_id = '{merchant}' AND seq = 4"),
    )
    .await;
    assert_eq!(verify(&db, &merchant).await.first_invalid_seq, Some(4));
    sql(
        &db,
        &format!("DELETE FROM audit_events WHERE merchant_id = '{merchant}' AND seq = 2"),
    )
    .await;
    assert_eq!(verify(&db, &merchant).await.first_invalid_seq, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_to_one_chain_stay_linked() {
    let (_database, db, merchant) = setup().await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (db, merchant) = (db.clone(), merchant.clone());
            tokio::spawn(async move { append(&db, &merchant, 5).await })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let result = verify(&db, &merchant).await;
    assert_eq!((result.valid, result.checked), (true, 40));
}

fn record(merchant_id: &MerchantId, i: usize) -> AuditRecord {
    AuditRecord {
        merchant_id: merchant_id.clone(),
        actor: AuditActor::System,
        action: "settlement.status_changed",
        resource_type: "settlement",
        resource_id: format!("g{i}"),
        request_id: format!("req-g{i}"),
        data: json!({"i": i}),
    }
}

/// Units of one group commit chain their events at the batch's end: events
/// of units that roll back vanish with them, the others link in order, and
/// appends made outside the committer at the same time interleave cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_committed_appends_link_and_roll_back_with_their_unit() {
    let (_database, db, merchant) = setup().await;
    let units: Vec<_> = (0..60)
        .map(|i| {
            let (db, merchant) = (db.clone(), merchant.clone());
            tokio::spawn(async move {
                db.write(move |tx| {
                    Box::pin(async move {
                        audit::append(tx, record(&merchant, i)).await?;
                        audit::append(tx, record(&merchant, i + 1_000)).await?;
                        if i % 3 == 0 {
                            return Err(StoreError::Conflict("this unit rolls back".into()));
                        }
                        Ok(())
                    })
                })
                .await
            })
        })
        .collect();
    let outside = {
        let (db, merchant) = (db.clone(), merchant.clone());
        tokio::spawn(async move { append(&db, &merchant, 10).await })
    };
    let mut committed = 0;
    for unit in units {
        match unit.await.expect("task") {
            Ok(()) => committed += 1,
            Err(StoreError::Conflict(_)) => {}
            Err(other) => panic!("unexpected {other}"),
        }
    }
    outside.await.expect("task");
    assert_eq!(committed, 40);
    let result = verify(&db, &merchant).await;
    assert_eq!((result.valid, result.checked), (true, 40 * 2 + 10));
    let mut pooled = db.get().await.expect("conn");
    let events = tern_schema::store::audit::events_after(&mut pooled.tx(), &merchant, 0, 1_000)
        .await
        .expect("events");
    assert!(events.iter().all(|e| !e.resource_id.starts_with('g')
        || e.resource_id[1..]
            .parse::<usize>()
            .is_ok_and(|i| i % 1_000 % 3 != 0)));
    // A unit's two events stay adjacent and in the order it appended them.
    for pair in events
        .iter()
        .filter(|e| e.resource_id.starts_with('g'))
        .collect::<Vec<_>>()
        .chunks(2)
    {
        let first: usize = pair[0].resource_id[1..].parse().expect("id");
        assert_eq!(pair[1].resource_id, format!("g{}", first + 1_000));
    }
}

/// A unit that panics after writing is rolled back to its savepoint (with
/// its deferred events) and its writer hears of the loss; the units batched
/// with it commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_unit_is_rolled_back_alone() {
    let (_database, db, merchant) = setup().await;
    let units: Vec<_> = (0..20)
        .map(|i| {
            let (db, merchant) = (db.clone(), merchant.clone());
            tokio::spawn(async move {
                db.write(move |tx| {
                    Box::pin(async move {
                        audit::append(tx, record(&merchant, i)).await?;
                        if i == 7 {
                            panic!("unit {i} fails after writing");
                        }
                        Ok::<_, StoreError>(())
                    })
                })
                .await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for unit in units {
        outcomes.push(unit.await.expect("task").is_ok());
    }
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 19);
    assert!(!outcomes[7]);
    let result = verify(&db, &merchant).await;
    assert_eq!((result.valid, result.checked), (true, 19));
}
