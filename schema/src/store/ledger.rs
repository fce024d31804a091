//! Ledger queries. Balance changes are single UPDATE statements so that the
//! funding guard (available may not go below zero) is checked and applied
//! atomically by the database, whoever else is writing; inside a group
//! commit on PostgreSQL they are summed in memory instead and applied once
//! per account (see [`crate::balances`]).

use std::sync::Arc;

use chrono::NaiveDateTime;
use diesel::backend::Backend;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::balances::{Buckets, Moves, Read};
use crate::db::one_row;
use crate::known::AccountFacts;
use crate::ledger::FUNDING;
use crate::models::{LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow};
use crate::schema::{ledger_accounts, ledger_entries, ledger_transactions};
use crate::store::cached::Cached;
use crate::types::utc_now;
use crate::{dispatch, write_behind};
use crate::{Conn, StoreError, StoreResult, Tx};

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

/// A hold's resolution to insert: the transaction that posts or voids it,
/// with the hold's lines under the resolution's own ids.
pub struct Resolution<'r> {
    pub id: &'r str,
    /// `posted` or `voided`.
    pub status: &'r str,
    /// Appended to the hold's description.
    pub note: &'r str,
    pub created_at: NaiveDateTime,
    pub hold_id: &'r str,
    pub lines: &'r [LedgerEntryRow],
}

/// Inserts a resolution and its lines if its hold exists, is a hold
/// (`pending`: a row edited in place before migration 000015 is `posted` or
/// `voided` instead) and has no resolution yet; answers whether it did. The
/// unique index on `pending_id` decides between two resolutions of one
/// hold, whoever writes them. One statement on PostgreSQL; on SQLite, where
/// a statement costs no round trip, the transaction and then its lines.
pub async fn insert_resolution(tx: &mut Tx<'_>, resolution: &Resolution<'_>) -> StoreResult<bool> {
    if let (Conn::Pg(conn), behind) = tx.parts() {
        let write = Cached(ResolveWithLines(ResolveHold(resolution))).execute(conn);
        let changed = behind.drive(write).await?;
        return Ok(changed == resolution.lines.len());
    }
    let resolved = dispatch!(tx, conn => Cached(ResolveHold(resolution)).execute(conn).await)?;
    if resolved == 0 {
        return Ok(false);
    }
    insert_entries(tx, resolution.lines).await?;
    Ok(true)
}

/// [`insert_resolution`] for a caller that does not act on the answer
/// inside its unit: pipelined inside a group commit on PostgreSQL, where a
/// hold that cannot be resolved fails the unit when it ends (rolling back
/// what follows); at once elsewhere, with the same conflict.
pub async fn send_resolution(tx: &mut Tx<'_>, resolution: &Resolution<'_>) -> StoreResult<()> {
    if let (Conn::Pg(conn), behind) = tx.parts() {
        let write = Cached(ResolveWithLines(ResolveHold(resolution))).execute(conn);
        return behind
            .send(
                Box::pin(write),
                crate::db::rows(resolution.lines.len(), "ledger hold no longer pending"),
            )
            .await;
    }
    match insert_resolution(tx, resolution).await? {
        true => Ok(()),
        false => Err(StoreError::Conflict(format!(
            "ledger hold {} no longer pending",
            resolution.hold_id
        ))),
    }
}

/// What a hold came to, for a resolution that was refused: its
/// resolution's status, or its own (`posted` or `voided` when it was edited
/// in place before migration 000015), or `None` if there is no such
/// transaction.
pub async fn hold_outcome(tx: &mut Tx<'_>, hold_id: &str) -> StoreResult<Option<String>> {
    let resolved = dispatch!(tx, conn => ledger_transactions::table
        .filter(ledger_transactions::pending_id.eq(hold_id))
        .select(ledger_transactions::status)
        .first::<String>(conn)
        .await
        .optional())?;
    if resolved.is_some() {
        return Ok(resolved);
    }
    Ok(find_transaction(tx, hold_id).await?.map(|row| row.status))
}

/// `INSERT INTO ledger_transactions (...) SELECT ... FROM the hold WHERE it
/// is pending ON CONFLICT (pending_id) DO NOTHING`: one row when the hold
/// was resolved now, none otherwise. The resolution takes the hold's
/// merchant and settlement key from the hold's row.
struct ResolveHold<'r>(&'r Resolution<'r>);

impl<DB> QueryFragment<DB> for ResolveHold<'_>
where
    DB: Backend,
    str: ToSql<Text, DB>,
    NaiveDateTime: ToSql<Timestamp, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        let resolution = self.0;
        out.push_sql(
            "INSERT INTO ledger_transactions (id, status, merchant_id, settlement_key, \
             description, created_at, updated_at, pending_id) SELECT ",
        );
        out.push_bind_param::<Text, _>(resolution.id)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(resolution.status)?;
        out.push_sql(", hold.merchant_id, hold.settlement_key, hold.description || ");
        out.push_bind_param::<Text, _>(resolution.note)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamp, _>(&resolution.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Timestamp, _>(&resolution.created_at)?;
        out.push_sql(", hold.id FROM ledger_transactions AS hold WHERE hold.id = ");
        out.push_bind_param::<Text, _>(resolution.hold_id)?;
        // SQLite needs the WHERE clause here to read ON CONFLICT as the
        // upsert's, not as part of the SELECT.
        out.push_sql(" AND hold.status = 'pending' ON CONFLICT (pending_id) DO NOTHING");
        Ok(())
    }
}

