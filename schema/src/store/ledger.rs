//! Ledger queries. What moves a balance is judged in memory by the plan
//! committer (`crate::plan`), which then writes one UPDATE per account and
//! batch ([`apply_moves`], or on PostgreSQL the batch's deferred moves, see
//! [`crate::balances`]).

use std::sync::Arc;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::balances::Moves;
use crate::db::one_row;
use crate::known::AccountFacts;
use crate::models::{LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow};
use crate::schema::{ledger_accounts, ledger_entries, ledger_transactions};
use crate::store::cached::Cached;
use crate::types::utc_now;
use crate::vocabulary::{AccountId, LedgerStatus, MerchantId};
use crate::{dispatch, write_behind};
use crate::{Conn, StoreResult, Tx};

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
    account_id: &AccountId,
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
    merchant_id: &MerchantId,
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

/// One line of an account's listing: the line, and its transaction's
/// status, settlement key and the hold it resolves (if it does).
pub type ListedEntry = (LedgerEntryRow, LedgerStatus, Option<String>, Option<String>);

/// An account's lines with their transaction's status, settlement key and
/// resolved hold, newest first, strictly before the entry `before` when given.
pub async fn account_entries(
    tx: &mut Tx<'_>,
    account_id: &AccountId,
    before: Option<&LedgerEntryRow>,
    limit: i64,
) -> StoreResult<Vec<ListedEntry>> {
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
            .select((
                LedgerEntryRow::as_select(),
                ledger_transactions::status,
                ledger_transactions::settlement_key,
                ledger_transactions::pending_id,
            ))
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

/// Every line after `after` in id order with its transaction's status and
/// the hold it resolves (if it does), for the offline check.
pub async fn entries_page(
    tx: &mut Tx<'_>,
    after: &str,
) -> StoreResult<Vec<(LedgerEntryRow, LedgerStatus, Option<String>)>> {
    let rows = dispatch!(tx, conn => ledger_entries::table
        .inner_join(ledger_transactions::table)
        .filter(ledger_entries::id.gt(after))
        .order(ledger_entries::id.asc())
        .limit(CHECK_PAGE_ROWS)
        .select((LedgerEntryRow::as_select(), ledger_transactions::status, ledger_transactions::pending_id))
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

/// What became of a line given to [`add_line`].
/// The unchanging facts of an account (owner, kind, currency): remembered
/// by the group committer (see [`crate::known`]), read otherwise.
pub async fn account_facts(
    tx: &mut Tx<'_>,
    account_id: &AccountId,
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

/// Applies a batch's summed moves to one account: the single balance
/// write of that account in its batch (see [`crate::balances`]).
pub async fn apply_moves(tx: &mut Tx<'_>, account_id: &AccountId, moves: Moves) -> StoreResult<()> {
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
