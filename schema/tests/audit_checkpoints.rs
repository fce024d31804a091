//! Verification from checkpoints on a real database: one snapshot while
//! batches commit, a second call that walks only what was appended, the
//! rolling rescan of older events, and tampering with events or with the
//! checkpoint itself.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord, Verification, RESCAN_ROWS_PER_CALL};
use tern_schema::models::AuditCheckpointRow;
use tern_schema::store::{audit as events, audit_checkpoints};
use tern_schema::vocabulary::MerchantId;
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;

/// A migrated database and a merchant whose chain is open.
async fn setup() -> (tern_schema::testing::TestDatabase, Db, MerchantId) {
    let (database, db) = common::setup().await;
    let id = common::merchant_with_chain(&db).await;
    (database, db, id)
}

/// Events appended per group-committed unit while building long chains.
const EVENTS_PER_UNIT: usize = 500;

fn record(merchant_id: &MerchantId, i: usize) -> AuditRecord {
    AuditRecord {
        merchant_id: merchant_id.clone(),
        actor: AuditActor::System,
        action: "settlement.status_changed",
        resource_type: "settlement",
        resource_id: format!("s{i}"),
        request_id: format!("req-{i}"),
        data: json!({"i": i}),
    }
}

/// Appends `n` events through the group committer, many per unit.
async fn append(db: &Db, merchant_id: &MerchantId, n: usize) {
    let mut left = n;
    while left > 0 {
        let count = left.min(EVENTS_PER_UNIT);
        left -= count;
        let merchant_id = merchant_id.clone();
        db.write(move |tx| {
            Box::pin(async move {
                for i in 0..count {
                    audit::append(tx, record(&merchant_id, i)).await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .await
        .expect("append");
    }
}

async fn verify(db: &Db, merchant_id: &MerchantId) -> Verification {
    audit::verify(db, merchant_id).await.expect("verify")
}

async fn verify_full(db: &Db, merchant_id: &MerchantId) -> Verification {
    let mut pooled = db.get().await.expect("conn");
    let full = audit::verify_full(&mut pooled.tx(), merchant_id).await;
    full.expect("verify in full")
}

async fn checkpoint(db: &Db, merchant_id: &MerchantId) -> Option<AuditCheckpointRow> {
    let mut pooled = db.get().await.expect("conn");
    let found = audit_checkpoints::find(&mut pooled.tx(), merchant_id).await;
    found.expect("checkpoint")
}

async fn sql(db: &Db, statement: &str) {
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => diesel_async::SimpleAsyncConnection::batch_execute(conn, statement).await).expect("sql");
}

fn edit_data(merchant: &MerchantId, seq: i64) -> String {
    format!("UPDATE audit_events SET data = '{{\"i\":-1}}' WHERE merchant_id = '{merchant}' AND seq = {seq}")
}

fn delete(merchant: &MerchantId, seq: i64) -> String {
    format!("DELETE FROM audit_events WHERE merchant_id = '{merchant}' AND seq = {seq}")
}

/// (valid, first_invalid_seq, checkpoint_seq, checked_since_checkpoint, rescanned, checked)
type Seen = (bool, Option<i64>, i64, i64, Option<(i64, i64)>, i64);

fn seen(v: &Verification) -> Seen {
    (
        v.valid,
        v.first_invalid_seq,
        v.checkpoint_seq,
        v.checked_since_checkpoint,
        v.rescanned,
        v.checked,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_verification_walks_only_what_was_appended_and_the_rescan_window() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 3_000).await;
    let first = verify(&db, &merchant).await;
    assert_eq!(seen(&first), (true, None, 0, 3_000, None, 3_000));
    assert_eq!(first.head_seq, 3_000);
    let stored = checkpoint(&db, &merchant).await.expect("a checkpoint");
    assert_eq!(
        (
            stored.seq,
            stored.hash.as_str(),
            stored.rescan_seq,
            stored.version
        ),
        (3_000, first.head_hash.as_str(), 0, 1)
    );

    append(&db, &merchant, 5).await;
    let second = verify(&db, &merchant).await;
    // 5 new events, 2,000 rescanned from the first, and the checkpoint's.
    assert_eq!(
        seen(&second),
        (
            true,
            None,
            3_000,
            5,
            Some((1, RESCAN_ROWS_PER_CALL)),
            5 + 2_000 + 1
        )
    );
    // The rescan goes on from event 2,000 (itself re-checked) to the
    // checkpoint, then starts again.
    let third = verify(&db, &merchant).await;
    assert_eq!(
        seen(&third),
        (true, None, 3_005, 0, Some((2_000, 3_005)), 1_006)
    );
    let fourth = verify(&db, &merchant).await;
    assert_eq!(fourth.rescanned, Some((1, 2_000)));
    let stored = checkpoint(&db, &merchant).await.expect("a checkpoint");
    assert_eq!(
        (stored.seq, stored.rescan_seq, stored.version),
        (3_005, 2_000, 4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_after_the_checkpoint_is_found_at_once_and_holds_the_checkpoint() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 10).await;
    assert!(verify(&db, &merchant).await.valid);
    append(&db, &merchant, 5).await;
    sql(&db, &edit_data(&merchant, 12)).await;
    let broken = verify(&db, &merchant).await;
    assert_eq!(
        (
            broken.valid,
            broken.first_invalid_seq,
            broken.checkpoint_seq
        ),
        (false, Some(12), 10)
    );
    append(&db, &merchant, 3).await;
    for _ in 0..3 {
        let again = verify(&db, &merchant).await;
        assert_eq!(
            (
                again.first_invalid_seq,
                again.checkpoint_seq,
                again.head_seq
            ),
            (Some(12), 10, 18),
            "never moved past the broken event"
        );
    }
    let stored = checkpoint(&db, &merchant).await.expect("checkpoint");
    assert_eq!((stored.seq, stored.version), (10, 1));

    // A deleted event after the checkpoint, likewise.
    let (_database2, db2, merchant2) = setup().await;
    append(&db2, &merchant2, 10).await;
    assert!(verify(&db2, &merchant2).await.valid);
    append(&db2, &merchant2, 5).await;
    sql(&db2, &delete(&merchant2, 15)).await;
    assert_eq!(verify(&db2, &merchant2).await.first_invalid_seq, Some(15));
    sql(&db2, &delete(&merchant2, 11)).await;
    assert_eq!(verify(&db2, &merchant2).await.first_invalid_seq, Some(11));
}

/// An event older than the checkpoint is found when the rescan reaches it:
/// within the documented number of calls, and from then on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_before_the_checkpoint_is_found_by_the_rescan() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 3_000).await;
    assert!(verify(&db, &merchant).await.valid);
    sql(&db, &edit_data(&merchant, 2_500)).await;
    let calls_max = 3_000 / RESCAN_ROWS_PER_CALL + 2;
    let mut found_after = None;
    for call in 1..=calls_max {
        let result = verify(&db, &merchant).await;
        if !result.valid {
            assert_eq!(result.first_invalid_seq, Some(2_500));
            found_after = Some(call);
            break;
        }
    }
    assert_eq!(found_after, Some(2), "the first window covers 1..=2000");
    for _ in 0..2 {
        assert_eq!(verify(&db, &merchant).await.first_invalid_seq, Some(2_500));
    }
    assert_eq!(
        verify_full(&db, &merchant).await.first_invalid_seq,
        Some(2_500)
    );

    // A deleted older event, likewise; the window also checks its anchor.
    let (_database2, db2, merchant2) = setup().await;
    append(&db2, &merchant2, 20).await;
    assert!(verify(&db2, &merchant2).await.valid);
    sql(&db2, &delete(&merchant2, 7)).await;
    assert_eq!(verify(&db2, &merchant2).await.first_invalid_seq, Some(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpoints_own_event_is_rechecked_on_every_call() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 4_000).await;
    assert!(verify(&db, &merchant).await.valid);
    append(&db, &merchant, 2).await;
    // Event 4,000 edited and given a fresh hash: it hashes to itself, and
    // event 4,001 still names its old hash, which the checkpoint recorded;
    // only the checkpoint's recorded hash tells.
    let mut pooled = db.get().await.expect("conn");
    let mut edited = events::event(&mut pooled.tx(), &merchant, 4_000)
        .await
        .expect("read")
        .expect("event 4000");
    drop(pooled);
    edited.data = "{\"i\":-1}".into();
    edited.hash = audit::hash_of(&edited);
    let tampers: [(&str, String); 3] = [
        (
            "edited and rehashed",
            format!("UPDATE audit_events SET data = '{}', hash = '{}' WHERE merchant_id = '{merchant}' AND seq = 4000", edited.data, edited.hash),
        ),
        ("edited", edit_data(&merchant, 4_000)),
        ("deleted", delete(&merchant, 4_000)),
    ];
    for (name, statement) in tampers {
        sql(&db, &statement).await;
        let result = verify(&db, &merchant).await;
        // The rescan window (1..=2000) does not reach the checkpoint.
        assert_eq!(
            (
                result.checkpoint_seq,
                result.rescanned,
                result.first_invalid_seq
            ),
            (4_000, Some((1, 2_000)), Some(4_000)),
            "{name}"
        );
    }
}

/// Editing the checkpoint row is no way to hide an edit: a wrong hash or a
/// seq beyond the head is reported, pointing it at a rehashed event breaks
/// the link to the next one, and without a row the chain is walked whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_checkpoint_row_hides_nothing() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 10).await;
    assert!(verify(&db, &merchant).await.valid);
    let set = |assignments: &str| {
        format!("UPDATE audit_checkpoints SET {assignments} WHERE merchant_id = '{merchant}'")
    };

    sql(&db, &set(&format!("hash = '{}'", "b".repeat(64)))).await;
    assert_eq!(verify(&db, &merchant).await.first_invalid_seq, Some(10));
    sql(&db, &set("seq = 50")).await;
    assert_eq!(verify(&db, &merchant).await.first_invalid_seq, Some(11));

    // Event 5 edited and given a fresh hash, the checkpoint moved onto it.
    let mut pooled = db.get().await.expect("conn");
    let mut five = events::event(&mut pooled.tx(), &merchant, 5)
        .await
        .expect("read")
        .expect("event 5");
    drop(pooled);
    five.data = "{\"i\":-1}".into();
    five.hash = audit::hash_of(&five);
    sql(&db, &format!("UPDATE audit_events SET data = '{}', hash = '{}' WHERE merchant_id = '{merchant}' AND seq = 5", five.data, five.hash)).await;
    sql(
        &db,
        &set(&format!("seq = 5, hash = '{}', rescan_seq = 0", five.hash)),
    )
    .await;
    let result = verify(&db, &merchant).await;
    assert_eq!(result.first_invalid_seq, Some(6));
    assert_eq!(verify_full(&db, &merchant).await.first_invalid_seq, Some(6));

    sql(
        &db,
        &format!("DELETE FROM audit_checkpoints WHERE merchant_id = '{merchant}'"),
    )
    .await;
    let whole = verify(&db, &merchant).await;
    assert_eq!(
        (whole.checkpoint_seq, whole.checked, whole.first_invalid_seq),
        (0, 6, Some(6))
    );
}

/// Verifications of one merchant racing each other and the appends: each
/// answers valid, and the checkpoint ends on a real event with its hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_verifications_keep_the_checkpoint_sound() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 50).await;
    let appender = {
        let (db, merchant) = (db.clone(), merchant.clone());
        tokio::spawn(async move {
            for _ in 0..40 {
                append(&db, &merchant, 3).await;
            }
        })
    };
    let verifiers: Vec<_> = (0..4)
        .map(|_| {
            let (db, merchant) = (db.clone(), merchant.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..15 {
                    answers.push(verify(&db, &merchant).await);
                }
                answers
            })
        })
        .collect();
    appender.await.expect("appender");
    for verifier in verifiers {
        for answer in verifier.await.expect("verifier") {
            assert!(answer.valid, "{answer:?}");
        }
    }
    let stored = checkpoint(&db, &merchant).await.expect("checkpoint");
    let mut pooled = db.get().await.expect("conn");
    let event = events::event(&mut pooled.tx(), &merchant, stored.seq)
        .await
        .expect("read")
        .expect("the checkpoint's event");
    drop(pooled);
    assert_eq!(event.hash, stored.hash);
    let last = verify(&db, &merchant).await;
    assert_eq!((last.valid, last.head_seq), (true, 50 + 40 * 3));
}

/// The checkpoint moves by compare-and-set: a write naming a version that
/// is no longer current changes nothing.
#[tokio::test]
async fn a_stale_checkpoint_write_is_refused() {
    let (_database, db, merchant) = setup().await;
    append(&db, &merchant, 3).await;
    assert!(verify(&db, &merchant).await.valid);
    let stored = checkpoint(&db, &merchant).await.expect("checkpoint");
    let older = AuditCheckpointRow {
        seq: 1,
        ..stored.clone()
    };
    let (stale, current) = (older.clone(), older);
    let moved: Result<(bool, bool, bool), StoreError> = write_tx!(db, |tx| {
        let again = audit_checkpoints::insert_first(tx, &stale).await?;
        let stale_moved = audit_checkpoints::advance(tx, &stale, stored.version + 7).await?;
        let current_moved = audit_checkpoints::advance(tx, &current, stored.version).await?;
        Ok((again, stale_moved, current_moved))
    });
    assert_eq!(moved.expect("writes"), (false, false, true));
    let after = checkpoint(&db, &merchant).await.expect("checkpoint");
    assert_eq!((after.seq, after.version), (1, stored.version + 1));
}

/// Batches commit while verifications read: every answer is valid. Read
/// statement by statement, a batch landing between the head and the pages
/// made the chain look longer than its head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_reads_one_snapshot_while_batches_commit() {
    let (_database, db, merchant) = setup().await;
    let appenders: Vec<_> = (0..4)
        .map(|_| {
            let (db, merchant) = (db.clone(), merchant.clone());
            tokio::spawn(async move {
                for _ in 0..60 {
                    let merchant = merchant.clone();
                    db.write(move |tx| {
                        Box::pin(async move {
                            audit::append(tx, record(&merchant, 1)).await?;
                            audit::append(tx, record(&merchant, 2)).await
                        })
                    })
                    .await
                    .expect("append");
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    while !appenders.iter().all(|a| a.is_finished()) {
        answers.push(verify_full(&db, &merchant).await);
        answers.push(verify(&db, &merchant).await);
    }
    for appender in appenders {
        appender.await.expect("appender");
    }
    assert!(answers.len() > 4, "verified while appending");
    let invalid: Vec<_> = answers.iter().filter(|a| !a.valid).collect();
    assert!(
        invalid.is_empty(),
        "{} of {} invalid: {:?}",
        invalid.len(),
        answers.len(),
        invalid.first()
    );
}
