//! Judging a batch of plans, in memory.
//!
//! The batch's reads (see [`super::batch`]) give a [`World`]: the rows the
//! plans expect, as they stand (locked on PostgreSQL, and behind the one
//! writer on SQLite). Each plan is then judged alone, in order, against the
//! world plus the plans accepted before it: a plan refused for its version,
//! its key, its timer or its funds changes nothing, and the next plan is
//! judged as if it had never been. The rows of the accepted plans are
//! gathered per table, for the batch to write in one statement each.
//!
//! Nothing here knows a backend; the same plans give the same verdicts and
//! the same rows on SQLite and on PostgreSQL.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use chrono::NaiveDateTime;

use super::cards::{CardDraft, CardRows, Cards};
use super::{LedgerWrite, Plan, PlanError, RowMove, RowWrite, Written};
use crate::audit::AuditRecord;
use crate::balances::Moves;
pub(crate) use crate::balances::Sums;
use crate::known::{AccountFacts, Lines};
use crate::ledger::{self, Direction, Entry, LedgerError, Phase, SystemAccount};
use crate::models::{
    IdempotencyRow, LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow, SettlementRow,
    TransferRow, WebhookEventRow,
};
use crate::money::MinorUnits;
use crate::store::ledger::Bucket;
use crate::store::timers::TimerRow;
use crate::store::webhooks::{PENDING, SKIPPED};
use crate::vocabulary::{
    AccountId, AccountKind, LedgerStatus, MerchantId, QuoteId, SettlementKey, TransferId,
};
use crate::{Refusal, StoreError};

/// A settlement's key: (merchant id, Idempotency-Key).
pub(crate) type SettlementRef = (MerchantId, SettlementKey);
/// An Idempotency-Key record's key: (merchant id, scope, key).
pub(crate) type AnswerKey = (MerchantId, String, String);

/// A hold as read, or as recorded earlier in the batch.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    pub merchant_id: Option<MerchantId>,
    pub settlement_key: Option<SettlementKey>,
    pub description: String,
    /// `pending` for a hold; `posted` or `voided` for a row edited in
    /// place before migration 000015.
    pub status: LedgerStatus,
    /// How it was resolved (`posted`, `voided`), if it was.
    pub resolved: Option<LedgerStatus>,
    pub lines: Lines,
}

/// An account as read, with the batch's moves so far.
#[derive(Clone, Debug)]
pub(crate) struct Account {
    pub facts: AccountFacts,
    pub buckets: Sums,
    /// `false` for a system account the batch opens.
    pub exists: bool,
    /// Whether its available balance holds until the commit: read under a
    /// lock on PostgreSQL (only a funding account an entry of its own
    /// merchant debits), always on SQLite (one writer).
    pub settled: bool,
}

/// What the plans of a batch find in the database.
#[derive(Debug, Default)]
pub(crate) struct World {
    /// The epochs of the slots the plans are fenced by.
    pub slots: HashMap<i32, i64>,
    /// Timers by id, with their current claim token.
    pub timers: HashMap<String, Option<String>>,
    /// Settlement versions by key.
    pub settlements: HashMap<SettlementRef, i64>,
    pub transfers: HashMap<TransferId, i64>,
    /// Quotes bound to a transfer.
    pub bound_quotes: HashSet<QuoteId>,
    /// Transfers' (merchant, Idempotency-Key) pairs.
    pub transfer_keys: HashSet<(MerchantId, String)>,
    pub answers: HashSet<AnswerKey>,
    pub holds: HashMap<String, Hold>,
    /// Accounts by id; an id read and not found is absent.
    pub accounts: HashMap<AccountId, Account>,
    /// Merchants with a webhook endpoint.
    pub endpoints: HashSet<MerchantId>,
    pub cards: Cards,
}

