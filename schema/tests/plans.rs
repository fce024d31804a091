//! Plans on real databases. The same random sequences of plans, with the
//! refusals and conflicts they provoke, give the same answers and the same
//! rows on SQLite and on PostgreSQL (when TERN_TEST_DATABASE_URL names a
//! server; otherwise on SQLite alone, with the books checked). And
//! concurrent plans against one funding account never take it below zero.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::{LedgerAccountRow, MerchantRow, SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{
    FundingSource, LedgerWrite, NewSettlement, Plan, PlanError, RowMove, TimerClaim,
};
use tern_schema::schema::{
    actor_timers, audit_events, idempotency_records, ledger_accounts, ledger_entries,
    ledger_transactions, settlements,
};
use tern_schema::store::timers::TimerRow;
use tern_schema::store::{ledger as ledger_store, merchants};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey, SettlementStatus};
use tern_schema::{dispatch, idempotency, write_tx, Db, Refusal, StoreError};

mod common;
use common::{migrated, Rng};

const MERCHANT: &str = "m_plans";
const FUNDS: i64 = 20_000;

/// The merchant, its audit chain and its funding accounts on `db`, with
/// the accounts' rows copied from `accounts` when given (so that two
/// databases name the same accounts); answers the accounts.
async fn open_merchant(db: &Db, accounts: Option<&[LedgerAccountRow]>) -> Vec<LedgerAccountRow> {
    let now = utc_now();
    let row = MerchantRow {
        id: MerchantId::new(MERCHANT),
        organization_name: "M".into(),
        status: tern_schema::vocabulary::MerchantStatus::Active,
        created_at: now,
        updated_at: now,
    };
    let copied = accounts.map(<[LedgerAccountRow]>::to_vec);
    let made: Result<(), LedgerError> = write_tx!(db, |tx| {
        merchants::insert(tx, &row).await?;
        audit::open_chain(tx, &MerchantId::new(MERCHANT)).await?;
        match &copied {
            Some(rows) => {
                for account in rows {
                    ledger_store::insert_account(tx, account).await?;
                }
                Ok(())
            }
            None => ledger::open_funding_accounts(tx, &MerchantId::new(MERCHANT)).await,
        }
    });
    made.expect("merchant");
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    let accounts = ledger_store::merchant_accounts(&mut tx, &MerchantId::new(MERCHANT))
        .await
        .expect("accounts");
    accounts
}

fn account(accounts: &[LedgerAccountRow], currency: &str) -> AccountId {
    accounts
        .iter()
        .find(|a| a.currency == currency)
        .map(|a| a.id.clone())
        .expect("a funding account in the currency")
}

fn two_lines(debit: &AccountId, credit: &AccountId, amount_minor: i64) -> Vec<Line> {
    let line = |account_id: &AccountId, direction| Line {
        account_id: account_id.clone(),
        direction,
        amount_minor: MinorUnits::new(amount_minor),
        currency: "USD".into(),
    };
    vec![
        line(debit, Direction::Debit),
        line(credit, Direction::Credit),
    ]
}

fn entry(description: &str, lines: Vec<Line>) -> Entry {
    Entry {
        merchant_id: Some(MerchantId::new(MERCHANT)),
        settlement_key: None,
        description: description.into(),
        lines,
    }
}

fn acquirer() -> AccountId {
    SystemAccount::CardAcquirer.account_id("USD")
}

fn push() -> AccountId {
    SystemAccount::CardPush.account_id("USD")
}

/// The plan that funds the merchant's USD account from the acquirer.
fn funding(usd: &AccountId, amount_minor: i64, id: &str) -> Plan {
    Plan {
        ledger: vec![LedgerWrite::Record {
            id: id.into(),
            entry: entry("fund", two_lines(&acquirer(), usd, amount_minor)),
            phase: Phase::Posted,
        }],
        ..Plan::default()
    }
}

