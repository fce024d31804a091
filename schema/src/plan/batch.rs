//! Writing a batch of plans with set-based statements.
//!
//! A batch reads what its plans expect, one statement per table, judges
//! every plan in memory (see [`super::judge`]), and
//! writes the accepted plans' rows with one statement per table and kind of
//! write: a multi-row INSERT per table, one DELETE for the timers they
//! complete and one for those they cancel, one UPDATE per account for the
//! balances. Settlement and transfer rows moved under their version are
//! one statement per table on PostgreSQL; authorizations' rows one
//! statement each, pipelined; every count is checked. A refused plan writes
//! nothing and never fails its neighbours. The card part of a batch lives
//! in [`super::cards`].
//!
//! On SQLite the committer is the one writer, so what it read holds until
//! it commits. On PostgreSQL, where other nodes write too, what a judgement
//! rests on is locked `FOR UPDATE` where a lost race would be wrong rather
//! than late: merchants' ledger accounts (their available balance decides
//! a debit) and the timers completed (a claim passes between nodes). A
//! settlement's or transfer's row is not locked: the UPDATE under its
//! version is the guard, and another node having moved it, or having
//! inserted a key between the read and the insert, fails the batch, whose
//! writers are told and try again.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Text};
use diesel_async::RunQueryDsl;

use super::cards;
use super::judge::{self, Account, AnswerKey, Hold, Rows, SettlementRef, Sums, World};
use super::moves::{SettlementMoves, TransferMoves};
use super::statements::ROWS_PER_INSERT;
use super::{LedgerWrite, Plan, PlanError, RowMove, Written};
use crate::balances::Buckets;
use crate::db::{Conn, Tx};
use crate::known::AccountFacts;
use crate::ledger::SystemAccount;
use crate::models::{LedgerAccountRow, LedgerEntryRow};
use crate::schema::{
    actor_timers, cluster_slots, idempotency_records, ledger_accounts, ledger_entries,
    ledger_transactions, settlements, transfers, webhook_endpoints, webhook_events,
};
use crate::store::ledger::Bucket;
use crate::store::transfers as transfer_store;
use crate::store::{ledger as ledger_store, settlements as settlement_store};
use crate::types::utc_now;
use crate::vocabulary::{AccountId, SettlementKey, TransferId};
use crate::vocabulary::{LedgerStatus, MerchantId, QuoteId};
use crate::{audit, StoreError, StoreResult};

/// Writes `plans` in the open transaction of `tx`; answers each plan's
/// verdict. `Err` means a statement failed and the batch must roll back.
pub(crate) async fn write(
    tx: &mut Tx<'_>,
    plans: &[Plan],
) -> StoreResult<Vec<Result<Written, PlanError>>> {
    if plans.is_empty() {
        return Ok(Vec::new());
    }
    // The reads name a batch's rows in arrays: a plan cached for one array
    // (PostgreSQL's generic plan, made while a table was small) may scan
    // the whole table for the next. They are planned each time instead.
    if tx.pipelined_writes() {
        tx.execute_batch_now("SET LOCAL plan_cache_mode = force_custom_plan")
            .await?;
    }
    let mut world = read(tx, plans).await?;
    if tx.pipelined_writes() {
        tx.send_batch_statement("SET LOCAL plan_cache_mode TO DEFAULT")
            .await?;
    }
    let (rows, mut verdicts) = judge::judge(&mut world, plans, utc_now());
    let rearmed = write_rows(tx, rows).await?;
    for (index, count) in rearmed {
        if let Some(Ok(written)) = verdicts.get_mut(index) {
            written.rearmed = count;
        }
    }
    Ok(verdicts)
}

/// The versions of settlements named by (merchant, key) pairs, on
/// PostgreSQL.
const SETTLEMENT_VERSIONS: &str = "SELECT s.merchant_id, s.idempotency_key, s.version \
     FROM settlements AS s JOIN unnest($1::text[], $2::text[]) AS k (merchant_id, idempotency_key) \
     ON s.merchant_id = k.merchant_id AND s.idempotency_key = k.idempotency_key";