/// The rows of a batch's accepted plans, per table.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    pub timers_done: Vec<String>,
    pub timers_cancelled: Vec<String>,
    pub accounts_opened: Vec<LedgerAccountRow>,
    pub settlements: Vec<SettlementRow>,
    pub transfers: Vec<TransferRow>,
    pub answers: Vec<IdempotencyRow>,
    pub transactions: Vec<LedgerTransactionRow>,
    pub entries: Vec<LedgerEntryRow>,
    pub settlement_moves: Vec<(SettlementRow, i64)>,
    pub transfer_moves: Vec<(TransferRow, i64)>,
    /// The batch's moves per account, in account order.
    pub balances: BTreeMap<AccountId, Moves>,
    pub timers: Vec<TimerRow>,
    pub events: Vec<WebhookEventRow>,
    pub audit: Vec<AuditRecord>,
    /// Holds recorded, with their lines, for the committer to remember.
    pub holds: Vec<(String, Lines)>,
    pub cards: CardRows,
    /// With the index of the plan each belongs to.
    pub row_writes: Vec<(usize, RowWrite)>,
}

/// One plan's part while it is judged: applied to the world and the rows
/// only once the whole plan passes.
#[derive(Default)]
struct Draft {
    timers_done: Vec<String>,
    timers_cancelled: Vec<String>,
    settlements: Vec<SettlementRow>,
    transfers: Vec<TransferRow>,
    answers: Vec<IdempotencyRow>,
    transactions: Vec<LedgerTransactionRow>,
    entries: Vec<LedgerEntryRow>,
    /// Accounts as this plan leaves them (read from the world on first use).
    accounts: BTreeMap<AccountId, Account>,
    moves: BTreeMap<AccountId, Moves>,
    holds_recorded: Vec<(String, Hold)>,
    holds_resolved: Vec<(String, LedgerStatus)>,
    settlement_versions: Vec<(SettlementRef, i64)>,
    transfer_versions: Vec<(TransferId, i64)>,
    settlement_moves: Vec<(SettlementRow, i64)>,
    transfer_moves: Vec<(TransferRow, i64)>,
    timers: Vec<TimerRow>,
    cards: CardDraft,
}

/// Judges `plans` in order against `world`; answers each plan's verdict and
/// the rows of those accepted. `world` ends as the accepted plans leave it.
pub(crate) fn judge(
    world: &mut World,
    plans: &[Plan],
    now: NaiveDateTime,
) -> (Rows, Vec<Result<Written, PlanError>>) {
    let mut rows = Rows::default();
    let verdicts = plans
        .iter()
        .enumerate()
        .map(|(index, plan)| {
            let mut draft = Draft::default();
            let events_wait = plan_draft(world, plan, &mut draft, now)?;
            accept(world, &mut rows, draft, plan, events_wait);
            let card_moves = plan.moves.iter().filter_map(|moved| match moved {
                RowMove::Card {
                    row,
                    expected_version,
                } => Some(RowWrite::Card {
                    row: row.clone(),
                    expected_version: *expected_version,
                }),
                _ => None,
            });
            rows.row_writes.extend(
                card_moves
                    .chain(plan.rows.iter().cloned())
                    .map(|write| (index, write)),
            );
            Ok(Written {
                events_wait,
                rearmed: 0,
            })
        })
        .collect();
    (rows, verdicts)
}

