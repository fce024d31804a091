//! Settlement rows. Every update after creation is a compare-and-swap on
//! `version`: zero rows changed means another writer (maybe another node)
//! got there first, and the caller must reload.

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::db::one_row;
use crate::models::{IdempotencyRow, LedgerEntryRow, LedgerTransactionRow, SettlementRow};
use crate::schema::settlements;
use crate::store::cached::Cached;
use crate::{dispatch, write_behind};
use crate::{Conn, Refusal, StoreError, StoreResult, Tx};

/// Statuses with work left for an actor (a succeeded settlement may still
/// have a reversal under way, see [`with_work_left`]).
pub const ACTIVE_STATUSES: [&str; 3] = ["pending", "in_flight", "retrying"];

/// Pipelined inside a group commit on PostgreSQL (see [`crate::db::Behind`]).
pub async fn insert(tx: &mut Tx<'_>, row: &SettlementRow) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::insert_into(settlements::table).values(row)).execute(conn),
        one_row("settlements insert"))
}

pub async fn find(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    key: &str,
) -> StoreResult<Option<SettlementRow>> {
    let row = dispatch!(tx, conn => settlements::table
        .find((merchant_id, key))
        .select(SettlementRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The merchant's settlements, newest first, optionally of one status.
pub async fn list(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    status: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<SettlementRow>> {
    let rows = dispatch!(tx, conn => {
        // `created_at IS NOT NULL` (always true) is the predicate of the
        // partial listing index, which only queries stating it can use
        // (migration 000009).
        let mut query = settlements::table
            .filter(settlements::merchant_id.eq(merchant_id))
            .filter(settlements::created_at.is_not_null())
            .into_boxed();
        if let Some(status) = status {
            query = query.filter(settlements::status.eq(status));
        }
        query
            .order((settlements::created_at.desc(), settlements::idempotency_key.desc()))
            .limit(limit)
            .select(SettlementRow::as_select())
            .load(conn)
            .await
    })?;
    Ok(rows)
}

/// Writes `next` (with `next.version` already advanced) if the stored row
/// still has `expected_version`, failing with [`StoreError::Conflict`]
/// otherwise. Pipelined inside a group commit on PostgreSQL, where the
/// conflict surfaces when the unit ends and rolls the unit back.
///
/// [`StoreError::Conflict`]: crate::StoreError::Conflict
pub async fn update_at_version(
    tx: &mut Tx<'_>,
    next: &SettlementRow,
    expected_version: i64,
) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::update(
            settlements::table
                .filter(settlements::merchant_id.eq(&next.merchant_id))
                .filter(settlements::idempotency_key.eq(&next.idempotency_key))
                .filter(settlements::version.eq(expected_version)),
        )
        .set(next)
        ).execute(conn), one_row("settlement changed by another writer"))
}

/// Writes `next` (with `next.version` already advanced) if the stored row
/// still has `expected_version`; answers whether it did.
pub async fn update_if_version(
    tx: &mut Tx<'_>,
    next: &SettlementRow,
    expected_version: i64,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => Cached(diesel::update(
            settlements::table
                .filter(settlements::merchant_id.eq(&next.merchant_id))
                .filter(settlements::idempotency_key.eq(&next.idempotency_key))
                .filter(settlements::version.eq(expected_version)),
        )
        .set(next)
        ).execute(conn)
        .await)?;
    Ok(changed == 1)
}

/// (merchant id, key) of settlements with work left, after `after` in key
/// order, for recovery at start.
pub async fn with_work_left(
    tx: &mut Tx<'_>,
    after: (&str, &str),
    limit: i64,
) -> StoreResult<Vec<(String, String)>> {
    let (after_merchant, after_key) = after;
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::status.eq_any(ACTIVE_STATUSES).or(settlements::reversal.ne("none")))
        .filter(
            settlements::merchant_id.gt(after_merchant).or(settlements::merchant_id
                .eq(after_merchant)
                .and(settlements::idempotency_key.gt(after_key))),
        )
        .order((settlements::merchant_id.asc(), settlements::idempotency_key.asc()))
        .limit(limit)
        .select((settlements::merchant_id, settlements::idempotency_key))
        .load(conn)
        .await)?;
    Ok(rows)
}

/// The merchant's settlements with these keys (a transfer's legs), in no
/// particular order; missing keys are simply absent.
pub async fn find_many(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    keys: &[&str],
) -> StoreResult<Vec<SettlementRow>> {
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::merchant_id.eq(merchant_id))
        .filter(settlements::idempotency_key.eq_any(keys))
        .select(SettlementRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// What a settlement's creation writes besides its row: its hold (a
/// ledger transaction and its lines), if it has one, and the answer
/// recorded for its Idempotency-Key.
pub struct Created<'r> {
    pub hold: Option<(&'r LedgerTransactionRow, &'r [LedgerEntryRow])>,
    pub answer: &'r IdempotencyRow,
}

