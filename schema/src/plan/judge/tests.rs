//! The judge, table by table: no database.

use super::*;
use crate::ledger::Line;
use crate::money::MinorUnits;
use crate::plan::{NewSettlement, TimerClaim};

const FUNDING_ID: &str = "acct_m";

fn now() -> NaiveDateTime {
    crate::types::utc_now()
}

fn world(available: i64) -> World {
    let mut world = World::default();
    world.accounts.insert(
        AccountId::new(FUNDING_ID),
        Account {
            facts: AccountFacts {
                id: AccountId::new(FUNDING_ID),
                merchant_id: Some(MerchantId::new("m")),
                kind: AccountKind::Funding,
                currency: "USD".into(),
            },
            buckets: Sums {
                posted_credits: i128::from(available),
                ..Sums::default()
            },
            exists: true,
            settled: true,
        },
    );
    world
}

fn debit(amount_minor: i64, phase: Phase, id: &str) -> Plan {
    let line = |account_id: AccountId, direction| Line {
        account_id,
        direction,
        amount_minor: MinorUnits::new(amount_minor),
        currency: "USD".into(),
    };
    Plan {
        ledger: vec![LedgerWrite::Record {
            id: id.into(),
            entry: Entry {
                merchant_id: Some(MerchantId::new("m")),
                settlement_key: None,
                description: "debit".into(),
                lines: vec![
                    line(AccountId::new(FUNDING_ID), Direction::Debit),
                    line(SystemAccount::CardPush.account_id("USD"), Direction::Credit),
                ],
            },
            phase,
        }],
        ..Plan::default()
    }
}

fn verdicts(world: &mut World, plans: Vec<Plan>) -> (Rows, Vec<String>) {
    let (rows, verdicts) = judge(world, &plans, now());
    let said = verdicts
        .iter()
        .map(|verdict| match verdict {
            Ok(_) => "ok".to_owned(),
            Err(PlanError::Ledger(LedgerError::InsufficientFunds { .. })) => "funds".into(),
            Err(PlanError::Ledger(LedgerError::NotPending { status, .. })) => {
                format!("not pending: {status}")
            }
            Err(PlanError::Store(StoreError::Conflict(_))) => "conflict".into(),
            Err(PlanError::Store(StoreError::Refused(Refusal::KeyTaken))) => "key".into(),
            Err(PlanError::TimerLost { .. }) => "timer".into(),
            Err(other) => other.to_string(),
        })
        .collect();
    (rows, said)
}

#[test]
fn a_plan_refused_for_funds_leaves_its_neighbours_their_funds() {
    let mut world = world(1_000);
    let plans = vec![
        debit(600, Phase::Pending, "t1"),
        debit(600, Phase::Pending, "t2"),
        debit(400, Phase::Posted, "t3"),
        debit(1, Phase::Posted, "t4"),
    ];
    let (rows, said) = verdicts(&mut world, plans);
    assert_eq!(said, ["ok", "funds", "ok", "funds"]);
    assert_eq!(
        rows.transactions
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["t1", "t3"]
    );
    assert_eq!(rows.entries.len(), 4);
    let moved = rows.balances[FUNDING_ID];
    assert_eq!(
        (moved.pending_debits_minor, moved.posted_debits_minor),
        (600, 400)
    );
    // The card push account did not exist: opened once, by the first
    // plan that touched it.
    assert_eq!(rows.accounts_opened.len(), 1);
}

#[test]
fn a_hold_is_resolved_once_in_a_batch_and_after_it() {
    let mut world = world(1_000);
    let post = |id: &str| Plan {
        ledger: vec![LedgerWrite::Post {
            hold_id: "h".into(),
            id: id.into(),
        }],
        ..Plan::default()
    };
    let void = Plan {
        ledger: vec![LedgerWrite::Void {
            hold_id: "h".into(),
            id: "v".into(),
        }],
        ..Plan::default()
    };
    let plans = vec![
        post("p0"),
        debit(300, Phase::Pending, "h"),
        post("p1"),
        void,
        post("p2"),
    ];
    let (rows, said) = verdicts(&mut world, plans);
    assert_eq!(
        said,
        [
            "not pending: missing",
            "ok",
            "ok",
            "not pending: posted",
            "not pending: posted"
        ]
    );
    let moved = rows.balances[FUNDING_ID];
    assert_eq!(
        (moved.pending_debits_minor, moved.posted_debits_minor),
        (0, 300)
    );
    let posting = rows.transactions.iter().find(|t| t.id == "p1");
    assert_eq!(posting.and_then(|t| t.pending_id.as_deref()), Some("h"));
}