/// Judges one plan, filling its draft; answers whether its events wait.
fn plan_draft(
    world: &World,
    plan: &Plan,
    draft: &mut Draft,
    now: NaiveDateTime,
) -> Result<bool, PlanError> {
    if let Some(fence) = plan.fence {
        if world.slots.get(&fence.slot) != Some(&fence.epoch) {
            return Err(PlanError::Fenced {
                slot: fence.slot,
                epoch: fence.epoch,
            });
        }
    }
    if let Some(source) = &plan.funding_source {
        match world.accounts.get(&source.account_id) {
            Some(account)
                if account.exists
                    && account.facts.kind == AccountKind::Funding
                    && account.facts.merchant_id.as_ref() == Some(&source.merchant_id) =>
            {
                if account.facts.currency != source.currency {
                    return Err(PlanError::Source(format!(
                        "the source account holds {}, not {}",
                        account.facts.currency, source.currency
                    )));
                }
            }
            _ => {
                return Err(PlanError::Source(
                    "not a funding account of this merchant".into(),
                ))
            }
        }
    }
    if let Some(claim) = &plan.completes_timer {
        match world.timers.get(&claim.timer_id) {
            Some(Some(token)) if *token == claim.claim_token => {
                draft.timers_done.push(claim.timer_id.clone());
            }
            _ => {
                return Err(PlanError::TimerLost {
                    timer_id: claim.timer_id.clone(),
                })
            }
        }
    }
    for created in &plan.new_settlements {
        let key = (
            created.row.merchant_id.clone(),
            created.row.idempotency_key.clone(),
        );
        if world.settlements.contains_key(&key)
            || draft.settlement_versions.iter().any(|(k, _)| *k == key)
        {
            return Err(key_taken());
        }
        let hold_id = created.row.funding_transaction_id.clone().ok_or_else(|| {
            PlanError::Store(StoreError::Unavailable(
                "a new settlement's plan names no hold".into(),
            ))
        })?;
        record(world, draft, hold_id, &created.hold, Phase::Pending, now)?;
        draft.settlement_versions.push((key, created.row.version));
        draft.settlements.push(created.row.clone());
    }
    if let Some(answer) = &plan.answer {
        let key = (
            answer.merchant_id.clone(),
            answer.scope.clone(),
            answer.idempotency_key.clone(),
        );
        if world.answers.contains(&key) {
            return Err(key_taken());
        }
        draft.answers.push(answer.clone());
    }
    for created in &plan.new_transfers {
        let key = (created.merchant_id.clone(), created.idempotency_key.clone());
        let again = |row: &TransferRow| row.merchant_id == key.0 && row.idempotency_key == key.1;
        if world.transfer_keys.contains(&key) || draft.transfers.iter().any(again) {
            return Err(key_taken());
        }
        let bound = |row: &TransferRow| row.quote_id == created.quote_id;
        if world.bound_quotes.contains(&created.quote_id) || draft.transfers.iter().any(bound) {
            return Err(PlanError::Store(StoreError::UniqueViolation(format!(
                "quote {} is bound to a transfer",
                created.quote_id
            ))));
        }
        draft
            .transfer_versions
            .push((created.id.clone(), created.version));
        draft.transfers.push(created.clone());
    }
    // Before the ledger: a provider event recorded already (on another
    // node, whose write resolved the hold this one names) is a repeat, not
    // a refused entry.
    for row in &plan.card_transactions {
        world.cards.record(&mut draft.cards, row)?;
    }
    for write in &plan.ledger {
        match write {
            LedgerWrite::Record { id, entry, phase } => {
                record(world, draft, id.clone(), entry, *phase, now)?
            }
            LedgerWrite::Post { hold_id, id } => resolve(world, draft, hold_id, id, true, now)?,
            LedgerWrite::Void { hold_id, id } => resolve(world, draft, hold_id, id, false, now)?,
        }
    }
    for moved in &plan.moves {
        match moved {
            RowMove::Authorization(change) => world.cards.moved(&mut draft.cards, change)?,
            // Checked where it is written (see `judge`).
            RowMove::Card { .. } => {}
            RowMove::Settlement {
                row,
                expected_version,
            } => {
                let key = (row.merchant_id.clone(), row.idempotency_key.clone());
                let current = draft
                    .settlement_versions
                    .iter()
                    .rev()
                    .find(|(k, _)| *k == key)
                    .map(|(_, version)| *version)
                    .or_else(|| world.settlements.get(&key).copied());
                if current != Some(*expected_version) {
                    return Err(PlanError::Store(StoreError::Conflict(
                        "settlement changed by another writer".into(),
                    )));
                }
                draft.settlement_versions.push((key, row.version));
                draft
                    .settlement_moves
                    .push((row.clone(), *expected_version));
            }
            RowMove::Transfer {
                row,
                expected_version,
            } => {
                let current = draft
                    .transfer_versions
                    .iter()
                    .rev()
                    .find(|(id, _)| *id == row.id)
                    .map(|(_, version)| *version)
                    .or_else(|| world.transfers.get(&row.id).copied());
                if current != Some(*expected_version) {
                    return Err(PlanError::Store(StoreError::Conflict(
                        "transfer changed by another writer".into(),
                    )));
                }
                draft.transfer_versions.push((row.id.clone(), row.version));
                draft.transfer_moves.push((row.clone(), *expected_version));
            }
        }
    }
    draft.timers_cancelled = plan.cancels_timers.clone();
    for timer in &plan.timers {
        let taken = match world.timers.get(&timer.id) {
            Some(_) => {
                !draft.timers_done.contains(&timer.id)
                    && !draft.timers_cancelled.contains(&timer.id)
            }
            None => false,
        } || draft.timers.iter().any(|t| t.id == timer.id);
        if taken {
            return Err(PlanError::Store(StoreError::UniqueViolation(format!(
                "timer {} exists",
                timer.id
            ))));
        }
        draft.timers.push(timer.clone());
    }
    Ok(plan
        .events
        .first()
        .is_some_and(|event| world.endpoints.contains(&event.merchant_id)))
}

