//! Transfer plans on real databases. A random sequence of transfers created
//! (a key or a quote taken refuses the plan alone) and moved under their
//! versions (a stale version refuses it), sent in groups that share a
//! batch, gets the same answers on SQLite and on PostgreSQL (when
//! TERN_TEST_DATABASE_URL names a server; otherwise on SQLite alone), the
//! answers a plain sequential model of the rules gives, and leaves the same
//! rows as the model.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Duration, NaiveDate, NaiveDateTime};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::models::{IdempotencyRow, MerchantRow, QuoteRow, TransferRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{Plan, PlanError, RowMove};
use tern_schema::schema::{audit_events, idempotency_records, transfers};
use tern_schema::store::{merchants, quotes};
use tern_schema::testing::TestDatabase;
use tern_schema::vocabulary::{Asset, MerchantId, Network, QuoteId, SettlementKey, TransferId};
use tern_schema::{dispatch, idempotency, write_tx, Db, Refusal, StoreError, Written};

mod common;
use common::{migrated, Rng};

const MERCHANT: &str = "m_transfers";
const SCOPE: &str = "transfers";
const QUOTES: u64 = 25;
const KEYS: u64 = 40;
const STEPS: usize = 250;
/// A transfer's statuses, and its legs'.
const STATUSES: &str =
    "pending leg1_in_flight leg1_succeeded leg2_in_flight succeeded compensating failed";
const LEG_STATUSES: &str =
    "not_started in_flight succeeded failed reversing reversed reverse_failed";

/// A time in whole seconds, which both backends store exactly.
fn at(seconds: usize) -> NaiveDateTime {
    let noon = NaiveDate::from_ymd_opt(2026, 11, 27)
        .and_then(|day| day.and_hms_opt(12, 0, 0))
        .expect("a valid time");
    noon + Duration::seconds(seconds as i64)
}

fn quote(index: u64) -> QuoteRow {
    QuoteRow {
        id: QuoteId::new(format!("qt_{index:02}")),
        merchant_id: MerchantId::new(MERCHANT),
        send_currency: "EUR".into(),
        send_amount_minor: MinorUnits::new(10_000 + 100 * index as i64),
        receive_asset: [Asset::Usdc, Asset::Usdt][index as usize % 2],
        receive_network: Network::ALL[index as usize % Network::ALL.len()],
        rate: "1.08".into(),
        platform_fee_minor: MinorUnits::new(100),
        network_fee_minor: MinorUnits::new(231 + index as i64),
        receive_amount_minor: MinorUnits::new(10_000_000 + index as i64),
        request_id: "req".into(),
        created_at: at(0),
        expires_at: at(3_600),
    }
}

/// The merchant, its audit chain and the quotes, the same on every database.
async fn open_merchant(db: &Db) {
    let row = MerchantRow {
        id: MerchantId::new(MERCHANT),
        organization_name: "M".into(),
        status: tern_schema::vocabulary::MerchantStatus::Active,
        created_at: at(0),
        updated_at: at(0),
    };
    let made: Result<(), StoreError> = write_tx!(db, |tx| {
        merchants::insert(tx, &row).await?;
        audit::open_chain(tx, &MerchantId::new(MERCHANT)).await?;
        for index in 0..QUOTES {
            quotes::insert(tx, &quote(index)).await?;
        }
        Ok(())
    });
    made.expect("merchant and quotes");
}

fn audit_record(action: &'static str, row: &TransferRow) -> AuditRecord {
    AuditRecord {
        merchant_id: MerchantId::new(MERCHANT),
        actor: AuditActor::System,
        action,
        resource_type: "transfer",
        resource_id: row.id.to_string(),
        request_id: "req".into(),
        data: serde_json::json!({"status": row.status, "version": row.version}),
    }
}