/// `WITH resolved AS (<ResolveHold> RETURNING id) INSERT INTO
/// ledger_entries ... SELECT line.* FROM resolved, (VALUES ...) AS line`:
/// the resolution and its lines in one PostgreSQL statement, whose changed
/// rows are the lines when the hold was resolved now and none otherwise.
/// The lines' foreign keys are checked when the statement ends, after the
/// transaction they name is in.
struct ResolveWithLines<'r>(ResolveHold<'r>);

impl QueryFragment<Pg> for ResolveWithLines<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("WITH resolved AS (");
        self.0.walk_ast(out.reborrow())?;
        out.push_sql(
            " RETURNING id) INSERT INTO ledger_entries (id, transaction_id, account_id, \
             direction, amount_minor, currency, created_at) SELECT line.* FROM resolved, (VALUES ",
        );
        for (index, line) in self.0 .0.lines.iter().enumerate() {
            out.push_sql(if index == 0 { "(" } else { ", (" });
            out.push_bind_param::<Text, _>(&line.id)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&line.transaction_id)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&line.account_id)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&line.direction)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(&line.amount_minor)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&line.currency)?;
            out.push_sql(", ");
            out.push_bind_param::<Timestamp, _>(&line.created_at)?;
            out.push_sql(")");
        }
        out.push_sql(") AS line");
        Ok(())
    }
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
pub type ListedEntry = (LedgerEntryRow, String, Option<String>, Option<String>);