fn key_taken() -> PlanError {
    PlanError::Store(StoreError::Refused(Refusal::KeyTaken))
}

/// The account as the plan has left it so far, read from the world on
/// first use; a system account not yet made is opened empty.
fn account<'d>(
    world: &World,
    draft: &'d mut Draft,
    account_id: &AccountId,
) -> Result<&'d mut Account, LedgerError> {
    if !draft.accounts.contains_key(account_id) {
        let found = match world.accounts.get(account_id) {
            Some(account) => account.clone(),
            None => {
                let (system, currency) = SystemAccount::parse_id(account_id.as_str())
                    .ok_or_else(|| LedgerError::UnknownAccount(account_id.clone()))?;
                Account {
                    facts: AccountFacts {
                        id: account_id.clone(),
                        merchant_id: None,
                        kind: system.kind(),
                        currency,
                    },
                    buckets: Sums::default(),
                    exists: false,
                    settled: true,
                }
            }
        };
        draft.accounts.insert(account_id.clone(), found);
    }
    draft
        .accounts
        .get_mut(account_id)
        .ok_or_else(|| LedgerError::UnknownAccount(account_id.clone()))
}

/// Adds `amount` to one bucket of the account, in the draft and its moves.
fn moved(draft: &mut Draft, account_id: &AccountId, bucket: Bucket, amount: i64) {
    if let Some(account) = draft.accounts.get_mut(account_id) {
        *account.buckets.bucket(bucket) += i128::from(amount);
    }
    let moves = draft.moves.entry(account_id.clone()).or_default();
    let slot = match bucket {
        Bucket::PostedDebits => &mut moves.posted_debits_minor,
        Bucket::PostedCredits => &mut moves.posted_credits_minor,
        Bucket::PendingDebits => &mut moves.pending_debits_minor,
        Bucket::PendingCredits => &mut moves.pending_credits_minor,
    };
    // Judged against i64::MAX per side before it moves: a bucket's sum
    // over the batch stays within its side's room.
    *slot = slot.saturating_add(amount);
}