/// A settlement's creation inside a group commit on PostgreSQL, as one
/// statement that makes the row, its hold and its recorded answer, or
/// nothing if the key is taken: the row's insert claims the key, and every
/// other insert selects from what it inserted. The unit therefore needs no
/// savepoint and nothing waits for the answer (see
/// [`crate::commit::Rollback::Claim`]); a taken key refuses with
/// [`Refusal::KeyTaken`]. Elsewhere the same rows are written one
/// statement each, in a unit of their own.
pub async fn insert_claimed(
    tx: &mut Tx<'_>,
    row: &SettlementRow,
    created: Created<'_>,
) -> StoreResult<()> {
    let (Conn::Pg(conn), behind) = tx.parts() else {
        return Err(StoreError::Unavailable(
            "a claimed insert is made only on PostgreSQL".into(),
        ));
    };
    let claim = Claimed {
        settlement: diesel::insert_into(settlements::table)
            .values(row)
            .on_conflict_do_nothing()
            .returning(settlements::version),
        created,
    };
    let write = Cached(claim).execute(conn);
    behind
        .send(Box::pin(write), |claimed| match claimed {
            1 => Ok(()),
            _ => Err(StoreError::Refused(Refusal::KeyTaken)),
        })
        .await
}

/// `WITH claimed AS (INSERT INTO settlements ... ON CONFLICT DO NOTHING
/// RETURNING ...), hold AS (INSERT ... SELECT ... FROM claimed), ...
/// SELECT 1 FROM claimed`: one row changed when the key was free, none
/// otherwise. The foreign keys of the hold's lines are checked when the
/// statement ends, after every insert in it.
struct Claimed<'r, S> {
    settlement: S,
    created: Created<'r>,
}

/// Pushes `value`s as binds of their SQL types, separated by commas.
macro_rules! binds {
    ($out:ident, $first_type:ty => $first:expr $(, $sql_type:ty => $value:expr)* $(,)?) => {{
        $out.push_bind_param::<$first_type, _>($first)?;
        $(
            $out.push_sql(", ");
            $out.push_bind_param::<$sql_type, _>($value)?;
        )*
    }};
}

impl<S: QueryFragment<Pg>> QueryFragment<Pg> for Claimed<'_, S> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("WITH claimed AS (");
        self.settlement.walk_ast(out.reborrow())?;
        out.push_sql(")");
        if let Some((hold, lines)) = self.created.hold {
            out.push_sql(
                ", hold AS (INSERT INTO ledger_transactions (id, status, merchant_id, \
                 settlement_key, description, created_at, updated_at) SELECT ",
            );
            binds!(out,
                Text => &hold.id,
                Text => &hold.status,
                Nullable<Text> => &hold.merchant_id,
                Nullable<Text> => &hold.settlement_key,
                Text => &hold.description,
                Timestamp => &hold.created_at,
                Timestamp => &hold.updated_at,
            );
            out.push_sql(" FROM claimed), lines AS (INSERT INTO ledger_entries (id, transaction_id, \
                 account_id, direction, amount_minor, currency, created_at) SELECT line.* FROM claimed, (VALUES ");
            for (index, line) in lines.iter().enumerate() {
                out.push_sql(if index == 0 { "(" } else { ", (" });
                binds!(out,
                    Text => &line.id,
                    Text => &line.transaction_id,
                    Text => &line.account_id,
                    Text => &line.direction,
                    BigInt => &line.amount_minor,
                    Text => &line.currency,
                    Timestamp => &line.created_at,
                );
                out.push_sql(")");
            }
            out.push_sql(") AS line)");
        }
        let answer = self.created.answer;
        out.push_sql(
            ", answer AS (INSERT INTO idempotency_records (merchant_id, scope, idempotency_key, \
             request_sha256, state, response_status, response_body, created_at, updated_at) SELECT ",
        );
        binds!(out,
            Text => &answer.merchant_id,
            Text => &answer.scope,
            Text => &answer.idempotency_key,
            Text => &answer.request_sha256,
            Text => &answer.state,
            Nullable<Integer> => &answer.response_status,
            Nullable<Text> => &answer.response_body,
            Timestamp => &answer.created_at,
            Timestamp => &answer.updated_at,
        );
        out.push_sql(" FROM claimed) SELECT 1 FROM claimed");
        Ok(())
    }
}