fn audit_record(action: &'static str, key: &str) -> AuditRecord {
    AuditRecord {
        merchant_id: MerchantId::new(MERCHANT),
        actor: AuditActor::System,
        action,
        resource_type: "settlement",
        resource_id: key.into(),
        request_id: "req".into(),
        data: serde_json::json!({"key": key}),
    }
}

/// A card_push's creation: its row, the hold on `source`, the audit
/// record and the key's answer, as a settlement submitted over HTTP.
fn creation(
    key: &str,
    source: &AccountId,
    currency: &str,
    amount_minor: i64,
    hold_id: &str,
) -> Plan {
    let mut row = SettlementRow::pending(
        SettlementIntent {
            merchant_id: MerchantId::new(MERCHANT),
            idempotency_key: SettlementKey::new(key),
            method: tern_schema::vocabulary::SettlementMethod::CardPush,
            currency: currency.into(),
            amount_minor: MinorUnits::new(amount_minor),
            asset: None,
            source: source.to_string(),
            destination: "tok_visa".into(),
            recipient_name: "Ada".into(),
            reference: None,
            request_id: "req".into(),
        },
        utc_now(),
    );
    row.version = 1;
    row.funding_transaction_id = Some(hold_id.into());
    let hold = Entry {
        settlement_key: Some(SettlementKey::new(key)),
        ..entry("card_push hold", two_lines(source, &push(), amount_minor))
    };
    let hold = Entry {
        lines: hold
            .lines
            .into_iter()
            .map(|line| Line {
                currency: currency.into(),
                ..line
            })
            .collect(),
        ..hold
    };
    Plan {
        funding_source: Some(FundingSource {
            account_id: source.clone(),
            merchant_id: MerchantId::new(MERCHANT),
            currency: currency.into(),
        }),
        audit: vec![audit_record("settlement.created", key)],
        answer: Some(idempotency::answered(
            (&MerchantId::new(MERCHANT), "settlements", key),
            &format!("digest-{key}"),
            201,
            &format!("{{\"key\":\"{key}\"}}"),
        )),
        new_settlements: vec![NewSettlement { row, hold }],
        ..Plan::default()
    }
}

/// A settlement the sequence created, as its actor would know it.
#[derive(Clone)]
struct Known {
    row: SettlementRow,
    hold: String,
    open: bool,
}

/// The next plan of the sequence, and the settlement it moves if it moves
/// one (to follow when it is written). `step` numbers the ids it names.
fn next_plan(
    rng: &mut Rng,
    step: usize,
    known: &[Known],
    usd: &AccountId,
    eur: &AccountId,
) -> (Plan, Option<(usize, SettlementRow)>) {
    let open: Vec<usize> = (0..known.len()).filter(|i| known[*i].open).collect();
    let choice = rng.below(10);
    if choice == 3 {
        // More funds now and then, so that refusals for funds stay a
        // part of the sequence, not the whole of it.
        return (funding(usd, 3_000, &format!("ltx_topup_{step}")), None);
    }
    if open.is_empty() || choice < 3 {
        // Keys from a small pool, so that some are taken; a source in the
        // wrong currency now and then.
        let key = format!("k{}", rng.below(70));
        let amount = 1 + rng.below(4_000) as i64;
        let (source, currency) = match rng.below(12) {
            0 => (eur, "USD"),
            _ => (usd, "USD"),
        };
        let plan = creation(&key, source, currency, amount, &format!("ltx_hold_{step}"));
        return (plan, None);
    }
    let index = open[rng.below(open.len() as u64) as usize];
    let settlement = &known[index];
    let mut next = settlement.row.clone();
    next.version += 1;
    let id = format!("ltx_step_{step}");
    let mut plan = Plan::default();
    let mut expected = settlement.row.version;
    match choice {
        // Post or void the hold: the settlement succeeded or failed.
        4..=6 => {
            let posting = choice != 6;
            next.status = if posting {
                SettlementStatus::Succeeded
            } else {
                SettlementStatus::Failed
            };
            plan.ledger.push(match posting {
                true => LedgerWrite::Post {
                    hold_id: settlement.hold.clone(),
                    id: id.clone(),
                },
                false => LedgerWrite::Void {
                    hold_id: settlement.hold.clone(),
                    id: id.clone(),
                },
            });
            if posting {
                next.ledger_transaction_id = Some(id);
            }
            plan.timers.push(timer(&format!("t_{step}")));
        }
        // A guarded debit with the row: refused for funds when they are
        // short, and for its version when the row was read stale.
        7 | 8 => {
            let amount = match choice {
                7 => 1 + rng.below(6_000) as i64,
                _ => 1 + rng.below(20) as i64,
            };
            plan.ledger.push(LedgerWrite::Record {
                id,
                entry: entry("refund reserved", two_lines(usd, &acquirer(), amount)),
                phase: Phase::Pending,
            });
            if choice == 8 {
                // Read before an earlier move of the row.
                expected -= 1 + rng.below(3) as i64;
            }
            next.attempt += 1;
        }
        // A timer the plan no longer holds.
        _ => {
            plan.completes_timer = Some(TimerClaim {
                timer_id: format!("t_gone_{step}"),
                claim_token: "lost".into(),
            });
            next.attempt += 1;
        }
    }
    plan.audit.push(audit_record(
        "settlement.status_changed",
        next.idempotency_key.as_str(),
    ));
    plan.moves.push(RowMove::Settlement {
        row: next.clone(),
        expected_version: expected,
    });
    (plan, Some((index, next)))
}