/// Judges and drafts a balanced entry: every line's account holds its
/// currency, no side passes `i64::MAX`, and a funding account's available
/// balance covers each of its debits.
fn record(
    world: &World,
    draft: &mut Draft,
    id: String,
    entry: &Entry,
    phase: Phase,
    now: NaiveDateTime,
) -> Result<(), LedgerError> {
    ledger::check_balanced(&entry.lines)?;
    for line in &entry.lines {
        let bucket = ledger::bucket_of(phase, line.direction);
        let account = account(world, draft, &line.account_id)?;
        if account.facts.currency != line.currency {
            return Err(LedgerError::CurrencyMismatch {
                account_id: line.account_id.clone(),
                account_currency: account.facts.currency.clone(),
                line_currency: line.currency.clone(),
            });
        }
        let amount = i128::from(line.amount_minor);
        if line.direction == Direction::Debit && account.facts.kind == AccountKind::Funding {
            // Only its own merchant's entries debit a funding account (and
            // only those lock it): another's is told it does not exist.
            if !account.settled || account.facts.merchant_id != entry.merchant_id {
                return Err(LedgerError::UnknownAccount(line.account_id.clone()));
            }
            if account.buckets.available() < amount {
                return Err(LedgerError::InsufficientFunds {
                    account_id: line.account_id.clone(),
                });
            }
        }
        if account.buckets.room(bucket) < amount {
            return Err(LedgerError::Overflow {
                account_id: line.account_id.clone(),
            });
        }
        moved(draft, &line.account_id, bucket, line.amount_minor.get());
    }
    let status = match phase {
        Phase::Pending => LedgerStatus::Pending,
        Phase::Posted => LedgerStatus::Posted,
    };
    let lines: Vec<LedgerEntryRow> = entry
        .lines
        .iter()
        .map(|line| LedgerEntryRow {
            id: ledger::new_entry_id(),
            transaction_id: id.clone(),
            account_id: line.account_id.clone(),
            direction: line.direction,
            amount_minor: line.amount_minor,
            currency: line.currency.clone(),
            created_at: now,
        })
        .collect();
    draft.transactions.push(LedgerTransactionRow {
        id: id.clone(),
        status,
        merchant_id: entry.merchant_id.clone(),
        settlement_key: entry.settlement_key.clone(),
        description: entry.description.clone(),
        created_at: now,
        updated_at: now,
        pending_id: None,
    });
    draft.entries.extend(lines.iter().cloned());
    if phase == Phase::Pending {
        draft.holds_recorded.push((
            id,
            Hold {
                merchant_id: entry.merchant_id.clone(),
                settlement_key: entry.settlement_key.clone(),
                description: entry.description.clone(),
                status: LedgerStatus::Pending,
                resolved: None,
                lines: Arc::from(lines),
            },
        ));
    }
    Ok(())
}

/// Judges and drafts the posting (or void) of a pending hold, resolved
/// once: a new transaction whose lines copy the hold's and move them out
/// of pending.
fn resolve(
    world: &World,
    draft: &mut Draft,
    hold_id: &str,
    id: &str,
    posting: bool,
    now: NaiveDateTime,
) -> Result<(), LedgerError> {
    let hold = draft
        .holds_recorded
        .iter()
        .find(|(recorded, _)| recorded == hold_id)
        .map(|(_, hold)| hold.clone())
        .or_else(|| world.holds.get(hold_id).cloned());
    let not_pending = |status: &str| LedgerError::NotPending {
        id: hold_id.to_owned(),
        status: status.to_owned(),
    };
    let Some(hold) = hold else {
        return Err(not_pending("missing"));
    };
    if let Some((_, how)) = draft.holds_resolved.iter().find(|(h, _)| h == hold_id) {
        return Err(not_pending(how.as_str()));
    }
    if let Some(how) = hold.resolved {
        return Err(not_pending(how.as_str()));
    }
    if hold.status != LedgerStatus::Pending || hold.lines.is_empty() {
        return Err(not_pending(hold.status.as_str()));
    }
    let status = if posting {
        LedgerStatus::Posted
    } else {
        LedgerStatus::Voided
    };
    for line in hold.lines.iter() {
        let debit = line.direction == Direction::Debit;
        let (pending, posted) = match debit {
            true => (Bucket::PendingDebits, Bucket::PostedDebits),
            false => (Bucket::PendingCredits, Bucket::PostedCredits),
        };
        account(world, draft, &line.account_id)?;
        // Positive (every line is, see `check_balanced`): negating it cannot overflow.
        moved(draft, &line.account_id, pending, -line.amount_minor.get());
        if posting {
            moved(draft, &line.account_id, posted, line.amount_minor.get());
        }
        draft.entries.push(LedgerEntryRow {
            id: ledger::new_entry_id(),
            transaction_id: id.to_owned(),
            created_at: now,
            ..line.clone()
        });
    }
    draft.transactions.push(LedgerTransactionRow {
        id: id.to_owned(),
        status,
        merchant_id: hold.merchant_id.clone(),
        settlement_key: hold.settlement_key.clone(),
        description: format!("{} {status}", hold.description),
        created_at: now,
        updated_at: now,
        pending_id: Some(hold_id.to_owned()),
    });
    draft.holds_resolved.push((hold_id.to_owned(), status));
    Ok(())
}