#[derive(QueryableByName)]
struct Versioned {
    #[diesel(sql_type = Text)]
    merchant_id: MerchantId,
    #[diesel(sql_type = Text)]
    idempotency_key: SettlementKey,
    #[diesel(sql_type = BigInt)]
    version: i64,
}

/// Everything the plans expect, read once per table.
async fn read(tx: &mut Tx<'_>, plans: &[Plan]) -> StoreResult<World> {
    let mut world = World::default();
    let mut timer_ids = Vec::new();
    let mut settlement_keys = Vec::new();
    let mut settlement_merchants = Vec::new();
    let mut settlement_pairs: Vec<SettlementRef> = Vec::new();
    let mut transfer_ids = Vec::new();
    let mut quote_ids = Vec::new();
    let mut transfer_keys = Vec::new();
    let mut transfer_merchants = Vec::new();
    let mut answer_keys = Vec::new();
    let mut answer_merchants = Vec::new();
    let mut answer_scopes = Vec::new();
    let mut hold_ids = Vec::new();
    let mut account_ids = Vec::new();
    // (account, merchant): a debit by an entry of that merchant, whose
    // account is locked if it is that merchant's.
    let mut debited: Vec<(AccountId, MerchantId)> = Vec::new();
    let mut merchants = Vec::new();
    let mut slots: Vec<i32> = plans
        .iter()
        .filter_map(|p| p.fence.map(|f| f.slot))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    // The slots first: a claim by another node waits for this batch to
    // commit (its UPDATE conflicts with FOR SHARE), and a batch after the
    // claim reads the new epoch, so a former owner's plans write nothing.
    if !slots.is_empty() {
        let found: Vec<(i32, i64)> = load!(
            tx,
            (cluster_slots::table
                .filter(cluster_slots::slot.eq_any(&slots))
                .order(cluster_slots::slot)
                .select((cluster_slots::slot, cluster_slots::epoch))),
            shared
        )?;
        world.slots = found.into_iter().collect();
    }
    for plan in plans {
        timer_ids.extend(plan.completes_timer.iter().map(|c| c.timer_id.clone()));
        timer_ids.extend(plan.timers.iter().map(|t| t.id.clone()));
        for created in &plan.new_settlements {
            settlement_keys.push(created.row.idempotency_key.clone());
            settlement_merchants.push(created.row.merchant_id.clone());
            settlement_pairs.push((
                created.row.merchant_id.clone(),
                created.row.idempotency_key.clone(),
            ));
            account_ids.extend(created.hold.lines.iter().map(|l| l.account_id.clone()));
            debited.extend(debits(&created.hold));
        }
        for moved in &plan.moves {
            match moved {
                RowMove::Settlement { row, .. } => {
                    settlement_keys.push(row.idempotency_key.clone());
                    settlement_merchants.push(row.merchant_id.clone());
                    settlement_pairs.push((row.merchant_id.clone(), row.idempotency_key.clone()));
                }
                RowMove::Transfer { row, .. } => transfer_ids.push(row.id.clone()),
                // Read with the card rows (`cards::read`).
                RowMove::Authorization(_) => {}
                // Written as one statement each, not read ahead.
                RowMove::Card { .. } => {}
            }
        }
        for created in &plan.new_transfers {
            quote_ids.push(created.quote_id.clone());
            transfer_keys.push(created.idempotency_key.clone());
            transfer_merchants.push(created.merchant_id.clone());
        }
        if let Some(answer) = &plan.answer {
            answer_keys.push(answer.idempotency_key.clone());
            answer_merchants.push(answer.merchant_id.clone());
            answer_scopes.push(answer.scope.clone());
        }
        account_ids.extend(plan.funding_source.iter().map(|s| s.account_id.clone()));
        for write in &plan.ledger {
            match write {
                LedgerWrite::Record { entry, .. } => {
                    account_ids.extend(entry.lines.iter().map(|l| l.account_id.clone()));
                    debited.extend(debits(entry));
                }
                LedgerWrite::Post { hold_id, .. } | LedgerWrite::Void { hold_id, .. } => {
                    hold_ids.push(hold_id.clone())
                }
            }
        }
        merchants.extend(
            <[_]>::first(&plan.events)
                .map(|e: &crate::models::WebhookEventRow| e.merchant_id.clone()),
        );
    }
    settlement_pairs.sort();
    settlement_pairs.dedup();
    transfer_ids.sort();
    transfer_ids.dedup();
    settlement_keys.sort();
    settlement_keys.dedup();
    quote_ids.sort();
    quote_ids.dedup();
    for ids in [
        &mut timer_ids,
        &mut transfer_keys,
        &mut answer_keys,
        &mut answer_scopes,
        &mut hold_ids,
    ] {
        ids.sort();
        ids.dedup();
    }
    for ids in [
        &mut settlement_merchants,
        &mut transfer_merchants,
        &mut answer_merchants,
        &mut merchants,
    ] {
        ids.sort();
        ids.dedup();
    }

    // Locks first (merchants' accounts, then timers, each in id order),
    // then the rows and keys: a plan racing one on another node for the
    // same merchant waits here for that node's commit, and then reads the
    // key it took, instead of failing its batch at the insert.
    if !hold_ids.is_empty() {
        read_holds(tx, &hold_ids, &mut world).await?;
        for hold in world.holds.values() {
            account_ids.extend(hold.lines.iter().map(|l| l.account_id.clone()));
        }
    }
    account_ids.sort();
    account_ids.dedup();
    debited.sort();
    debited.dedup();
    if !account_ids.is_empty() {
        read_accounts(tx, &account_ids, &debited, &mut world).await?;
    }
    if !timer_ids.is_empty() {
        let found: Vec<(String, Option<String>)> = load!(
            tx,
            (actor_timers::table
                .filter(actor_timers::id.eq_any(&timer_ids))
                .order(actor_timers::id)
                .select((actor_timers::id, actor_timers::claim_token))),
            locked
        )?;
        world.timers = found.into_iter().collect();
    }
    if !settlement_keys.is_empty() {
        let found: Vec<(MerchantId, SettlementKey, i64)> = match tx.parts() {
            // One index lookup per (merchant, key) pair: PostgreSQL 15 reads
            // a merchant's whole range for two arrays over the two columns.
            (Conn::Pg(inner), behind) => {
                let (merchants, keys): (Vec<&str>, Vec<&str>) = settlement_pairs
                    .iter()
                    .map(|(m, k)| (m.as_str(), k.as_str()))
                    .unzip();
                let rows: Vec<Versioned> = behind
                    .drive(async {
                        let conn = inner;
                        diesel::sql_query(SETTLEMENT_VERSIONS)
                            .bind::<Array<Text>, _>(&merchants)
                            .bind::<Array<Text>, _>(&keys)
                            .load(conn)
                            .await
                    })
                    .await?;
                rows.into_iter()
                    .map(|row| (row.merchant_id, row.idempotency_key, row.version))
                    .collect()
            }
            (Conn::Sqlite(inner), _) => {
                settlements::table
                    .filter(settlements::idempotency_key.eq_any(&settlement_keys))
                    .filter(settlements::merchant_id.eq_any(&settlement_merchants))
                    .select((
                        settlements::merchant_id,
                        settlements::idempotency_key,
                        settlements::version,
                    ))
                    .load(&mut **inner)
                    .await?
            }
        };
        world.settlements = found
            .into_iter()
            .map(|(merchant, key, version)| -> (SettlementRef, i64) { ((merchant, key), version) })
            .collect();
    }
    if !transfer_ids.is_empty() {
        let found: Vec<(TransferId, i64)> = load!(
            tx,
            (transfers::table
                .filter(transfers::id.eq_any(&transfer_ids))
                .select((transfers::id, transfers::version)))
        )?;
        world.transfers = found.into_iter().collect();
    }
    if !quote_ids.is_empty() {
        // A transfer's creation is rare beside its moves: two small reads,
        // each exact over its unique index, kept to the batch's pairs.
        let bound: Vec<QuoteId> = load!(
            tx,
            (transfers::table
                .filter(transfers::quote_id.eq_any(&quote_ids))
                .select(transfers::quote_id))
        )?;
        world.bound_quotes = bound.into_iter().collect();
        let keys: Vec<(MerchantId, String)> = load!(
            tx,
            (transfers::table
                .filter(transfers::merchant_id.eq_any(&transfer_merchants))
                .filter(transfers::idempotency_key.eq_any(&transfer_keys))
                .select((transfers::merchant_id, transfers::idempotency_key)))
        )?;
        world.transfer_keys = keys.into_iter().collect();
    }
    if !answer_keys.is_empty() {
        let found: Vec<(MerchantId, String, String)> = load!(
            tx,
            (idempotency_records::table
                .filter(idempotency_records::merchant_id.eq_any(&answer_merchants))
                .filter(idempotency_records::scope.eq_any(&answer_scopes))
                .filter(idempotency_records::idempotency_key.eq_any(&answer_keys))
                .select((
                    idempotency_records::merchant_id,
                    idempotency_records::scope,
                    idempotency_records::idempotency_key,
                )))
        )?;
        world.answers = found.into_iter().collect::<HashSet<AnswerKey>>();
    }
    if !merchants.is_empty() {
        let found: Vec<MerchantId> = load!(
            tx,
            (webhook_endpoints::table
                .filter(webhook_endpoints::merchant_id.eq_any(&merchants))
                .select(webhook_endpoints::merchant_id))
        )?;
        world.endpoints = found.into_iter().collect();
    }
    world.cards = cards::read(tx, plans).await?;
    Ok(world)
}

