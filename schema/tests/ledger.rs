//! The ledger on a real database (SQLite, or PostgreSQL with
//! TERN_TEST_DATABASE_URL): balanced two-phase entries, the funding guard
//! under concurrency, and the offline check.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use std::sync::Arc;

use tern_schema::dispatch;
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::money::MinorUnits;
use tern_schema::vocabulary::SettlementKey;

mod common;
use common::{account, check, fund, lines, merchant, setup};

#[tokio::test]
async fn holds_post_and_void_and_the_books_balance() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 10_000).await;

    let hold = |amount| {
        let db = db.clone();
        let merchant_id = merchant_id.clone();
        let usd = usd.clone();
        async move {
            let push = SystemAccount::CardPush.account_id("USD");
            let entry = Entry {
                merchant_id: Some(merchant_id),
                settlement_key: Some(SettlementKey::new("k")),
                description: "push".into(),
                lines: lines(&usd, &push, amount),
            };
            ledger::record(&db, entry, Phase::Pending).await
        }
    };
    let posted = hold(3_000).await.expect("hold");
    let voided = hold(2_000).await.expect("hold");
    let funding = account(&db, &usd).await;
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.available_minor().get()
        ),
        (10_000, 5_000)
    );

    let posting = ledger::post(&db, &posted).await.expect("post");
    let void = ledger::void(&db, &voided).await.expect("void");
    assert!(
        posting != posted && void != voided,
        "resolutions are new transactions"
    );
    let funding = account(&db, &usd).await;
    assert_eq!(
        (
            funding.balance_minor().get(),
            funding.available_minor().get(),
            funding.pending_debits_minor.get()
        ),
        (7_000, 7_000, 0)
    );

    let twice = ledger::post(&db, &posted).await;
    assert!(
        matches!(&twice, Err(LedgerError::NotPending { status, .. }) if status == "posted"),
        "an entry is posted once"
    );

    let report = check(&db).await;
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.currencies["USD"].posted_sum_minor, 0);
}

#[tokio::test]
async fn unbalanced_and_mismatched_entries_write_nothing() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 500).await;
    let push = SystemAccount::CardPush.account_id("EUR");
    let entry = Entry {
        merchant_id: Some(merchant_id.clone()),
        settlement_key: None,
        description: "bad".into(),
        lines: vec![
            Line {
                account_id: usd.clone(),
                direction: Direction::Debit,
                amount_minor: MinorUnits::new(100),
                currency: "USD".into(),
            },
            Line {
                account_id: push,
                direction: Direction::Credit,
                amount_minor: MinorUnits::new(100),
                currency: "USD".into(),
            },
        ],
    };
    let attempt = ledger::record(&db, entry, Phase::Posted).await;
    assert!(
        matches!(attempt, Err(LedgerError::CurrencyMismatch { .. })),
        "{attempt:?}"
    );
    let entry = Entry {
        merchant_id: None,
        settlement_key: None,
        description: "bad".into(),
        lines: vec![Line {
            account_id: usd.clone(),
            direction: Direction::Debit,
            amount_minor: MinorUnits::new(100),
            currency: "USD".into(),
        }],
    };
    let attempt = ledger::record(&db, entry, Phase::Posted).await;
    assert!(matches!(attempt, Err(LedgerError::Unbalanced(_))));
    assert_eq!(account(&db, &usd).await.balance_minor().get(), 500);
    assert!(check(&db).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_holds_never_overdraw_a_funding_account() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 1_000).await;
    let db = Arc::new(db);
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (db, merchant_id, usd) = (db.clone(), merchant_id.clone(), usd.clone());
        tasks.push(tokio::spawn(async move {
            let push = SystemAccount::CardPush.account_id("USD");
            let entry = Entry {
                merchant_id: Some(merchant_id),
                settlement_key: None,
                description: "push".into(),
                lines: lines(&usd, &push, 100),
            };
            ledger::record(&db, entry, Phase::Pending).await
        }));
    }
    let mut succeeded = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => succeeded += 1,
            Err(LedgerError::InsufficientFunds { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(succeeded, 10, "exactly the funded amount is held");
    let funding = account(&db, &usd).await;
    assert_eq!(funding.available_minor().get(), 0);
    assert!(check(&db).await.is_ok());
}

#[tokio::test]
async fn the_check_finds_tampered_balances() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    fund(&db, &merchant_id, &usd, 700).await;
    assert!(check(&db).await.is_ok());
    {
        let mut pooled = db.get().await.expect("conn");
        let tx = &mut pooled.tx();
        let sql = format!("UPDATE ledger_accounts SET posted_credits_minor = posted_credits_minor + 1 WHERE id = '{usd}'");
        dispatch!(tx, conn => diesel_async::SimpleAsyncConnection::batch_execute(conn, &sql).await)
            .expect("tamper");
    }
    let report = check(&db).await;
    assert!(!report.is_ok());
    assert!(
        report.violations.iter().any(|v| v.contains(usd.as_str())),
        "{:?}",
        report.violations
    );
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("USD: posted balances sum to 1")),
        "{:?}",
        report.violations
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_reads_one_snapshot_while_money_moves() {
    let (_database, db) = setup().await;
    let (merchant_id, usd) = merchant(&db).await;
    let writer = {
        let db = db.clone();
        tokio::spawn(async move {
            for _ in 0..300 {
                fund(&db, &merchant_id, &usd, 100).await;
            }
        })
    };
    // Lines read before a movement and balances after it would disagree.
    let mut checks = 0;
    while !writer.is_finished() {
        let report = check(&db).await;
        assert!(report.is_ok(), "{:?}", report.violations);
        checks += 1;
    }
    writer.await.expect("writer");
    assert!(checks > 0);
    assert!(check(&db).await.is_ok());
}