/// A transfer's creation, as `transfer_of` makes its row, with its audit
/// record and, when `answered`, its key's answer.
fn creation(step: usize, key: &str, quote: &QuoteRow, answered: bool) -> Plan {
    let id = TransferId::new(format!("tr_{step:04}"));
    let row = TransferRow {
        leg1_key: SettlementKey::new(format!("{id}.leg1")),
        leg2_key: SettlementKey::new(format!("{id}.leg2")),
        id,
        merchant_id: MerchantId::new(MERCHANT),
        idempotency_key: key.into(),
        flow: "tern".into(),
        quote_id: quote.id.clone(),
        card_pm: "pm_card_visa".into(),
        wallet: "TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE".into(),
        send_currency: quote.send_currency.clone(),
        send_amount_minor: quote.send_amount_minor,
        receive_asset: quote.receive_asset,
        receive_network: quote.receive_network,
        receive_amount_minor: quote.receive_amount_minor,
        rate: quote.rate.clone(),
        platform_fee_minor: quote.platform_fee_minor,
        network_fee_minor: quote.network_fee_minor,
        status: tern_schema::vocabulary::TransferStatus::Pending,
        leg1_status: tern_schema::vocabulary::LegStatus::NotStarted,
        leg1_client_secret: None,
        leg1_next_action_type: None,
        leg2_status: tern_schema::vocabulary::LegStatus::NotStarted,
        failure_reason: None,
        conversion_transaction_id: None,
        compensation_attempt: 0,
        next_attempt_at: None,
        alert: None,
        alert_acknowledged_at: None,
        request_id: format!("req_{step}"),
        version: 1,
        created_at: at(step),
        updated_at: at(step),
    };
    let answer = answered.then(|| IdempotencyRow {
        created_at: at(step),
        updated_at: at(step),
        ..idempotency::answered(
            (&MerchantId::new(MERCHANT), SCOPE, key),
            &format!("digest-{key}-{step}"),
            201,
            &format!("{{\"id\":\"{}\"}}", row.id),
        )
    });
    Plan {
        audit: vec![audit_record("transfer.created", &row)],
        answer,
        new_transfers: vec![row],
        ..Plan::default()
    }
}

/// Picks one of the space-separated words.
trait Pick {
    fn pick(&mut self, words: &str) -> String;
}

impl Pick for Rng {
    fn pick(&mut self, words: &str) -> String {
        let words: Vec<&str> = words.split(' ').collect();
        words[self.below(words.len() as u64) as usize].into()
    }
}

/// The rules as a sequence of plans judged one at a time: what the store
/// must answer, and the rows it must hold.
#[derive(Default)]
struct Model {
    transfers: BTreeMap<TransferId, TransferRow>,
    answers: BTreeMap<String, IdempotencyRow>,
}

impl Model {
    /// The plan's answer, and its rows applied when it is written.
    fn judge(&mut self, plan: &Plan) -> &'static str {
        if let Some(answer) = &plan.answer {
            if self.answers.contains_key(&answer.idempotency_key) {
                return "key taken";
            }
        }
        for created in &plan.new_transfers {
            let stored = || self.transfers.values();
            if stored().any(|t| t.idempotency_key == created.idempotency_key) {
                return "key taken";
            }
            if stored().any(|t| t.quote_id == created.quote_id) {
                return "quote bound";
            }
        }
        for moved in &plan.moves {
            if let RowMove::Transfer {
                row,
                expected_version,
            } = moved
            {
                if self.transfers.get(&row.id).map(|t| t.version) != Some(*expected_version) {
                    return "conflict";
                }
            }
        }
        if let Some(answer) = &plan.answer {
            let key = answer.idempotency_key.clone();
            self.answers.insert(key, answer.clone());
        }
        for created in &plan.new_transfers {
            self.transfers.insert(created.id.clone(), created.clone());
        }
        for moved in &plan.moves {
            if let RowMove::Transfer { row, .. } = moved {
                self.transfers.insert(row.id.clone(), row.clone());
            }
        }
        "written"
    }
}