/// The holds the plans post or void: their rows, how they were resolved
/// if they were, and their lines (remembered by the committer, or read).
async fn read_holds(tx: &mut Tx<'_>, hold_ids: &[String], world: &mut World) -> StoreResult<()> {
    type HoldFields = (
        String,
        LedgerStatus,
        Option<MerchantId>,
        Option<SettlementKey>,
        String,
    );
    let found: Vec<HoldFields> = load!(
        tx,
        (ledger_transactions::table
            .filter(ledger_transactions::id.eq_any(hold_ids))
            .select((
                ledger_transactions::id,
                ledger_transactions::status,
                ledger_transactions::merchant_id,
                ledger_transactions::settlement_key,
                ledger_transactions::description,
            )))
    )?;
    let resolved: Vec<(Option<String>, LedgerStatus)> = load!(
        tx,
        (ledger_transactions::table
            .filter(ledger_transactions::pending_id.eq_any(hold_ids))
            .select((ledger_transactions::pending_id, ledger_transactions::status)))
    )?;
    let mut unknown_lines = Vec::new();
    for (id, ..) in &found {
        if tx.known().and_then(|known| known.lines(id)).is_none() {
            unknown_lines.push(id.clone());
        }
    }
    let mut lines: Vec<LedgerEntryRow> = Vec::new();
    if !unknown_lines.is_empty() {
        lines = load!(
            tx,
            (ledger_entries::table
                .filter(ledger_entries::transaction_id.eq_any(&unknown_lines))
                .select(LedgerEntryRow::as_select()))
        )?;
    }
    for (id, status, merchant_id, settlement_key, description) in found {
        let hold_lines = match tx.known().and_then(|known| known.lines(&id)) {
            Some(known) => known,
            None => {
                let mut of_hold: Vec<LedgerEntryRow> = lines
                    .iter()
                    .filter(|line| line.transaction_id == id)
                    .cloned()
                    .collect();
                of_hold.sort_by(|a, b| a.id.cmp(&b.id));
                let of_hold: crate::known::Lines = Arc::from(of_hold);
                if let Some(known) = tx.known() {
                    known.learn_lines(&id, of_hold.clone());
                }
                of_hold
            }
        };
        let how = resolved
            .iter()
            .find(|(pending, _)| pending.as_deref() == Some(id.as_str()))
            .map(|(_, how)| *how);
        world.holds.insert(
            id,
            Hold {
                merchant_id,
                settlement_key,
                description,
                status,
                resolved: how,
                lines: hold_lines,
            },
        );
    }
    Ok(())
}

