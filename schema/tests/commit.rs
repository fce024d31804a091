//! The group committer on a real database: a unit whose pipelined write
//! fails its check rolls back alone, and plans and closures sharing a batch
//! each fail alone.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use futures_util::future::join_all;
use tern_schema::ledger::{Direction, Entry, Line, Phase, SystemAccount};
use tern_schema::models::{SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{LedgerWrite, Plan};
use tern_schema::store::{merchants, settlements};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey};
use tern_schema::{Db, StoreError};

mod common;

use common::setup;

/// A settlement row that was never inserted: updating it changes no row.
fn missing_settlement(merchant_id: &MerchantId) -> SettlementRow {
    SettlementRow::pending(
        SettlementIntent {
            merchant_id: merchant_id.clone(),
            idempotency_key: SettlementKey::new("never-inserted"),
            method: tern_schema::vocabulary::SettlementMethod::CardPush,
            currency: "USD".into(),
            amount_minor: MinorUnits::new(100),
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

async fn exists(db: &Db, id: &MerchantId) -> bool {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    merchants::find(&mut tx, id).await.expect("read").is_some()
}

#[tokio::test]
async fn a_unit_whose_checked_write_fails_rolls_back_alone() {
    let (_database, db) = setup().await;
    let ids: Vec<MerchantId> = (0..40)
        .map(|i| MerchantId::new(format!("m_{i}_{}", uuid::Uuid::new_v4())))
        .collect();
    let writes = ids.iter().enumerate().map(|(i, id)| {
        let db = db.clone();
        let row = common::merchant_row(id);
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
async fn plans_and_work_share_a_batch_and_each_fails_alone() {
    let (_database, db) = setup().await;
    let ids: Vec<MerchantId> = (0..60)
        .map(|i| MerchantId::new(format!("m_{i}_{}", uuid::Uuid::new_v4())))
        .collect();
    let jobs = ids.iter().enumerate().map(|(i, id)| {
        let db = db.clone();
        let row = common::merchant_row(id);
        async move {
            if i % 2 == 0 {
                // A plan: an entry between system accounts, or one naming
                // an account that does not exist (refused).
                let account = match i % 4 {
                    0 => SystemAccount::CardAcquirer.account_id("USD"),
                    _ => AccountId::new(format!("acct_missing_{i}")),
                };
                let plan = Plan {
                    ledger: vec![LedgerWrite::Record {
                        id: format!("ltx_{}", row.id),
                        entry: Entry {
                            merchant_id: None,
                            settlement_key: None,
                            description: row.id.to_string(),
                            lines: vec![
                                line(&account, Direction::Debit),
                                line(
                                    &SystemAccount::CardPush.account_id("USD"),
                                    Direction::Credit,
                                ),
                            ],
                        },
                        phase: Phase::Posted,
                    }],
                    ..Plan::default()
                };
                return db.commit(plan).await.map(|_| ()).map_err(|e| e.to_string());
            }
            db.write(move |tx| {
                Box::pin(async move {
                    merchants::insert(tx, &row).await?;
                    match i % 6 {
                        // Fails on its own account, after writing.
                        1 => Err(StoreError::Conflict("refused".into())),
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
            .map_err(|e| e.to_string())
        }
    });
    let outcomes = join_all(jobs).await;
    for (i, (id, outcome)) in ids.iter().zip(outcomes).enumerate() {
        let stored = match i % 2 {
            0 => transaction_exists(&db, &format!("ltx_{id}")).await,
            _ => exists(&db, id).await,
        };
        // Every writer is told the truth: Ok exactly when its writes are there.
        assert_eq!(outcome.is_ok(), stored, "job {i}: {outcome:?}");
        let refused = match i % 2 {
            0 => i % 4 == 2,
            _ => i % 6 == 1 || i % 6 == 3,
        };
        assert_eq!(outcome.is_err(), refused, "job {i}: {outcome:?}");
    }
}

fn line(account_id: &AccountId, direction: Direction) -> Line {
    Line {
        account_id: account_id.clone(),
        direction,
        amount_minor: MinorUnits::new(5),
        currency: "USD".into(),
    }
}

async fn transaction_exists(db: &Db, id: &str) -> bool {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    tern_schema::store::ledger::find_transaction(&mut tx, id)
        .await
        .expect("read")
        .is_some()
}
