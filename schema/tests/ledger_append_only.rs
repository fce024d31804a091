//! The append-only ledger (decisions §6) and its int64 limit (§2), on both
//! backends and on both write paths: a transaction of its own
//! (`write_tx!`) and the group committer (`Db::write`, whose balances move
//! in memory and whose writes are pipelined on PostgreSQL).

use tern_schema::ledger::{self, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::LedgerEntryRow;
use tern_schema::store::ledger as store;
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;
use common::{account, check, fund, lines, merchant, setup};

/// Which write path a step takes.
#[derive(Clone, Copy, Debug)]
enum Path {
    Transaction,
    Committer,
}

const PATHS: [Path; 2] = [Path::Transaction, Path::Committer];

fn entry(merchant_id: &str, lines: Vec<Line>) -> Entry {
    Entry {
        merchant_id: Some(merchant_id.into()),
        settlement_key: Some("key".into()),
        description: "test".into(),
        lines,
    }
}

async fn record(db: &Db, path: Path, entry: Entry, phase: Phase) -> Result<String, LedgerError> {
    match path {
        Path::Transaction => write_tx!(db, |tx| ledger::record(tx, &entry, phase).await),
        Path::Committer => {
            db.write(move |tx| Box::pin(async move { ledger::record(tx, &entry, phase).await }))
                .await
        }
    }
}

async fn resolve(db: &Db, path: Path, hold: &str, posting: bool) -> Result<String, LedgerError> {
    let hold = hold.to_owned();
    match path {
        Path::Transaction => write_tx!(db, |tx| match posting {
            true => ledger::post(tx, &hold).await,
            false => ledger::void(tx, &hold).await,
        }),
        Path::Committer => {
            db.write(move |tx| {
                Box::pin(async move {
                    match posting {
                        true => ledger::post(tx, &hold).await,
                        false => ledger::void(tx, &hold).await,
                    }
                })
            })
            .await
        }
    }
}

async fn transaction(
    db: &Db,
    id: &str,
) -> (
    tern_schema::models::LedgerTransactionRow,
    Vec<LedgerEntryRow>,
) {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    let row = store::find_transaction(&mut tx, id)
        .await
        .expect("query")
        .expect("transaction");
    let lines = store::transaction_entries(&mut tx, id)
        .await
        .expect("lines");
    (row, lines)
}

/// What a line moves: account, direction, amount, currency.
fn shape(lines: &[LedgerEntryRow]) -> Vec<(String, String, i64, String)> {
    let mut shape: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                l.account_id.clone(),
                l.direction.clone(),
                l.amount_minor,
                l.currency.clone(),
            )
        })
        .collect();
    shape.sort();
    shape
}

#[tokio::test]
async fn a_posting_and_a_void_are_new_transactions_and_the_hold_never_changes() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 10_000).await;
    let push = SystemAccount::CardPush.account_id("USD");
    for path in PATHS {
        let hold = |amount| entry(&merchant_id, lines(&usd, &push, amount));
        let posted = record(&db, path, hold(3_000), Phase::Pending)
            .await
            .expect("hold");
        let voided = record(&db, path, hold(2_000), Phase::Pending)
            .await
            .expect("hold");
        let (held, held_lines) = transaction(&db, &posted).await;

        let posting = resolve(&db, path, &posted, true).await.expect("post");
        let void = resolve(&db, path, &voided, false).await.expect("void");
        for (resolution, hold, status) in
            [(&posting, &posted, "posted"), (&void, &voided, "voided")]
        {
            assert_ne!(
                resolution, hold,
                "{path:?}: a resolution is a transaction of its own"
            );
            let (row, resolution_lines) = transaction(&db, resolution).await;
            assert_eq!(
                (
                    row.status.as_str(),
                    row.pending_id.as_deref(),
                    row.settlement_key.as_deref()
                ),
                (status, Some(hold.as_str()), Some("key")),
                "{path:?}"
            );
            let (hold_row, hold_lines) = transaction(&db, hold).await;
            assert_eq!(
                hold_row.status, "pending",
                "{path:?}: the hold is never edited"
            );
            assert_eq!(shape(&resolution_lines), shape(&hold_lines), "{path:?}");
            assert!(resolution_lines
                .iter()
                .all(|line| line.transaction_id == *resolution
                    && hold_lines.iter().all(|held| held.id != line.id)));
        }
        let (held_after, held_lines_after) = transaction(&db, &posted).await;
        assert_eq!(
            (
                held_after.status,
                held_after.updated_at,
                shape(&held_lines_after)
            ),
            (held.status, held.updated_at, shape(&held_lines)),
        );
    }
    let funding = account(&db, &usd).await;
    assert_eq!(
        (
            funding.balance_minor(),
            funding.available_minor(),
            funding.pending_debits_minor
        ),
        (4_000, 4_000, 0),
        "each amount counted once: two postings of 3,000, two voids"
    );
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
}