/// The next plan of the sequence: a creation (keys and quotes from small
/// pools, so that some are taken), or a move of a transfer the model holds,
/// now and then over a stale version or of a transfer that is not there.
/// A transfer moved already in the group (`moved`) is moved again only
/// now and then, over the version the group's earlier move gave it.
fn next_plan(rng: &mut Rng, step: usize, model: &Model, moved: &BTreeSet<TransferId>) -> Plan {
    let choice = rng.below(10);
    if model.transfers.is_empty() || choice < 4 {
        let key = format!("k{:02}", rng.below(KEYS));
        let quote = quote(rng.below(QUOTES));
        return creation(step, &key, &quote, rng.below(5) != 0);
    }
    let (again, fresh): (Vec<&TransferRow>, Vec<&TransferRow>) = model
        .transfers
        .values()
        .partition(|t| moved.contains(&t.id));
    let candidates = match fresh.is_empty() || (!again.is_empty() && rng.below(5) == 0) {
        true => again,
        false => fresh,
    };
    let current = candidates[rng.below(candidates.len() as u64) as usize];
    let mut next = current.clone();
    let mut expected = current.version;
    next.version += 1;
    next.updated_at = at(step);
    next.status = rng.pick(STATUSES).parse().expect("a transfer status");
    next.leg1_status = rng.pick(LEG_STATUSES).parse().expect("a leg status");
    next.leg2_status = rng.pick(LEG_STATUSES).parse().expect("a leg status");
    next.compensation_attempt += rng.below(2) as i32;
    next.next_attempt_at = (rng.below(3) != 0).then(|| at(step + 30));
    match rng.below(6) {
        0 => next.failure_reason = Some(format!("declined at {step}")),
        1 => next.conversion_transaction_id = Some(format!("ltx_conv_{step}")),
        2 => {
            next.leg1_client_secret = Some(format!("pi_secret_{step}"));
            next.leg1_next_action_type = Some("redirect_to_url".into());
        }
        3 => next.alert = Some(format!("refund failed at {step}")),
        4 if next.alert.is_some() => next.alert_acknowledged_at = Some(at(step)),
        _ => next.leg1_client_secret = None,
    }
    match choice {
        // Read before an earlier move of the row, or ahead of it.
        8 => match rng.below(3) {
            0 => expected += 1,
            _ => expected -= 1 + rng.below(2) as i64,
        },
        // A transfer that is not there.
        9 if rng.below(3) == 0 => next.id = TransferId::new(format!("tr_gone_{step:04}")),
        _ => {}
    }
    Plan {
        audit: vec![audit_record("transfer.status_changed", &next)],
        moves: vec![RowMove::Transfer {
            row: next,
            expected_version: expected,
        }],
        ..Plan::default()
    }
}

fn describe(plan: &Plan) -> String {
    let mut parts = Vec::new();
    for t in &plan.new_transfers {
        let answered = if plan.answer.is_some() {
            ", answer"
        } else {
            ""
        };
        parts.push(format!(
            "create {} key {} quote {}{answered}",
            t.id, t.idempotency_key, t.quote_id
        ));
    }
    for moved in &plan.moves {
        if let RowMove::Transfer {
            row,
            expected_version,
        } = moved
        {
            parts.push(format!(
                "move {} over v{expected_version} to v{} ({})",
                row.id, row.version, row.status
            ));
        }
    }
    parts.join("; ")
}

/// An answer as the callers tell answers apart.
fn answer(result: &Result<Written, PlanError>) -> String {
    match result {
        Ok(Written {
            events_wait: false, ..
        }) => "written".into(),
        Ok(Written {
            events_wait: true, ..
        }) => "written, events wait".into(),
        Err(PlanError::Store(StoreError::Refused(Refusal::KeyTaken))) => "key taken".into(),
        Err(PlanError::Store(StoreError::UniqueViolation(_))) => "quote bound".into(),
        Err(PlanError::Store(StoreError::Conflict(_))) => "conflict".into(),
        Err(other) => other.to_string(),
    }
}

/// Every transfer and key's answer, whole, and the audit events' sequence.
async fn rows(db: &Db) -> (Vec<String>, Vec<String>) {
    let mut pooled = db.get().await.expect("conn");
    let tx = &mut pooled.tx();
    let stored: Vec<TransferRow> = dispatch!(tx, conn => transfers::table
        .select(TransferRow::as_select())
        .order(transfers::id)
        .load(conn)
        .await)
    .expect("transfers");
    let answers: Vec<IdempotencyRow> = dispatch!(tx, conn => idempotency_records::table
        .select(IdempotencyRow::as_select())
        .order(idempotency_records::idempotency_key)
        .load(conn)
        .await)
    .expect("answers");
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
    let mut out: Vec<String> = stored.iter().map(|t| format!("{t:?}")).collect();
    out.extend(answers.iter().map(|a| format!("{a:?}")));
    (out, events.iter().map(|e| format!("{e:?}")).collect())
}