/// An account's lines with their transaction's status, settlement key and
/// resolved hold, newest first, strictly before the entry `before` when given.
pub async fn account_entries(
    tx: &mut Tx<'_>,
    account_id: &str,
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
) -> StoreResult<Vec<(LedgerEntryRow, String, Option<String>)>> {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineOutcome {
    Applied,
    MissingAccount,
    /// The account holds another currency.
    OtherCurrency,
    /// A funding account's available balance does not cover the debit.
    InsufficientFunds,
    /// The account's side (posted plus pending debits, or credits) would
    /// pass `i64::MAX`.
    Overflow,
}

/// The UPDATE adding `$amount` to one bucket of account `$account_id` if it
/// holds `$currency`, if the bucket's side stays within `i64::MAX` (and,
/// with `$guard`, if a funding account's available balance covers it), as
/// an unawaited `execute` future on `$conn`: the one statement behind
/// [`add_line`].
///
/// The side's posted and pending buckets are summed because posting moves
/// an amount from one to the other: a hold that fits when it is made still
/// fits when it is posted, so a posting is never refused after the provider
/// has acted. Every statement that grows a side checks this, so no side's
/// sum passes `i64::MAX` and the sums below cannot overflow; on SQLite an
/// overflowing integer would silently turn into a REAL, on PostgreSQL into
/// an error.
macro_rules! add_to_bucket {
    ($conn:ident, $account_id:expr, $currency:expr, $bucket:expr, $amount:expr, $guard:expr) => {{
        use ledger_accounts::{
            id, kind, pending_credits_minor, pending_debits_minor, posted_credits_minor,
            posted_debits_minor, updated_at,
        };
        let (amount, now) = ($amount, utc_now());
        let room = i64::MAX - amount;
        let mut target = diesel::update(ledger_accounts::table)
            .filter(id.eq($account_id))
            .filter(ledger_accounts::currency.eq($currency))
            .into_boxed();
        target = match $bucket {
            Bucket::PendingDebits | Bucket::PostedDebits => {
                target.filter((posted_debits_minor + pending_debits_minor).le(room))
            }
            Bucket::PendingCredits | Bucket::PostedCredits => {
                target.filter((posted_credits_minor + pending_credits_minor).le(room))
            }
        };
        if $guard {
            // available >= amount, written so that nothing can overflow.
            target = target.filter(kind.ne(FUNDING).or(
                (posted_debits_minor + pending_debits_minor).le(posted_credits_minor - amount),
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

/// Adds `amount_minor` (positive) to one bucket of the account, if the
/// account holds `currency` and the bucket's side stays within `i64::MAX`.
/// With `guard_funding`, a funding account changes only while its available
/// balance (posted credits - posted debits - pending debits) covers the
/// amount. The checks live in the statement, so that an entry costs one
/// statement per line and the database applies them atomically whoever
/// else is writing; only a refused line reads the account, to say why.
pub async fn add_line(
    tx: &mut Tx<'_>,
    account_id: &str,
    currency: &str,
    bucket: Bucket,
    amount_minor: i64,
    guard_funding: bool,
) -> StoreResult<LineOutcome> {
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
    if changed == 1 {
        return Ok(LineOutcome::Applied);
    }
    let account = find_account(tx, account_id).await?;
    let Some(account) = account else {
        return Ok(LineOutcome::MissingAccount);
    };
    let buckets = Buckets::from(&account);
    let funds = guard_funding && account.kind == FUNDING;
    match refusal(
        &account.currency,
        currency,
        &buckets,
        bucket,
        amount_minor,
        funds,
    ) {
        Some(refused) => Ok(refused),
        // Another writer moved the account between the two statements.
        None => Err(StoreError::Conflict(format!(
            "ledger account {account_id} changed while a line was applied"
        ))),
    }
}

/// Why a line on an account with these buckets would be refused, if it
/// would: the judgement of [`add_to_bucket!`]'s guards.
pub fn refusal(
    account_currency: &str,
    line_currency: &str,
    buckets: &Buckets,
    bucket: Bucket,
    amount_minor: i64,
    guard_funds: bool,
) -> Option<LineOutcome> {
    if account_currency != line_currency {
        return Some(LineOutcome::OtherCurrency);
    }
    let amount = i128::from(amount_minor);
    if guard_funds && buckets.available_minor() < amount {
        return Some(LineOutcome::InsufficientFunds);
    }
    if buckets.room(bucket) < amount {
        return Some(LineOutcome::Overflow);
    }
    None
}

/// Moves one line of a pending entry out of pending: into posted when
/// `posting`, nowhere when voiding. One statement per line, pipelined
/// inside a group commit on PostgreSQL.
pub async fn resolve_line(
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
/// batch's balances in memory. It is judged against the account's row,
/// read once per batch (locked for a debit a funding account's available
/// balance must cover, see [`crate::balances`]), plus the batch's moves.
async fn add_line_moved(
    tx: &mut Tx<'_>,
    account_id: &str,
    currency: &str,
    bucket: Bucket,
    amount_minor: i64,
    guard_funding: bool,
) -> StoreResult<LineOutcome> {
    let Some(facts) = account_facts(tx, account_id).await? else {
        return Ok(LineOutcome::MissingAccount);
    };
    if facts.currency != currency {
        return Ok(LineOutcome::OtherCurrency);
    }
    let funds = guard_funding && facts.kind == FUNDING;
    let needed = if funds { Read::Locked } else { Read::Plain };
    let read = in_memory(tx)?.how_read(account_id);
    if read.is_none() || (read == Some(Read::Plain) && needed == Read::Locked) {
        let Some(buckets) = read_account(tx, account_id, needed).await? else {
            return Ok(LineOutcome::MissingAccount);
        };
        in_memory(tx)?.remember(account_id, buckets, needed);
    }
    // What was not read cannot cover anything (the row was read above).
    let judge = |tx: &mut Tx<'_>| {
        let balances = tx.balances();
        let amount = i128::from(amount_minor);
        let available = balances.as_ref().and_then(|b| b.available(account_id));
        if funds && available.is_none_or(|available| available < amount) {
            return Some(LineOutcome::InsufficientFunds);
        }
        let room = balances.and_then(|b| b.room(account_id, bucket));
        room.is_none_or(|room| room < amount)
            .then_some(LineOutcome::Overflow)
    };
    if let Some(refused) = judge(tx) {
        return Ok(refused);
    }
    in_memory(tx)?.add(account_id, bucket, amount_minor)?;
    Ok(LineOutcome::Applied)
}

fn in_memory<'t>(tx: &'t mut Tx<'_>) -> StoreResult<&'t mut crate::balances::Balances> {
    tx.balances().ok_or_else(|| {
        StoreError::Unavailable("balance moves are kept only inside a group commit".into())
    })
}

/// Reads the account's buckets; with [`Read::Locked`], locking the row
/// until the transaction ends, so that nothing else may move it while the
/// batch judges debits against what it read.
async fn read_account(
    tx: &mut Tx<'_>,
    account_id: &str,
    how: Read,
) -> StoreResult<Option<Buckets>> {
    use ledger_accounts::{
        id, pending_credits_minor, pending_debits_minor, posted_credits_minor, posted_debits_minor,
    };
    let (Conn::Pg(conn), behind) = tx.parts() else {
        return Err(StoreError::Unavailable(
            "balance moves are kept only on PostgreSQL".into(),
        ));
    };
    let query = ledger_accounts::table.filter(id.eq(account_id)).select((
        posted_debits_minor,
        posted_credits_minor,
        pending_debits_minor,
        pending_credits_minor,
    ));
    let row = behind
        .drive(async {
            match how {
                Read::Locked => query.for_update().first::<(i64, i64, i64, i64)>(conn).await,
                Read::Plain => query.first::<(i64, i64, i64, i64)>(conn).await,
            }
            .optional()
        })
        .await?;
    Ok(row.map(
        |(posted_debits, posted_credits, pending_debits, pending_credits)| Buckets {
            posted_debits_minor: posted_debits,
            posted_credits_minor: posted_credits,
            pending_debits_minor: pending_debits,
            pending_credits_minor: pending_credits,
        },
    ))
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