/// Applies an accepted plan's draft to the world and the batch's rows.
fn accept(world: &mut World, rows: &mut Rows, draft: Draft, plan: &Plan, events_wait: bool) {
    for id in &draft.timers_done {
        world.timers.remove(id);
    }
    rows.timers_done.extend(draft.timers_done);
    // A timer set earlier in the batch is cancelled before it is written;
    // one already stored is deleted with the batch's others.
    for id in &draft.timers_cancelled {
        world.timers.remove(id);
        rows.timers.retain(|timer| timer.id != *id);
    }
    rows.timers_cancelled.extend(draft.timers_cancelled);
    world.cards.accept(&mut rows.cards, draft.cards);
    for (id, account) in draft.accounts {
        if !account.exists && !world.accounts.contains_key(&id) {
            rows.accounts_opened.push(opened(&account.facts));
        }
        world.accounts.insert(
            id,
            Account {
                exists: true,
                ..account
            },
        );
    }
    // Within i64: every amount was judged against its side's room, and a
    // bucket's moves are part of its side.
    for (id, moves) in draft.moves {
        rows.balances.entry(id).or_default().absorb(moves);
    }
    for (key, version) in draft.settlement_versions {
        world.settlements.insert(key, version);
    }
    for (id, version) in draft.transfer_versions {
        world.transfers.insert(id, version);
    }
    for answer in &draft.answers {
        world.answers.insert((
            answer.merchant_id.clone(),
            answer.scope.clone(),
            answer.idempotency_key.clone(),
        ));
    }
    // Recorded first: a hold the plan records and resolves ends resolved.
    for (hold_id, hold) in draft.holds_recorded {
        rows.holds.push((hold_id.clone(), hold.lines.clone()));
        world.holds.insert(hold_id, hold);
    }
    for (hold_id, how) in draft.holds_resolved {
        if let Some(hold) = world.holds.get_mut(&hold_id) {
            hold.resolved = Some(how);
        }
    }
    for timer in &draft.timers {
        world.timers.insert(timer.id.clone(), None);
    }
    for created in &draft.transfers {
        world.bound_quotes.insert(created.quote_id.clone());
        world
            .transfer_keys
            .insert((created.merchant_id.clone(), created.idempotency_key.clone()));
    }
    rows.settlements.extend(draft.settlements);
    rows.transfers.extend(draft.transfers);
    rows.answers.extend(draft.answers);
    rows.transactions.extend(draft.transactions);
    rows.entries.extend(draft.entries);
    rows.settlement_moves.extend(draft.settlement_moves);
    rows.transfer_moves.extend(draft.transfer_moves);
    rows.timers.extend(draft.timers);
    rows.audit.extend(plan.audit.iter().cloned());
    rows.events
        .extend(plan.events.iter().cloned().map(|mut event| {
            if !events_wait {
                event.status = SKIPPED;
                event.next_attempt_at = None;
            } else {
                event.status = PENDING;
            }
            event
        }));
}

fn opened(facts: &AccountFacts) -> LedgerAccountRow {
    let now = crate::types::utc_now();
    LedgerAccountRow {
        id: facts.id.clone(),
        merchant_id: None,
        kind: facts.kind,
        currency: facts.currency.clone(),
        posted_debits_minor: MinorUnits::ZERO,
        posted_credits_minor: MinorUnits::ZERO,
        pending_debits_minor: MinorUnits::ZERO,
        pending_credits_minor: MinorUnits::ZERO,
        created_at: now,
        updated_at: now,
    }
}

#[cfg(test)]
mod tests;