#[tokio::test]
async fn a_hold_is_resolved_once_on_either_path() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 10_000).await;
    let push = SystemAccount::CardPush.account_id("USD");
    let funded = {
        let mut pooled = db.get().await.expect("conn");
        let mut tx = pooled.tx();
        let entries = store::account_entries(&mut tx, &usd, None, 1)
            .await
            .expect("entries");
        entries[0].0.transaction_id.clone()
    };
    for path in PATHS {
        let posted = record(
            &db,
            path,
            entry(&merchant_id, lines(&usd, &push, 100)),
            Phase::Pending,
        )
        .await
        .expect("hold");
        let voided = record(
            &db,
            path,
            entry(&merchant_id, lines(&usd, &push, 100)),
            Phase::Pending,
        )
        .await
        .expect("hold");
        resolve(&db, path, &posted, true).await.expect("post");
        resolve(&db, path, &voided, false).await.expect("void");
        let again = [
            (posted.as_str(), true, "posted"),
            (posted.as_str(), false, "posted"),
            (voided.as_str(), true, "voided"),
            (funded.as_str(), true, "posted"),
            ("ltx_missing", false, "missing"),
        ];
        for (hold, posting, status) in again {
            let refused = resolve(&db, path, hold, posting).await;
            match (path, refused) {
                (_, Err(LedgerError::NotPending { status: found, .. })) => {
                    assert_eq!(found, status, "{path:?} {hold}")
                }
                // Pipelined in PostgreSQL's group commit: judged when the
                // unit ends.
                (Path::Committer, Err(LedgerError::Store(StoreError::Conflict(_)))) => {}
                (_, other) => panic!("{path:?} {hold}: {other:?}"),
            }
        }
    }
    // Two resolutions racing for one hold: the database lets one through.
    let hold = record(
        &db,
        Path::Committer,
        entry(&merchant_id, lines(&usd, &push, 500)),
        Phase::Pending,
    )
    .await
    .expect("hold");
    let (post, void) = tokio::join!(
        resolve(&db, Path::Committer, &hold, true),
        resolve(&db, Path::Transaction, &hold, false)
    );
    assert_eq!(
        u8::from(post.is_ok()) + u8::from(void.is_ok()),
        1,
        "{post:?} {void:?}"
    );
    let funding = account(&db, &usd).await;
    let expected = if post.is_ok() { 9_300 } else { 9_800 };
    assert_eq!(
        (funding.balance_minor(), funding.pending_debits_minor),
        (expected, 0)
    );
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
}

#[tokio::test]
async fn the_database_refuses_to_edit_or_delete_ledger_rows() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 700).await;
    let attempts = [
        "UPDATE ledger_entries SET amount_minor = amount_minor + 1",
        "UPDATE ledger_entries SET direction = 'debit'",
        "UPDATE ledger_entries SET account_id = account_id",
        "UPDATE ledger_entries SET transaction_id = transaction_id",
        "DELETE FROM ledger_entries",
        "UPDATE ledger_transactions SET status = 'voided'",
        "DELETE FROM ledger_transactions",
    ];
    for sql in attempts {
        let mut pooled = db.get().await.expect("conn");
        let tx = &mut pooled.tx();
        let refused = dispatch!(tx, conn => diesel_async::SimpleAsyncConnection::batch_execute(conn, sql).await);
        let error = refused.expect_err(sql).to_string();
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    assert_eq!(account(&db, &usd).await.balance_minor(), 700);
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.entries, 2, "nothing was deleted");
}

#[tokio::test]
async fn amounts_that_would_overflow_a_balance_are_refused_and_write_nothing() {
    let (_database, db) = setup().await;
    // Sides only grow: each path fills a counterparty of its own.
    let counterparties = [SystemAccount::CardAcquirer, SystemAccount::CardNetwork];
    for (path, counterparty) in PATHS.into_iter().zip(counterparties) {
        let system = counterparty.account_id("USD");
        let (merchant_id, usd) = merchant(&db).await;
        let credit = |amount| entry(&merchant_id, lines(&system, &usd, amount));
        // A reserved credit counts against the room of its side...
        let reserved = record(&db, path, credit(i64::MAX - 10), Phase::Pending)
            .await
            .expect("reserve");
        let refused = record(&db, path, credit(11), Phase::Posted).await;
        assert!(
            matches!(&refused, Err(LedgerError::Overflow { account_id }) if *account_id == usd),
            "{path:?}: {refused:?}"
        );
        // ... so that posting it never overflows, and the rest still fits.
        resolve(&db, path, &reserved, true).await.expect("post");
        record(&db, path, credit(10), Phase::Posted)
            .await
            .expect("fits exactly");
        let funding = account(&db, &usd).await;
        assert_eq!(
            (funding.balance_minor(), funding.pending_credits_minor),
            (i64::MAX, 0)
        );
        let refused = record(&db, path, credit(1), Phase::Pending).await;
        assert!(
            matches!(refused, Err(LedgerError::Overflow { .. })),
            "{path:?}: {refused:?}"
        );

        // The counterparty's debits are full too: another merchant's
        // credit is refused on the system account's side.
        let (other_id, other) = merchant(&db).await;
        let refused = record(
            &db,
            path,
            entry(&other_id, lines(&system, &other, 1)),
            Phase::Posted,
        )
        .await;
        assert!(
            matches!(&refused, Err(LedgerError::Overflow { account_id }) if *account_id == system),
            "{path:?}: {refused:?}"
        );
        assert_eq!(
            account(&db, &other).await.posted_credits_minor,
            0,
            "nothing written"
        );
        let report = check(&db).await;
        assert!(report.is_ok(), "{path:?}: {:?}", report.violations);
    }
}