/// The (account, merchant) pairs of an entry's debits, when the entry is
/// a merchant's.
fn debits(entry: &crate::ledger::Entry) -> impl Iterator<Item = (AccountId, MerchantId)> + '_ {
    entry
        .lines
        .iter()
        .filter(|line| line.direction == crate::ledger::Direction::Debit)
        .filter(|line| SystemAccount::parse_id(line.account_id.as_str()).is_none())
        .filter_map(|line| {
            let merchant = entry.merchant_id.clone()?;
            Some((line.account_id.clone(), merchant))
        })
}

/// The accounts the plans move. On PostgreSQL a merchant's account that
/// an entry of that merchant debits is read `FOR UPDATE`, in id order, so
/// its available balance is exact until the commit; every other account
/// (a system account, in nearly every batch of every node; an account a
/// plan only credits; one another merchant's plan names) is read without
/// a lock, which the judge knows: only room is judged on it, and a debit
/// of a funding account not locked is refused. On SQLite, the one writer,
/// every read is exact.
async fn read_accounts(
    tx: &mut Tx<'_>,
    ids: &[AccountId],
    debited: &[(AccountId, MerchantId)],
    world: &mut World,
) -> StoreResult<()> {
    let mut found: Vec<(LedgerAccountRow, bool)> = Vec::new();
    if tx.pipelined_writes() && !debited.is_empty() {
        let (accounts, merchants): (Vec<&str>, Vec<&str>) = debited
            .iter()
            .map(|(account, merchant)| (account.as_str(), merchant.as_str()))
            .unzip();
        let locked: Vec<LedgerAccountRow> = load!(
            tx,
            (ledger_accounts::table
                .filter(ledger_accounts::id.eq_any(&accounts))
                .filter(ledger_accounts::merchant_id.eq_any(&merchants))
                .order(ledger_accounts::id)
                .select(LedgerAccountRow::as_select())),
            locked
        )?;
        found.extend(locked.into_iter().map(|row| (row, true)));
    }
    let rest: Vec<AccountId> = ids
        .iter()
        .filter(|id| !found.iter().any(|(row, _)| row.id == **id))
        .cloned()
        .collect();
    if !rest.is_empty() {
        let exact = !tx.pipelined_writes();
        let plain: Vec<LedgerAccountRow> = load!(
            tx,
            (ledger_accounts::table
                .filter(ledger_accounts::id.eq_any(&rest))
                .select(LedgerAccountRow::as_select()))
        )?;
        found.extend(plain.into_iter().map(|row| (row, exact)));
    }
    for (row, settled) in found {
        let facts = AccountFacts::from(&row);
        if let Some(known) = tx.known() {
            known.learn_account(facts.clone());
        }
        world.accounts.insert(
            row.id.clone(),
            Account {
                facts,
                buckets: Sums::from(Buckets::from(&row)),
                exists: true,
                settled,
            },
        );
    }
    Ok(())
}

