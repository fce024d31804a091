//! Ledger queries. Balance changes are single UPDATE statements so that the
//! funding guard (available may not go below zero) is checked and applied
//! atomically by the database, whoever else is writing; inside a group
//! commit on PostgreSQL they are summed in memory instead and applied once
//! per account (see [`crate::balances`]).

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::balances::{Locked, Moves};
use crate::db::one_row;
use crate::known::AccountFacts;
use crate::ledger::FUNDING;
use crate::models::{LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow};
use crate::schema::{ledger_accounts, ledger_entries, ledger_transactions};
use crate::store::cached::Cached;
use crate::types::utc_now;
use crate::{dispatch, write_behind};
use crate::{Conn, Refusal, StoreError, StoreResult, Tx};

/// Rows the offline check reads per query.
pub const CHECK_PAGE_ROWS: i64 = 5_000;

pub async fn insert_account(tx: &mut Tx<'_>, row: &LedgerAccountRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(ledger_accounts::table).values(row)).execute(conn).await)?;
    Ok(())
}

/// Inserts unless an account with this id exists (system accounts are made
/// on first use, possibly by two writers at once).
pub async fn insert_account_if_absent(tx: &mut Tx<'_>, row: &LedgerAccountRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(ledger_accounts::table)
        .values(row)
        .on_conflict_do_nothing()
        ).execute(conn)
        .await)?;
    Ok(())
}

