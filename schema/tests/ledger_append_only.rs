//! The append-only ledger (decisions §6) and its int64 limit (§2), on both
//! backends, through the one ledger path: the plan committer
//! (`Db::commit`, whose balances move in memory and whose writes are
//! pipelined on PostgreSQL), which `ledger::record`, `ledger::post` and
//! `ledger::void` each take as a plan of one write.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use tern_schema::ledger::{self, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::LedgerEntryRow;
use tern_schema::money::MinorUnits;
use tern_schema::store::ledger as store;
use tern_schema::vocabulary::{AccountId, LedgerStatus, MerchantId, SettlementKey};
use tern_schema::{dispatch, Db};

mod common;
use common::{account, check, fund, lines, merchant, setup};

fn entry(merchant_id: &MerchantId, lines: Vec<Line>) -> Entry {
    Entry {
        merchant_id: Some(merchant_id.clone()),
        settlement_key: Some(SettlementKey::new("key")),
        description: "test".into(),
        lines,
    }
}

async fn resolve(db: &Db, hold: &str, posting: bool) -> Result<String, LedgerError> {
    match posting {
        true => ledger::post(db, hold).await,
        false => ledger::void(db, hold).await,
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
fn shape(lines: &[LedgerEntryRow]) -> Vec<(AccountId, String, MinorUnits, String)> {
    let mut shape: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                l.account_id.clone(),
                l.direction.to_string(),
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
    let hold = |amount| entry(&merchant_id, lines(&usd, &push, amount));
    let posted = ledger::record(&db, hold(3_000), Phase::Pending)
        .await
        .expect("hold");
    let voided = ledger::record(&db, hold(2_000), Phase::Pending)
        .await
        .expect("hold");
    let (held, held_lines) = transaction(&db, &posted).await;

    let posting = resolve(&db, &posted, true).await.expect("post");
    let void = resolve(&db, &voided, false).await.expect("void");
    for (resolution, hold, status) in [(&posting, &posted, "posted"), (&void, &voided, "voided")] {
        assert_ne!(resolution, hold, "a resolution is a transaction of its own");
        let (row, resolution_lines) = transaction(&db, resolution).await;
        assert_eq!(
            (
                row.status.as_str(),
                row.pending_id.as_deref(),
                row.settlement_key.as_ref().map(SettlementKey::as_str)
            ),
            (status, Some(hold.as_str()), Some("key")),
        );
        let (hold_row, hold_lines) = transaction(&db, hold).await;
        assert_eq!(
            hold_row.status,
            LedgerStatus::Pending,
            "the hold is never edited"
        );
        assert_eq!(shape(&resolution_lines), shape(&hold_lines));
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
    let funding = account(&db, &usd).await;
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.available_minor().get(),
            funding.pending_debits_minor.get()
        ),
        (7_000, 7_000, 0),
        "each amount counted once: a posting of 3,000, a void"
    );
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
}

#[tokio::test]
async fn a_hold_is_resolved_once() {
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
    let posted = ledger::record(
        &db,
        entry(&merchant_id, lines(&usd, &push, 100)),
        Phase::Pending,
    )
    .await
    .expect("hold");
    let voided = ledger::record(
        &db,
        entry(&merchant_id, lines(&usd, &push, 100)),
        Phase::Pending,
    )
    .await
    .expect("hold");
    resolve(&db, &posted, true).await.expect("post");
    resolve(&db, &voided, false).await.expect("void");
    let again = [
        (posted.as_str(), true, "posted"),
        (posted.as_str(), false, "posted"),
        (voided.as_str(), true, "voided"),
        (funded.as_str(), true, "posted"),
        ("ltx_missing", false, "missing"),
    ];
    for (hold, posting, status) in again {
        let refused = resolve(&db, hold, posting).await;
        match refused {
            Err(LedgerError::NotPending { status: found, .. }) => {
                assert_eq!(found, status, "{hold}")
            }
            other => panic!("{hold}: {other:?}"),
        }
    }
    // Two resolutions racing for one hold: one goes through, the other
    // finds the hold resolved.
    let hold = ledger::record(
        &db,
        entry(&merchant_id, lines(&usd, &push, 500)),
        Phase::Pending,
    )
    .await
    .expect("hold");
    let (post, void) = tokio::join!(resolve(&db, &hold, true), resolve(&db, &hold, false));
    assert_eq!(
        u8::from(post.is_ok()) + u8::from(void.is_ok()),
        1,
        "{post:?} {void:?}"
    );
    let (loser, winner) = match post.is_ok() {
        true => (&void, "posted"),
        false => (&post, "voided"),
    };
    assert!(
        matches!(loser, Err(LedgerError::NotPending { status, .. }) if status == winner),
        "{post:?} {void:?}"
    );
    let funding = account(&db, &usd).await;
    let expected = if post.is_ok() { 9_400 } else { 9_900 };
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.pending_debits_minor.get()
        ),
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
    assert_eq!(account(&db, &usd).await.balance_minor().get(), 700);
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.entries, 2, "nothing was deleted");
}

#[tokio::test]
async fn amounts_that_would_overflow_a_balance_are_refused_and_write_nothing() {
    let (_database, db) = setup().await;
    let system = SystemAccount::CardAcquirer.account_id("USD");
    let (merchant_id, usd) = merchant(&db).await;
    let credit = |amount| entry(&merchant_id, lines(&system, &usd, amount));
    // A reserved credit counts against the room of its side...
    let reserved = ledger::record(&db, credit(i64::MAX - 10), Phase::Pending)
        .await
        .expect("reserve");
    // (From a counterparty with room, so only the funding account's side
    // can refuse it.)
    let roomy = SystemAccount::CardNetwork.account_id("USD");
    let refused = ledger::record(
        &db,
        entry(&merchant_id, lines(&roomy, &usd, 11)),
        Phase::Posted,
    )
    .await;
    assert!(
        matches!(&refused, Err(LedgerError::Overflow { account_id }) if *account_id == usd),
        "{refused:?}"
    );
    let refused = ledger::record(&db, credit(11), Phase::Posted).await;
    assert!(
        matches!(refused, Err(LedgerError::Overflow { .. })),
        "{refused:?}"
    );
    // ... so that posting it never overflows, and the rest still fits.
    resolve(&db, &reserved, true).await.expect("post");
    ledger::record(&db, credit(10), Phase::Posted)
        .await
        .expect("fits exactly");
    let funding = account(&db, &usd).await;
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.pending_credits_minor.get()
        ),
        (i64::MAX, 0)
    );
    let refused = ledger::record(&db, credit(1), Phase::Pending).await;
    assert!(
        matches!(refused, Err(LedgerError::Overflow { .. })),
        "{refused:?}"
    );

    // The counterparty's debits are full too: another merchant's
    // credit is refused on the system account's side.
    let (other_id, other) = merchant(&db).await;
    let refused = ledger::record(
        &db,
        entry(&other_id, lines(&system, &other, 1)),
        Phase::Posted,
    )
    .await;
    assert!(
        matches!(&refused, Err(LedgerError::Overflow { account_id }) if *account_id == system),
        "{refused:?}"
    );
    assert_eq!(
        account(&db, &other).await.posted_credits_minor.get(),
        0,
        "nothing written"
    );
    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
}