fn timer(id: &str) -> TimerRow {
    TimerRow {
        id: id.into(),
        kind: "settlement".into(),
        entity_id: format!("{MERCHANT}:k"),
        due_at: utc_now(),
        payload: "due".into(),
        claim_token: None,
        claimed_until: None,
        attempts: 0,
        created_at: utc_now(),
        slot: 0,
    }
}

/// An answer as the callers tell answers apart. A key taken is one answer
/// whether a unique index or the claiming statement said so.
fn answer(result: &Result<tern_schema::Written, PlanError>) -> String {
    match result {
        Ok(written) => format!("written events_wait={}", written.events_wait),
        Err(PlanError::Store(
            StoreError::UniqueViolation(_) | StoreError::Refused(Refusal::KeyTaken),
        )) => "key taken".into(),
        Err(PlanError::Store(StoreError::Conflict(_))) => "conflict".into(),
        Err(other) => other.to_string(),
    }
}

/// A ledger transaction's id, status, settlement key, description and hold.
type TransactionFields = (String, String, Option<String>, String, Option<String>);
/// A settlement's key, status, version, attempt, hold and posting.
type SettlementFields = (String, String, i64, i32, Option<String>, Option<String>);

/// Every row the plans wrote, without the ids and times each database
/// chose for itself.
async fn rows(db: &Db) -> Vec<String> {
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    let mut out = Vec::new();
    let accounts: Vec<(String, i64, i64, i64, i64)> = dispatch!(tx, conn => ledger_accounts::table
        .select((
            ledger_accounts::id,
            ledger_accounts::posted_debits_minor,
            ledger_accounts::posted_credits_minor,
            ledger_accounts::pending_debits_minor,
            ledger_accounts::pending_credits_minor,
        ))
        .order(ledger_accounts::id)
        .load(conn)
        .await)
    .expect("accounts");
    out.extend(accounts.iter().map(|a| format!("account {a:?}")));
    let transactions: Vec<TransactionFields> = dispatch!(tx, conn => ledger_transactions::table
            .select((
                ledger_transactions::id,
                ledger_transactions::status,
                ledger_transactions::settlement_key,
                ledger_transactions::description,
                ledger_transactions::pending_id,
            ))
            .order(ledger_transactions::id)
            .load(conn)
            .await)
    .expect("transactions");
    out.extend(transactions.iter().map(|t| format!("transaction {t:?}")));
    let mut entries: Vec<(String, String, String, i64, String)> =
        dispatch!(tx, conn => ledger_entries::table
            .select((
                ledger_entries::transaction_id,
                ledger_entries::account_id,
                ledger_entries::direction,
                ledger_entries::amount_minor,
                ledger_entries::currency,
            ))
            .load(conn)
            .await)
        .expect("entries");
    entries.sort();
    out.extend(entries.iter().map(|e| format!("entry {e:?}")));
    let settled: Vec<SettlementFields> = dispatch!(tx, conn => settlements::table
            .select((
                settlements::idempotency_key,
                settlements::status,
                settlements::version,
                settlements::attempt,
                settlements::funding_transaction_id,
                settlements::ledger_transaction_id,
            ))
            .order(settlements::idempotency_key)
            .load(conn)
            .await)
    .expect("settlements");
    out.extend(settled.iter().map(|s| format!("settlement {s:?}")));
    let answers: Vec<(String, String, Option<i32>, Option<String>)> =
        dispatch!(tx, conn => idempotency_records::table
            .select((
                idempotency_records::idempotency_key,
                idempotency_records::state,
                idempotency_records::response_status,
                idempotency_records::response_body,
            ))
            .order(idempotency_records::idempotency_key)
            .load(conn)
            .await)
        .expect("answers");
    out.extend(answers.iter().map(|a| format!("answer {a:?}")));
    let events: Vec<(i64, String, String, String)> = dispatch!(tx, conn => audit_events::table
        .select((
            audit_events::seq,
            audit_events::action,
            audit_events::resource_id,
            audit_events::data,
        ))
        .order(audit_events::seq)
        .load(conn)
        .await)
    .expect("audit");
    out.extend(events.iter().map(|e| format!("audit {e:?}")));
    let timers: Vec<(String, String, String)> = dispatch!(tx, conn => actor_timers::table
        .select((actor_timers::id, actor_timers::kind, actor_timers::payload))
        .order(actor_timers::id)
        .load(conn)
        .await)
    .expect("timers");
    out.extend(timers.iter().map(|t| format!("timer {t:?}")));
    out
}