pub async fn find_account(
    tx: &mut Tx<'_>,
    account_id: &str,
) -> StoreResult<Option<LedgerAccountRow>> {
    let row = dispatch!(tx, conn => ledger_accounts::table
        .find(account_id)
        .select(LedgerAccountRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn merchant_accounts(
    tx: &mut Tx<'_>,
    merchant_id: &str,
) -> StoreResult<Vec<LedgerAccountRow>> {
    let rows = dispatch!(tx, conn => ledger_accounts::table
        .filter(ledger_accounts::merchant_id.eq(merchant_id))
        .order((ledger_accounts::currency.asc(), ledger_accounts::id.asc()))
        .select(LedgerAccountRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Accounts in id order after `after`, for the offline check.
pub async fn accounts_page(tx: &mut Tx<'_>, after: &str) -> StoreResult<Vec<LedgerAccountRow>> {
    let rows = dispatch!(tx, conn => ledger_accounts::table
        .filter(ledger_accounts::id.gt(after))
        .order(ledger_accounts::id.asc())
        .limit(CHECK_PAGE_ROWS)
        .select(LedgerAccountRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

pub async fn insert_transaction(tx: &mut Tx<'_>, row: &LedgerTransactionRow) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::insert_into(ledger_transactions::table).values(row)).execute(conn),
        one_row("ledger transaction insert"))
}

/// One statement on PostgreSQL, pipelined inside a group commit; one per
/// line on SQLite, where diesel's multi-row insert does not build through
/// the async wrapper (diesel_async#277) and a statement costs no round trip.
pub async fn insert_entries(tx: &mut Tx<'_>, rows: &[LedgerEntryRow]) -> StoreResult<()> {
    if let (Conn::Pg(conn), behind) = tx.parts() {
        if !rows.is_empty() {
            let write =
                Cached(diesel::insert_into(ledger_entries::table).values(rows)).execute(conn);
            return behind
                .send(write, crate::db::rows(rows.len(), "ledger entries insert"))
                .await;
        }
    }
    for row in rows {
        write_behind!(tx, conn => Cached(diesel::insert_into(ledger_entries::table).values(row)).execute(conn),
            one_row("ledger entry insert"))?;
    }
    Ok(())
}

/// Moves a transaction from `from` to `to`, failing with a conflict when it
/// was not in `from`; pipelined inside a group commit on PostgreSQL, where
/// that failure surfaces when the unit ends (and rolls the unit back).
pub async fn transition_transaction_behind(
    tx: &mut Tx<'_>,
    id: &str,
    from: &str,
    to: &str,
) -> StoreResult<()> {
    let now = utc_now();
    write_behind!(tx, conn => Cached(diesel::update(
            ledger_transactions::table
                .filter(ledger_transactions::id.eq(id))
                .filter(ledger_transactions::status.eq(from)),
        )
        .set((ledger_transactions::status.eq(to), ledger_transactions::updated_at.eq(now)))
        ).execute(conn), one_row("ledger transaction no longer pending"))
}

/// Moves a transaction from `from` to `to`; false when it was not in `from`.
pub async fn transition_transaction(
    tx: &mut Tx<'_>,
    id: &str,
    from: &str,
    to: &str,
) -> StoreResult<bool> {
    let now = utc_now();
    let changed = dispatch!(tx, conn => Cached(diesel::update(
            ledger_transactions::table
                .filter(ledger_transactions::id.eq(id))
                .filter(ledger_transactions::status.eq(from)),
        )
        .set((ledger_transactions::status.eq(to), ledger_transactions::updated_at.eq(now)))
        ).execute(conn)
        .await)?;
    Ok(changed == 1)
}

pub async fn find_transaction(
    tx: &mut Tx<'_>,
    id: &str,
) -> StoreResult<Option<LedgerTransactionRow>> {
    let row = dispatch!(tx, conn => ledger_transactions::table
        .find(id)
        .select(LedgerTransactionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn transaction_entries(
    tx: &mut Tx<'_>,
    transaction_id: &str,
) -> StoreResult<Vec<LedgerEntryRow>> {
    let rows = dispatch!(tx, conn => ledger_entries::table
        .filter(ledger_entries::transaction_id.eq(transaction_id))
        .order(ledger_entries::id.asc())
        .select(LedgerEntryRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// An account's lines with their transaction's status and settlement key,
/// newest first, strictly before the entry `before` when given.
pub async fn account_entries(
    tx: &mut Tx<'_>,
    account_id: &str,
    before: Option<&LedgerEntryRow>,
    limit: i64,
) -> StoreResult<Vec<(LedgerEntryRow, String, Option<String>)>> {
    let rows = dispatch!(tx, conn => {
        let mut query = ledger_entries::table
            .inner_join(ledger_transactions::table)
            .filter(ledger_entries::account_id.eq(account_id))
            .into_boxed();
        if let Some(before) = before {
            query = query.filter(
                ledger_entries::created_at.lt(before.created_at).or(ledger_entries::created_at
                    .eq(before.created_at)
                    .and(ledger_entries::id.lt(before.id.clone()))),
            );
        }
        query
            .order((ledger_entries::created_at.desc(), ledger_entries::id.desc()))
            .limit(limit)
            .select((LedgerEntryRow::as_select(), ledger_transactions::status, ledger_transactions::settlement_key))
            .load(conn)
            .await
    })?;
    Ok(rows)
}

pub async fn find_entry(tx: &mut Tx<'_>, entry_id: &str) -> StoreResult<Option<LedgerEntryRow>> {
    let row = dispatch!(tx, conn => ledger_entries::table
        .find(entry_id)
        .select(LedgerEntryRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Every line after `after` in id order with its transaction's status, for
/// the offline check.
pub async fn entries_page(
    tx: &mut Tx<'_>,
    after: &str,
) -> StoreResult<Vec<(LedgerEntryRow, String)>> {
    let rows = dispatch!(tx, conn => ledger_entries::table
        .inner_join(ledger_transactions::table)
        .filter(ledger_entries::id.gt(after))
        .order(ledger_entries::id.asc())
        .limit(CHECK_PAGE_ROWS)
        .select((LedgerEntryRow::as_select(), ledger_transactions::status))
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Which balance column a change touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bucket {
    PendingDebits,
    PendingCredits,
    PostedDebits,
    PostedCredits,
}

/// The UPDATE adding `$amount` to one bucket of account `$account_id` if it
/// holds `$currency` (and, with `$guard`, if a funding account's available
/// balance covers it), as an unawaited `execute` future on `$conn`: the one
/// statement behind [`add_line`] and [`add_line_sent`].
macro_rules! add_to_bucket {
    ($conn:ident, $account_id:expr, $currency:expr, $bucket:expr, $amount:expr, $guard:expr) => {{
        use ledger_accounts::{
            id, kind, pending_credits_minor, pending_debits_minor, posted_credits_minor,
            posted_debits_minor, updated_at,
        };
        let (amount, now) = ($amount, utc_now());
        let mut target = diesel::update(ledger_accounts::table)
            .filter(id.eq($account_id))
            .filter(ledger_accounts::currency.eq($currency))
            .into_boxed();
        if $guard {
            target = target.filter(kind.ne(FUNDING).or(
                (posted_credits_minor - posted_debits_minor - pending_debits_minor).ge(amount),
            ));
        }
        match $bucket {
            Bucket::PendingDebits => Cached(target.set((
                pending_debits_minor.eq(pending_debits_minor + amount),
                updated_at.eq(now),
            )))
            .execute($conn),
            Bucket::PendingCredits => Cached(target.set((
                pending_credits_minor.eq(pending_credits_minor + amount),
                updated_at.eq(now),
            )))
            .execute($conn),
            Bucket::PostedDebits => Cached(target.set((
                posted_debits_minor.eq(posted_debits_minor + amount),
                updated_at.eq(now),
            )))
            .execute($conn),
            Bucket::PostedCredits => Cached(target.set((
                posted_credits_minor.eq(posted_credits_minor + amount),
                updated_at.eq(now),
            )))
            .execute($conn),
        }
    }};
}

/// Adds `amount_minor` to one bucket of the account, if the account holds
/// `currency`. With `guard_funding`, a funding account changes only while
/// its available balance (posted credits - posted debits - pending debits)
/// covers the amount. Answers whether it applied; the checks live in the
/// statement so that an entry costs one statement per line, and the
/// database applies them atomically whoever else is writing.
pub async fn add_line(
    tx: &mut Tx<'_>,
    account_id: &str,
    currency: &str,
    bucket: Bucket,
    amount_minor: i64,
    guard_funding: bool,
) -> StoreResult<bool> {
    if tx.balances().is_some() {
        return add_line_moved(
            tx,
            account_id,
            currency,
            bucket,
            amount_minor,
            guard_funding,
        )
        .await;
    }
    let changed = dispatch!(tx, conn => add_to_bucket!(conn, account_id, currency, bucket, amount_minor, guard_funding).await)?;
    Ok(changed == 1)
}

/// [`add_line`] for a caller that does not act on the answer inside its
/// unit: pipelined inside a group commit on PostgreSQL and judged when the
/// unit ends, at once elsewhere. Not applied, it fails with
/// [`Refusal::InsufficientFunds`] when guarded (the caller has ruled out a
/// missing account and a currency mismatch), and with a conflict otherwise
/// (the caller knows the account exists in that currency).
pub async fn add_line_sent(
    tx: &mut Tx<'_>,
    account_id: &str,
    currency: &str,
    bucket: Bucket,
    amount_minor: i64,
    guard_funding: bool,
) -> StoreResult<()> {
    if tx.balances().is_some() {
        return match add_line_moved(
            tx,
            account_id,
            currency,
            bucket,
            amount_minor,
            guard_funding,
        )
        .await?
        {
            true => Ok(()),
            false if guard_funding => Err(StoreError::Refused(Refusal::InsufficientFunds {
                account_id: account_id.to_owned(),
            })),
            false => Err(StoreError::Conflict(format!(
                "ledger account {account_id}: missing or not in {currency}"
            ))),
        };
    }
    let refused = account_id.to_owned();
    write_behind!(tx, conn => add_to_bucket!(conn, account_id, currency, bucket, amount_minor, guard_funding),
    move |changed| match changed {
        1 => Ok(()),
        _ if guard_funding => Err(StoreError::Refused(Refusal::InsufficientFunds {
            account_id: refused,
        })),
        n => Err(StoreError::Conflict(format!(
            "ledger account {refused}: {n} rows changed, not 1"
        ))),
    })
}

/// Moves one line of a pending entry out of pending: into posted when
/// `posting`, nowhere when voiding. One statement per line, pipelined
/// inside a group commit on PostgreSQL.
pub async fn settle_line(
    tx: &mut Tx<'_>,
    account_id: &str,
    debit: bool,
    amount_minor: i64,
    posting: bool,
) -> StoreResult<()> {
    use ledger_accounts::{
        id, pending_credits_minor, pending_debits_minor, posted_credits_minor, posted_debits_minor,
        updated_at,
    };
    if let Some(balances) = tx.balances() {
        let (pending, posted) = match debit {
            true => (Bucket::PendingDebits, Bucket::PostedDebits),
            false => (Bucket::PendingCredits, Bucket::PostedCredits),
        };
        balances.add(account_id, pending, -amount_minor)?;
        if posting {
            balances.add(account_id, posted, amount_minor)?;
        }
        return Ok(());
    }
    let now = utc_now();
    let target = ledger_accounts::table.filter(id.eq(account_id));
    // Lines name accounts that exist: the entry was recorded against them.
    write_behind!(tx, conn => match (debit, posting) {
        (true, true) => Cached(diesel::update(target).set((
                pending_debits_minor.eq(pending_debits_minor - amount_minor),
                posted_debits_minor.eq(posted_debits_minor + amount_minor),
                updated_at.eq(now))))
            .execute(conn),
        (true, false) => Cached(diesel::update(target).set((
                pending_debits_minor.eq(pending_debits_minor - amount_minor),
                updated_at.eq(now))))
            .execute(conn),
        (false, true) => Cached(diesel::update(target).set((
                pending_credits_minor.eq(pending_credits_minor - amount_minor),
                posted_credits_minor.eq(posted_credits_minor + amount_minor),
                updated_at.eq(now))))
            .execute(conn),
        (false, false) => Cached(diesel::update(target).set((
                pending_credits_minor.eq(pending_credits_minor - amount_minor),
                updated_at.eq(now))))
            .execute(conn),
    }, one_row("settling a line of a missing account"))
}

/// The unchanging facts of an account (owner, kind, currency): remembered
/// by the group committer (see [`crate::known`]), read otherwise.
pub async fn account_facts(
    tx: &mut Tx<'_>,
    account_id: &str,
) -> StoreResult<Option<Arc<AccountFacts>>> {
    if let Some(facts) = tx.known().and_then(|known| known.account(account_id)) {
        return Ok(Some(facts));
    }
    let Some(row) = find_account(tx, account_id).await? else {
        return Ok(None);
    };
    let facts = AccountFacts::from(&row);
    if let Some(known) = tx.known() {
        known.learn_account(facts.clone());
    }
    Ok(Some(Arc::new(facts)))
}

/// [`add_line`] inside a group commit on PostgreSQL: the line moves the
/// batch's balances in memory. A guarded debit of a funding account is
/// judged against the account's row, read and locked once per batch, plus
/// the batch's moves.
async fn add_line_moved(
    tx: &mut Tx<'_>,
    account_id: &str,
    currency: &str,
    bucket: Bucket,
    amount_minor: i64,
    guard_funding: bool,
) -> StoreResult<bool> {
    let Some(facts) = account_facts(tx, account_id).await? else {
        return Ok(false);
    };
    if facts.currency != currency {
        return Ok(false);
    }
    if guard_funding && facts.kind == FUNDING {
        let available = match tx.balances().and_then(|moves| moves.available(account_id)) {
            Some(available) => available,
            None => {
                let Some(locked) = lock_account(tx, account_id).await? else {
                    return Ok(false);
                };
                let balances = in_memory(tx)?;
                balances.lock(account_id, locked);
                balances.available(account_id).unwrap_or_default()
            }
        };
        // A claim refused earlier in the batch may still count: judged
        // first, so that only a real shortfall refuses.
        if available < i128::from(amount_minor) {
            if !tx.judge_claims().await? {
                return Ok(false);
            }
            let judged = tx.balances().and_then(|moves| moves.available(account_id));
            if judged.is_none_or(|available| available < i128::from(amount_minor)) {
                return Ok(false);
            }
        }
    }
    in_memory(tx)?.add(account_id, bucket, amount_minor)?;
    Ok(true)
}

fn in_memory<'t>(tx: &'t mut Tx<'_>) -> StoreResult<&'t mut crate::balances::Balances> {
    tx.balances().ok_or_else(|| {
        StoreError::Unavailable("balance moves are kept only inside a group commit".into())
    })
}

/// Reads the buckets an available balance is computed from, locking the
/// row until the transaction ends: nothing else may move it while the
/// batch judges debits against what it read.
async fn lock_account(tx: &mut Tx<'_>, account_id: &str) -> StoreResult<Option<Locked>> {
    use ledger_accounts::{id, pending_debits_minor, posted_credits_minor, posted_debits_minor};
    let (Conn::Pg(conn), behind) = tx.parts() else {
        return Err(StoreError::Unavailable(
            "balance moves are kept only on PostgreSQL".into(),
        ));
    };
    let row = behind
        .drive(async {
            ledger_accounts::table
                .filter(id.eq(account_id))
                .select((
                    posted_debits_minor,
                    posted_credits_minor,
                    pending_debits_minor,
                ))
                .for_update()
                .first::<(i64, i64, i64)>(conn)
                .await
                .optional()
        })
        .await?;
    Ok(
        row.map(|(posted_debits, posted_credits, pending_debits)| Locked {
            posted_debits_minor: posted_debits,
            posted_credits_minor: posted_credits,
            pending_debits_minor: pending_debits,
        }),
    )
}

/// Applies a batch's summed moves to one account: the single balance
/// write of that account in its batch (see [`crate::balances`]).
pub async fn apply_moves(tx: &mut Tx<'_>, account_id: &str, moves: Moves) -> StoreResult<()> {
    use ledger_accounts::{
        id, pending_credits_minor, pending_debits_minor, posted_credits_minor, posted_debits_minor,
        updated_at,
    };
    let now = utc_now();
    write_behind!(tx, conn => Cached(
        diesel::update(ledger_accounts::table.filter(id.eq(account_id))).set((
            posted_debits_minor.eq(posted_debits_minor + moves.posted_debits_minor),
            posted_credits_minor.eq(posted_credits_minor + moves.posted_credits_minor),
            pending_debits_minor.eq(pending_debits_minor + moves.pending_debits_minor),
            pending_credits_minor.eq(pending_credits_minor + moves.pending_credits_minor),
            updated_at.eq(now),
        )))
        .execute(conn), one_row("moving the balances of a missing account"))
}