/// Writes the accepted plans' rows, in an order that satisfies the
/// foreign keys; on PostgreSQL waits for the pipelined moves' answers.
async fn write_rows(tx: &mut Tx<'_>, rows: Rows) -> StoreResult<BTreeMap<usize, usize>> {
    let Rows {
        timers_done,
        timers_cancelled,
        accounts_opened,
        settlements: new_settlements,
        transfers: new_transfers,
        answers,
        transactions,
        entries,
        settlement_moves,
        transfer_moves,
        balances,
        timers,
        events,
        audit: records,
        holds,
        cards: card_rows,
        row_writes,
    } = rows;
    if !timers_done.is_empty() {
        let deleted = crate::dispatch!(tx, conn => diesel::delete(
                actor_timers::table.filter(actor_timers::id.eq_any(&timers_done)),
            )
            .execute(conn)
            .await)?;
        if deleted != timers_done.len() {
            return Err(StoreError::Conflict(format!(
                "completing timers: {deleted} of {} deleted",
                timers_done.len()
            )));
        }
    }
    if !timers_cancelled.is_empty() {
        crate::dispatch!(tx, conn => diesel::delete(
                actor_timers::table.filter(actor_timers::id.eq_any(&timers_cancelled)),
            )
            .execute(conn)
            .await)?;
    }
    for account in &accounts_opened {
        ledger_store::insert_account_if_absent(tx, account).await?;
    }
    insert_rows!(tx, transfers::table, new_transfers, "transfers")?;
    insert_rows!(tx, settlements::table, new_settlements, "settlements")?;
    insert_rows!(
        tx,
        idempotency_records::table,
        answers,
        "idempotency records"
    )?;
    insert_rows!(
        tx,
        ledger_transactions::table,
        transactions,
        "ledger transactions"
    )?;
    insert_rows!(tx, ledger_entries::table, entries, "ledger entries")?;
    // In key order (stable: a row moved twice keeps its moves' order), the
    // order another node's batch meets the same rows in.
    let mut settlement_moves = settlement_moves;
    settlement_moves.sort_by(|(a, _), (b, _)| {
        (&a.merchant_id, &a.idempotency_key).cmp(&(&b.merchant_id, &b.idempotency_key))
    });
    let mut transfer_moves = transfer_moves;
    transfer_moves.sort_by(|(a, _), (b, _)| a.id.cmp(&b.id));
    write_settlement_moves(tx, &settlement_moves).await?;
    write_transfer_moves(tx, &transfer_moves).await?;
    // On PostgreSQL the moves join the batch's others, written once per
    // account in id order just before the commit: a system account's row,
    // in every node's batches, stays unlocked until then. SQLite's one
    // writer applies them now.
    match tx.balances() {
        Some(batch) => {
            for (account_id, moves) in balances {
                for (bucket, amount) in [
                    (Bucket::PostedDebits, moves.posted_debits_minor),
                    (Bucket::PostedCredits, moves.posted_credits_minor),
                    (Bucket::PendingDebits, moves.pending_debits_minor),
                    (Bucket::PendingCredits, moves.pending_credits_minor),
                ] {
                    if amount != 0 {
                        batch.add(&account_id, bucket, amount)?;
                    }
                }
            }
        }
        None => {
            for (account_id, moves) in balances {
                ledger_store::apply_moves(tx, &account_id, moves).await?;
            }
        }
    }
    cards::write(tx, card_rows).await?;
    insert_rows!(tx, actor_timers::table, timers, "timers")?;
    insert_rows!(tx, webhook_events::table, events, "webhook events")?;
    for record in records {
        audit::append(tx, record).await?;
    }
    let rearmed = super::rows::write(tx, row_writes).await?;
    tx.await_writes().await?;
    if let Some(known) = tx.known() {
        for (hold_id, lines) in holds {
            known.learn_lines(&hold_id, lines);
        }
    }
    Ok(rearmed)
}

