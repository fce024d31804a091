//! Card plans on real databases: the same random sequence of
//! authorizations, clearings and reversals, with the refusals they provoke
//! (an event or an authorization recorded twice, funds short, an
//! authorization ended under a stale read), gives the same answers and the
//! same rows on SQLite and on PostgreSQL (when TERN_TEST_DATABASE_URL names
//! a server; otherwise on SQLite alone, with the books checked). And a
//! plan that fails a batch in a way its judge did not foresee fails alone.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::{CardTransactionRow, LedgerAccountRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{AuthorizationMove, LedgerWrite, Plan, PlanError, RowMove};
use tern_schema::schema::{actor_timers, card_transactions, ledger_accounts, ledger_transactions};
use tern_schema::store::cards as card_store;
use tern_schema::store::timers::TimerRow;
use tern_schema::store::{ledger as ledger_store, merchants, users};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{
    AccountId, CardId, CardTransactionKind as Kind, CardTransactionStatus as TxStatus, EventSource,
    MerchantId,
};
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;
use common::{card_row, merchant_row, migrated, user_row, Rng};

const MERCHANT: &str = "m_cards";
const CARD: &str = "card_plans";

/// The merchant, a user and an active card, with the funding accounts'
/// rows copied from `accounts` when given; answers the USD account.
async fn open_card(db: &Db, accounts: Option<&[LedgerAccountRow]>) -> Vec<LedgerAccountRow> {
    let merchant = merchant_row(&MerchantId::new(MERCHANT));
    let user = user_row("user_cards", &MerchantId::new(MERCHANT));
    let card = card_row(CARD, &MerchantId::new(MERCHANT), user.id.as_str());
    let copied = accounts.map(<[LedgerAccountRow]>::to_vec);
    let made: Result<(), LedgerError> = write_tx!(db, |tx| {
        merchants::insert(tx, &merchant).await?;
        users::insert(tx, &user).await?;
        card_store::insert(tx, &card).await?;
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
    made.expect("card");
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    let accounts = ledger_store::merchant_accounts(&mut tx, &MerchantId::new(MERCHANT))
        .await
        .expect("accounts");
    accounts
}

fn entry(description: &str, debit: &AccountId, credit: &AccountId, amount_minor: i64) -> Entry {
    let line = |account_id: &AccountId, direction| Line {
        account_id: account_id.clone(),
        direction,
        amount_minor: MinorUnits::new(amount_minor),
        currency: "USD".into(),
    };
    Entry {
        merchant_id: Some(MerchantId::new(MERCHANT)),
        settlement_key: None,
        description: description.into(),
        lines: vec![
            line(debit, Direction::Debit),
            line(credit, Direction::Credit),
        ],
    }
}

fn network() -> AccountId {
    SystemAccount::CardNetwork.account_id("USD")
}

fn row(
    step: usize,
    event: &str,
    authorization: &str,
    kind: Kind,
    amount: i64,
) -> CardTransactionRow {
    let now = utc_now();
    CardTransactionRow {
        id: format!("ctx_{step:05}"),
        card_id: CardId::new(CARD),
        merchant_id: MerchantId::new(MERCHANT),
        provider_event_id: event.into(),
        authorization_id: authorization.into(),
        kind,
        status: TxStatus::Approved,
        amount_minor: MinorUnits::new(amount),
        currency: "USD".into(),
        merchant_name: "Shop".into(),
        mcc: "5411".into(),
        channel: "online".into(),
        country: "US".into(),
        decline_reason: None,
        ledger_transaction_id: None,
        created_at: now,
        updated_at: now,
        hold_minor: MinorUnits::ZERO,
        event_source: EventSource::Provider,
    }
}

fn expiry(row_id: &str) -> TimerRow {
    TimerRow {
        id: format!("{CARD}:hold:{row_id}"),
        kind: "card".into(),
        entity_id: CARD.into(),
        due_at: utc_now(),
        payload: format!("expire_hold:{row_id}"),
        claim_token: None,
        claimed_until: None,
        attempts: 0,
        created_at: utc_now(),
        slot: 0,
    }
}

/// An authorization the sequence approved, as the card's actor knows it.
#[derive(Clone)]
struct Open {
    row_id: String,
    hold: String,
    held: i64,
    /// A hold it held before, for stale reads.
    earlier: Option<String>,
}

/// What the sequence does next, and how its actor's view changes if it is
/// written.
enum Follow {
    Opened(Open),
    Renewed(usize, Open),
    Ended(usize),
    Nothing,
}

fn next_plan(rng: &mut Rng, step: usize, open: &[Open], usd: &AccountId) -> (Plan, Follow) {
    let choice = rng.below(10);
    let ltx = |n: usize| format!("ltx_card_{step:05}_{n}");
    // Event ids from a pool, so that some arrive twice.
    let event = format!("evt_{}", rng.below(400));
    if open.is_empty() || choice < 4 {
        let authorization = format!("auth_{}", rng.below(120));
        let amount = 1 + rng.below(3_000) as i64;
        let mut approved = row(step, &event, &authorization, Kind::Authorization, amount);
        approved.hold_minor = MinorUnits::new(amount);
        approved.ledger_transaction_id = Some(ltx(0));
        let plan = Plan {
            ledger: vec![LedgerWrite::Record {
                id: ltx(0),
                entry: entry("authorization", usd, &network(), amount),
                phase: Phase::Pending,
            }],
            timers: vec![expiry(&approved.id)],
            card_transactions: vec![approved.clone()],
            ..Plan::default()
        };
        let opened = Open {
            row_id: approved.id,
            hold: ltx(0),
            held: amount,
            earlier: None,
        };
        return (plan, Follow::Opened(opened));
    }
    if choice == 4 && rng.below(2) == 0 {
        let plan = Plan {
            ledger: vec![LedgerWrite::Record {
                id: ltx(0),
                entry: entry(
                    "top-up",
                    &SystemAccount::CardAcquirer.account_id("USD"),
                    usd,
                    1_500,
                ),
                phase: Phase::Posted,
            }],
            ..Plan::default()
        };
        return (plan, Follow::Nothing);
    }
    let index = rng.below(open.len() as u64) as usize;
    let authorization = &open[index];
    let at = utc_now();
    let mut plan = Plan::default();
    // Now and then the actor read the authorization before a partial
    // reversal renewed its hold: the ledger refuses the old hold, and the
    // row's guard refuses a move from it.
    let (hold, moved_from) = match (&authorization.earlier, rng.below(6)) {
        (Some(earlier), 0) => (earlier.clone(), earlier.clone()),
        (Some(earlier), 1) => (authorization.hold.clone(), earlier.clone()),
        _ => (authorization.hold.clone(), authorization.hold.clone()),
    };
    let end = |plan: &mut Plan, status: TxStatus| {
        plan.moves.push(RowMove::Authorization(AuthorizationMove {
            id: authorization.row_id.clone(),
            hold_id: moved_from.clone(),
            status,
            ledger_transaction_id: hold.clone(),
            hold_minor: MinorUnits::ZERO,
            at,
        }));
        plan.cancels_timers
            .push(format!("{CARD}:hold:{}", authorization.row_id));
    };
    match choice {
        // A clearing of all the hold, or of part of it (the rest released).
        5 | 6 => {
            let amount = match choice {
                5 => authorization.held,
                _ => 1 + rng.below(authorization.held as u64) as i64,
            };
            let mut clearing = row(step, &event, "a", Kind::Clear, amount);
            clearing.status = TxStatus::Posted;
            if amount == authorization.held {
                plan.ledger.push(LedgerWrite::Post {
                    hold_id: hold.clone(),
                    id: ltx(0),
                });
            } else {
                plan.ledger.push(LedgerWrite::Void {
                    hold_id: hold.clone(),
                    id: ltx(0),
                });
                plan.ledger.push(LedgerWrite::Record {
                    id: ltx(1),
                    entry: entry("clearing", usd, &network(), amount),
                    phase: Phase::Posted,
                });
            }
            clearing.ledger_transaction_id = Some(ltx(0));
            end(&mut plan, TxStatus::Cleared);
            plan.card_transactions.push(clearing);
            (plan, Follow::Ended(index))
        }
        // A partial reversal: the hold voided, the rest held anew.
        7 | 8 if authorization.held > 1 => {
            let released = 1 + rng.below(authorization.held as u64 - 1) as i64;
            let remaining = authorization.held - released;
            plan.ledger.push(LedgerWrite::Void {
                hold_id: hold.clone(),
                id: ltx(0),
            });
            plan.ledger.push(LedgerWrite::Record {
                id: ltx(1),
                entry: entry("after a reversal", usd, &network(), remaining),
                phase: Phase::Pending,
            });
            plan.moves.push(RowMove::Authorization(AuthorizationMove {
                id: authorization.row_id.clone(),
                hold_id: moved_from.clone(),
                status: TxStatus::Approved,
                ledger_transaction_id: ltx(1),
                hold_minor: MinorUnits::new(remaining),
                at,
            }));
            let mut reversal = row(step, &event, "a", Kind::Reversal, released);
            reversal.status = TxStatus::Released;
            reversal.ledger_transaction_id = Some(ltx(0));
            plan.card_transactions.push(reversal);
            let renewed = Open {
                row_id: authorization.row_id.clone(),
                hold: ltx(1),
                held: remaining,
                earlier: Some(authorization.hold.clone()),
            };
            (plan, Follow::Renewed(index, renewed))
        }
        // A full reversal.
        _ => {
            plan.ledger.push(LedgerWrite::Void {
                hold_id: hold.clone(),
                id: ltx(0),
            });
            end(&mut plan, TxStatus::Reversed);
            let mut reversal = row(step, &event, "a", Kind::Reversal, authorization.held);
            reversal.status = TxStatus::Released;
            reversal.ledger_transaction_id = Some(ltx(0));
            plan.card_transactions.push(reversal);
            (plan, Follow::Ended(index))
        }
    }
}

fn answer(result: &Result<tern_schema::Written, PlanError>) -> String {
    match result {
        Ok(_) => "written".into(),
        Err(PlanError::Store(StoreError::UniqueViolation(what))) => {
            format!("taken: {}", what.split_whitespace().next().unwrap_or(""))
        }
        Err(PlanError::Store(StoreError::Conflict(_))) => "conflict".into(),
        Err(other) => other.to_string(),
    }
}

type CardFields = (String, String, String, String, i64, i64, Option<String>);

/// The rows the plans wrote, without what each database chose itself.
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
    let transactions: Vec<(String, String, Option<String>)> =
        dispatch!(tx, conn => ledger_transactions::table
            .select((
                ledger_transactions::id,
                ledger_transactions::status,
                ledger_transactions::pending_id,
            ))
            .order(ledger_transactions::id)
            .load(conn)
            .await)
        .expect("transactions");
    out.extend(transactions.iter().map(|t| format!("transaction {t:?}")));
    let cards: Vec<CardFields> = dispatch!(tx, conn => card_transactions::table
        .select((
            card_transactions::id,
            card_transactions::provider_event_id,
            card_transactions::kind,
            card_transactions::status,
            card_transactions::amount_minor,
            card_transactions::hold_minor,
            card_transactions::ledger_transaction_id,
        ))
        .order(card_transactions::id)
        .load(conn)
        .await)
    .expect("card transactions");
    out.extend(cards.iter().map(|c| format!("card {c:?}")));
    let timers: Vec<String> = dispatch!(tx, conn => actor_timers::table
        .select(actor_timers::id)
        .order(actor_timers::id)
        .load(conn)
        .await)
    .expect("timers");
    out.extend(timers.iter().map(|t| format!("timer {t}")));
    out
}

#[tokio::test]
async fn the_same_card_plans_give_the_same_answers_and_rows_on_both_backends() {
    let sqlite_database = TestDatabase::create_sqlite();
    let postgres_database = TestDatabase::create_postgres_if_configured().await;
    let mut dbs = vec![migrated(&sqlite_database).await];
    if let Some(database) = &postgres_database {
        dbs.push(migrated(database).await);
    }
    let accounts = open_card(&dbs[0], None).await;
    for db in &dbs[1..] {
        open_card(db, Some(&accounts)).await;
    }
    let usd = accounts
        .iter()
        .find(|a| a.currency == "USD")
        .map(|a| a.id.clone())
        .expect("usd");
    for db in &dbs {
        let funding = Plan {
            ledger: vec![LedgerWrite::Record {
                id: "ltx_funding".into(),
                entry: entry(
                    "fund",
                    &SystemAccount::CardAcquirer.account_id("USD"),
                    &usd,
                    8_000,
                ),
                phase: Phase::Posted,
            }],
            ..Plan::default()
        };
        db.commit(funding).await.expect("funded");
    }

    let mut rng = Rng(2_027);
    let mut open: Vec<Open> = Vec::new();
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    let mut step = 0;
    while step < 300 {
        // Now and then several plans at once, on distinct authorizations,
        // so that they share a batch.
        let group = if rng.below(3) == 0 {
            2 + rng.below(6)
        } else {
            1
        };
        let mut plans = Vec::new();
        let mut touched = std::collections::BTreeSet::new();
        for _ in 0..group {
            let (plan, follow) = next_plan(&mut rng, step, &open, &usd);
            step += 1;
            let index = match &follow {
                Follow::Renewed(index, _) | Follow::Ended(index) => Some(*index),
                _ => None,
            };
            if index.is_some_and(|index| !touched.insert(index)) {
                continue;
            }
            plans.push((plan, follow));
        }
        let mut answers: Vec<Vec<String>> = Vec::new();
        for db in &dbs {
            let written = join_all(plans.iter().map(|(plan, _)| db.commit(plan.clone()))).await;
            answers.push(written.iter().map(answer).collect());
        }
        for other in &answers[1..] {
            assert_eq!(&answers[0], other, "step {step}");
        }
        let mut ended = Vec::new();
        for ((_, follow), said) in plans.into_iter().zip(&answers[0]) {
            *tally.entry(said.clone()).or_default() += 1;
            if said != "written" {
                continue;
            }
            match follow {
                Follow::Opened(opened) => open.push(opened),
                Follow::Renewed(index, renewed) => open[index] = renewed,
                Follow::Ended(index) => ended.push(index),
                Follow::Nothing => {}
            }
        }
        ended.sort_unstable();
        for index in ended.into_iter().rev() {
            open.remove(index);
        }
    }
    for expected in [
        "written",
        "taken: card",
        "taken: authorization",
        "insufficient",
        "not pending",
        "conflict",
    ] {
        assert!(
            tally.keys().any(|said| said.contains(expected)),
            "no answer like {expected:?} in {tally:?}"
        );
    }
    let written: Vec<Vec<String>> = join_all(dbs.iter().map(rows)).await;
    for other in &written[1..] {
        assert_eq!(written[0].len(), other.len());
        for (a, b) in written[0].iter().zip(other) {
            assert_eq!(a, b);
        }
    }
    // Every open authorization's row names its hold and still has its
    // expiry; every ended one neither holds nor has a timer.
    let cards = &written[0];
    for authorization in &open {
        let shown = cards
            .iter()
            .find(|line| line.starts_with(&format!("card (\"{}\"", authorization.row_id)))
            .expect("the authorization's row");
        assert!(shown.contains(&authorization.hold), "{shown}");
        assert!(cards.contains(&format!("timer {CARD}:hold:{}", authorization.row_id)));
    }
    let timers = cards
        .iter()
        .filter(|line| line.starts_with("timer "))
        .count();
    assert_eq!(timers, open.len(), "one expiry per open authorization");
    for db in &dbs {
        let mut pooled = db.get().await.expect("conn");
        let report = ledger::check(&mut pooled.tx()).await.expect("ledger check");
        assert!(report.is_ok(), "{:?}", report.violations);
    }
}

/// What the judge cannot foresee (here a card transaction id already
/// written, which it never reads; in production a key or a row another
/// node wrote between the batch's read and its write) fails the batch's
/// statement. The batch's plans are written again without it, halved, so
/// the one plan that lost is told why and every other plan is written.
#[tokio::test]
async fn a_plan_that_loses_a_race_the_judge_did_not_see_fails_alone() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    let accounts = open_card(&db, None).await;
    let usd = accounts
        .iter()
        .find(|a| a.currency == "USD")
        .map(|a| a.id.clone())
        .expect("usd");
    let authorization = |step: usize, id: &str| {
        let mut approved = row(
            step,
            &format!("evt_race_{id}"),
            &format!("auth_race_{id}"),
            Kind::Authorization,
            10,
        );
        approved.id = id.to_owned();
        Plan {
            ledger: vec![LedgerWrite::Record {
                id: format!("ltx_{id}"),
                entry: entry(
                    "posted",
                    &SystemAccount::CardAcquirer.account_id("USD"),
                    &usd,
                    10,
                ),
                phase: Phase::Posted,
            }],
            card_transactions: vec![approved],
            ..Plan::default()
        }
    };
    db.commit(authorization(0, "ctx_taken"))
        .await
        .expect("first");
    for round in 0..3 {
        let ids: Vec<String> = (0..40)
            .map(|i| match i {
                17 => "ctx_taken".to_owned(),
                _ => format!("ctx_{round}_{i}"),
            })
            .collect();
        let plans: Vec<Plan> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let mut plan = authorization(i, id);
                // A fresh event, authorization and ledger id for the copy.
                plan.card_transactions[0].provider_event_id = format!("evt_{round}_{i}");
                plan.card_transactions[0].authorization_id = format!("auth_{round}_{i}");
                if let LedgerWrite::Record { id, .. } = &mut plan.ledger[0] {
                    *id = format!("ltx_{round}_{i}");
                }
                plan
            })
            .collect();
        let outcomes = join_all(plans.into_iter().map(|plan| db.commit(plan))).await;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match (i, outcome) {
                (17, Err(PlanError::Store(StoreError::UniqueViolation(_)))) => {}
                (17, other) => panic!("round {round}: the taken id answered {other:?}"),
                (_, Ok(_)) => {}
                (_, Err(error)) => panic!("round {round}: plan {i} failed beside it: {error}"),
            }
        }
    }
    let written = rows(&db).await;
    let recorded = written
        .iter()
        .filter(|line| line.starts_with("card ("))
        .count();
    assert_eq!(recorded, 1 + 3 * 39, "every plan but the one that lost");
}

/// The spend windows a card reloads when its actor starts saturate as the
/// actor's in-memory ones do: approvals past int64 in one window (reversed
/// ones count too) read as a huge amount, not as an overflow error that
/// would keep the card from loading at all.
#[tokio::test]
async fn spend_windows_past_int64_read_as_saturated() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    open_card(&db, None).await;
    let huge = 5_000_000_000_000_000_000;
    let made: Result<(), StoreError> = write_tx!(db, |tx| {
        for step in 0..2 {
            let event = format!("evt_huge_{step}");
            let authorization = format!("auth_huge_{step}");
            let approved = row(step, &event, &authorization, Kind::Authorization, huge);
            card_store::insert_transaction(tx, &approved).await?;
        }
        Ok(())
    });
    made.expect("approvals");
    let since = utc_now() - chrono::Duration::days(1);
    let mut pooled = db.get().await.expect("conn");
    let spent = card_store::approved_since(&mut pooled.tx(), &CardId::new(CARD), since, None)
        .await
        .expect("a sum past int64 reads");
    assert!(
        spent >= MinorUnits::new(9_000_000_000_000_000_000),
        "{spent}"
    );
}