#[tokio::test]
async fn transfer_plans_give_the_same_answers_and_rows_on_both_backends() {
    let sqlite_database = TestDatabase::create_sqlite();
    let postgres_database = TestDatabase::create_postgres_if_configured().await;
    let mut dbs = vec![("sqlite", migrated(&sqlite_database).await)];
    if let Some(database) = &postgres_database {
        dbs.push(("postgres", migrated(database).await));
    }
    for (_, db) in &dbs {
        open_merchant(db).await;
    }

    let mut rng = Rng(0x7e27_2026);
    let mut model = Model::default();
    let mut tally = BTreeMap::<&str, usize>::new();
    // Groups where one transfer was moved twice, both written; and where
    // distinct transfers were moved, several written.
    let (mut twice, mut several) = (0, 0);
    let mut step = 0;
    while step < STEPS {
        let group = 1 + rng.below(6);
        let mut plans = Vec::new();
        let mut expected = Vec::new();
        let mut moved = BTreeSet::new();
        for _ in 0..group {
            let plan = next_plan(&mut rng, step, &model, &moved);
            step += 1;
            for change in &plan.moves {
                if let RowMove::Transfer { row, .. } = change {
                    moved.insert(row.id.clone());
                }
            }
            expected.push(model.judge(&plan));
            plans.push(plan);
        }
        let mut answers: Vec<Vec<String>> = Vec::new();
        for (_, db) in &dbs {
            let written = join_all(plans.iter().map(|plan| db.commit(plan.clone()))).await;
            answers.push(written.iter().map(answer).collect());
        }
        let described: Vec<String> = plans.iter().map(describe).collect();
        for ((name, _), said) in dbs.iter().zip(&answers).skip(1) {
            assert_eq!(
                &answers[0], said,
                "sqlite and {name} disagree at step {step} on {described:#?}"
            );
        }
        assert_eq!(
            answers[0], expected,
            "a verdict differs from the model at step {step} on {described:#?}"
        );
        let mut moves_written = BTreeMap::<&str, usize>::new();
        for (plan, said) in plans.iter().zip(&expected) {
            *tally.entry(said).or_default() += 1;
            for change in &plan.moves {
                if let (RowMove::Transfer { row, .. }, &"written") = (change, said) {
                    *moves_written.entry(row.id.as_str()).or_default() += 1;
                }
            }
        }
        twice += usize::from(moves_written.values().any(|n| *n > 1));
        several += usize::from(moves_written.len() > 1);
    }
    // The sequence met the refusals it was made to meet, and the paths
    // that write a batch's moves.
    for said in ["written", "key taken", "quote bound", "conflict"] {
        assert!(tally.contains_key(said), "no {said:?} in {tally:?}");
    }
    assert!(tally.len() == 4, "unexpected answers in {tally:?}");
    assert!(twice > 0 && several > 0, "twice {twice}, several {several}");
    println!("answers {tally:?}; groups moving a transfer twice {twice}, several {several}");

    // Row by row, the backends alike, and as the model has them.
    let dumps = join_all(dbs.iter().map(|(_, db)| rows(db))).await;
    let (first, first_events) = &dumps[0];
    for ((name, _), (stored, events)) in dbs.iter().zip(&dumps).skip(1) {
        assert_eq!(first.len(), stored.len(), "{name}: rows");
        assert_eq!(first_events.len(), events.len(), "{name}: audit events");
        let theirs = stored.iter().chain(events);
        for (a, b) in first.iter().chain(first_events).zip(theirs) {
            assert_eq!(a, b, "sqlite and {name} hold different rows");
        }
    }
    let mut modelled: Vec<String> = model.transfers.values().map(|t| format!("{t:?}")).collect();
    modelled.extend(model.answers.values().map(|a| format!("{a:?}")));
    assert_eq!(first.len(), modelled.len(), "rows");
    for (want, got) in modelled.iter().zip(first) {
        assert_eq!(want, got, "a row differs from the model");
    }
    assert_eq!(
        first_events.len(),
        tally["written"],
        "an audit event per plan written"
    );
}