/// Moved settlement rows under their versions: one statement per chunk on
/// PostgreSQL, one per row on SQLite (where a statement costs no round
/// trip) or when a batch moves one row twice.
async fn write_settlement_moves(
    tx: &mut Tx<'_>,
    moves: &[(crate::models::SettlementRow, i64)],
) -> StoreResult<()> {
    let mut keys: Vec<(&str, &str)> = moves
        .iter()
        .map(|(row, _)| (row.merchant_id.as_str(), row.idempotency_key.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    if let (Conn::Pg(conn), behind) = tx.parts() {
        if keys.len() == moves.len() {
            for chunk in moves.chunks(ROWS_PER_INSERT) {
                let changed = behind.drive(SettlementMoves(chunk).execute(conn)).await?;
                if changed != chunk.len() {
                    return Err(StoreError::Conflict(format!(
                        "settlement moves: {changed} of {} rows at their versions",
                        chunk.len()
                    )));
                }
            }
            return Ok(());
        }
    }
    for (row, expected_version) in moves {
        settlement_store::update_at_version(tx, row, *expected_version).await?;
    }
    Ok(())
}

/// Moved transfer rows under their versions, as settlements' are.
async fn write_transfer_moves(
    tx: &mut Tx<'_>,
    moves: &[(crate::models::TransferRow, i64)],
) -> StoreResult<()> {
    let mut ids: Vec<&str> = moves.iter().map(|(row, _)| row.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    if let (Conn::Pg(conn), behind) = tx.parts() {
        if ids.len() == moves.len() {
            for chunk in moves.chunks(ROWS_PER_INSERT) {
                let changed = behind.drive(TransferMoves(chunk).execute(conn)).await?;
                if changed != chunk.len() {
                    return Err(StoreError::Conflict(format!(
                        "transfer moves: {changed} of {} rows at their versions",
                        chunk.len()
                    )));
                }
            }
            return Ok(());
        }
    }
    for (row, expected_version) in moves {
        transfer_store::update_at_version(tx, row, *expected_version).await?;
    }
    Ok(())
}