/// The books balance per currency, no funding account is below zero, and
/// the offline check finds nothing.
async fn assert_books(db: &Db) {
    let mut pooled = db.get().await.expect("conn");
    let report = ledger::check(&mut pooled.tx()).await.expect("ledger check");
    assert!(report.is_ok(), "{:?}", report.violations);
}

#[tokio::test]
async fn the_same_plans_give_the_same_answers_and_rows_on_both_backends() {
    let sqlite_database = TestDatabase::create_sqlite();
    let postgres_database = TestDatabase::create_postgres_if_configured().await;
    let mut dbs = vec![migrated(&sqlite_database).await];
    if let Some(database) = &postgres_database {
        dbs.push(migrated(database).await);
    }
    let accounts = open_merchant(&dbs[0], None).await;
    for db in &dbs[1..] {
        open_merchant(db, Some(&accounts)).await;
    }
    let (usd, eur) = (account(&accounts, "USD"), account(&accounts, "EUR"));
    for db in &dbs {
        db.commit(funding(&usd, FUNDS, "ltx_funding"))
            .await
            .expect("funded");
    }

    for seed in [7_u64, 1_009, 40_961] {
        let mut rng = Rng(seed);
        let mut known: Vec<Known> = Vec::new();
        let mut tally = std::collections::BTreeMap::<String, usize>::new();
        let steps = 120;
        let mut step = 0;
        while step < steps {
            // Now and then a group of plans at once, on distinct
            // settlements, so that they share a batch.
            let group = if rng.below(4) == 0 {
                2 + rng.below(5)
            } else {
                1
            };
            let mut plans = Vec::new();
            let mut moved = std::collections::BTreeSet::new();
            for _ in 0..group {
                let (plan, follow) =
                    next_plan(&mut rng, step + seed as usize * 1_000, &known, &usd, &eur);
                step += 1;
                if let Some((index, _)) = &follow {
                    if !moved.insert(*index) {
                        continue;
                    }
                }
                plans.push((plan, follow));
            }
            let mut answers: Vec<Vec<String>> = Vec::new();
            for db in &dbs {
                let written = join_all(plans.iter().map(|(plan, _)| db.commit(plan.clone()))).await;
                answers.push(written.iter().map(answer).collect());
            }
            for other in &answers[1..] {
                assert_eq!(&answers[0], other, "seed {seed}, step {step}");
            }
            for ((plan, follow), said) in plans.iter().zip(&answers[0]) {
                *tally.entry(said.clone()).or_default() += 1;
                if !said.starts_with("written") {
                    continue;
                }
                match follow {
                    Some((index, row)) => {
                        known[*index].open =
                            row.status == tern_schema::vocabulary::SettlementStatus::Pending;
                        known[*index].row = row.clone();
                    }
                    None => {
                        if let Some(created) = <[NewSettlement]>::first(&plan.new_settlements) {
                            known.push(Known {
                                row: created.row.clone(),
                                hold: created
                                    .row
                                    .funding_transaction_id
                                    .clone()
                                    .unwrap_or_default(),
                                open: true,
                            });
                        }
                    }
                }
            }
        }
        // The sequence met the refusals it was made to meet.
        for expected in [
            "written",
            "key taken",
            "conflict",
            "insufficient",
            "holds EUR",
            "timer",
        ] {
            assert!(
                tally.keys().any(|said| said.contains(expected)),
                "seed {seed}: no answer like {expected:?} in {tally:?}"
            );
        }
    }
    let written: Vec<Vec<String>> = join_all(dbs.iter().map(rows)).await;
    for other in &written[1..] {
        assert_eq!(written[0].len(), other.len());
        for (a, b) in written[0].iter().zip(other) {
            assert_eq!(a, b);
        }
    }
    for db in &dbs {
        assert_books(db).await;
    }
}