#[test]
fn versions_keys_and_timers_are_judged_per_plan() {
    let mut world = world(10_000);
    let row = |key: &str, version| {
        let mut row = SettlementRow::pending(
            crate::models::SettlementIntent {
                merchant_id: MerchantId::new("m"),
                idempotency_key: SettlementKey::new(key),
                method: crate::vocabulary::SettlementMethod::CardPush,
                currency: "USD".into(),
                amount_minor: MinorUnits::new(10),
                asset: None,
                source: FUNDING_ID.into(),
                destination: "tok".into(),
                recipient_name: "Ada".into(),
                reference: None,
                request_id: "r".into(),
            },
            now(),
        );
        row.version = version;
        row.funding_transaction_id = Some(format!("hold_{key}_{version}"));
        row
    };
    let create = |key: &str| {
        let created = row(key, 1);
        let hold = match debit(10, Phase::Pending, "unused").ledger.remove(0) {
            LedgerWrite::Record { entry, .. } => entry,
            _ => unreachable!(),
        };
        Plan {
            new_settlements: vec![NewSettlement { row: created, hold }],
            ..Plan::default()
        }
    };
    let moving = |expected, to| Plan {
        moves: vec![RowMove::Settlement {
            row: row("a", to),
            expected_version: expected,
        }],
        ..Plan::default()
    };
    world
        .settlements
        .insert((MerchantId::new("m"), SettlementKey::new("taken")), 3);
    world.timers.insert("t".into(), Some("token".into()));
    let timer = |token: &str| Plan {
        completes_timer: Some(TimerClaim {
            timer_id: "t".into(),
            claim_token: token.into(),
        }),
        ..Plan::default()
    };
    let plans = vec![
        create("a"),
        create("a"),
        create("taken"),
        moving(1, 2),
        moving(1, 2),
        moving(2, 3),
        timer("other"),
        timer("token"),
        timer("token"),
    ];
    let (rows, said) = verdicts(&mut world, plans);
    assert_eq!(
        said,
        ["ok", "key", "key", "ok", "conflict", "ok", "timer", "ok", "timer"]
    );
    assert_eq!(rows.settlements.len(), 1);
    assert_eq!(rows.settlement_moves.len(), 2);
    assert_eq!(rows.timers_done, ["t"]);
    assert_eq!(
        world.settlements[&(MerchantId::new("m"), SettlementKey::new("a"))],
        3
    );
}

#[test]
fn only_its_own_merchant_debits_a_funding_account_and_only_once_it_is_locked() {
    let foreign = |mut plan: Plan| {
        if let LedgerWrite::Record { entry, .. } = &mut plan.ledger[0] {
            entry.merchant_id = Some(MerchantId::new("other"));
        }
        plan
    };
    let mut shared = world(1_000);
    let (rows, said) = verdicts(
        &mut shared,
        vec![
            foreign(debit(10, Phase::Pending, "t1")),
            debit(10, Phase::Pending, "t2"),
        ],
    );
    assert_eq!(said[0], format!("no ledger account {FUNDING_ID}"));
    assert_eq!(said[1], "ok");
    assert_eq!(rows.transactions.len(), 1);

    // Read without its lock (another merchant's plan named it): its
    // available balance may move before the commit, so nothing debits it.
    let mut unlocked = world(1_000);
    if let Some(account) = unlocked.accounts.get_mut(FUNDING_ID) {
        account.settled = false;
    }
    let (_, said) = verdicts(&mut unlocked, vec![debit(10, Phase::Posted, "t3")]);
    assert_eq!(said, [format!("no ledger account {FUNDING_ID}")]);
}