#[tokio::test]
async fn concurrent_plans_never_take_a_funding_account_below_zero() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    let accounts = open_merchant(&db, None).await;
    let usd = account(&accounts, "USD");
    db.commit(funding(&usd, 10_000, "ltx_funding"))
        .await
        .expect("funded");
    // 64 holds of 700 at once, and 16 guarded debits of 300 beside them:
    // the account covers 10,000 in all, whatever the batches look like.
    let holds = (0..64).map(|i| creation(&format!("c{i}"), &usd, "USD", 700, &format!("ltx_c{i}")));
    let debits = (0..16).map(|i| Plan {
        ledger: vec![LedgerWrite::Record {
            id: format!("ltx_d{i}"),
            entry: entry("debit", two_lines(&usd, &acquirer(), 300)),
            phase: Phase::Posted,
        }],
        ..Plan::default()
    });
    let plans: Vec<Plan> = holds.chain(debits).collect();
    let answers = join_all(plans.into_iter().map(|plan| db.commit(plan))).await;
    let mut spent = 0;
    for (index, said) in answers.iter().enumerate() {
        match said {
            Ok(_) => spent += if index < 64 { 700 } else { 300 },
            Err(PlanError::Ledger(LedgerError::InsufficientFunds { account_id })) => {
                assert_eq!(account_id, &usd)
            }
            Err(other) => panic!("plan {index}: {other}"),
        }
    }
    assert!(spent <= 10_000 && spent > 10_000 - 700, "spent {spent}");
    let mut pooled = db.get().await.expect("conn");
    let funding_account = ledger_store::find_account(&mut pooled.tx(), &usd)
        .await
        .expect("read")
        .expect("account");
    let available = funding_account.posted_credits_minor.get()
        - funding_account.posted_debits_minor.get()
        - funding_account.pending_debits_minor.get();
    assert_eq!(available, 10_000 - spent);
    assert!(available >= 0);
    drop(pooled);
    assert_books(&db).await;
}
