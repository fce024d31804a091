//! Settlement rows. Every update after creation is a compare-and-swap on
//! `version`: zero rows changed means another writer (maybe another node)
//! got there first, and the caller must reload.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::one_row;
use crate::models::SettlementRow;
use crate::schema::settlements;
use crate::store::cached::Cached;
use crate::vocabulary::{MerchantId, Reversal, SettlementKey, SettlementStatus};
use crate::{dispatch, write_behind};
use crate::{StoreResult, Tx};

/// Statuses with work left for an actor (a succeeded settlement may still
/// have a reversal under way, see [`with_work_left`]).
pub const ACTIVE_STATUSES: [SettlementStatus; 3] = SettlementStatus::ACTIVE;

/// Pipelined inside a group commit on PostgreSQL (see [`crate::db::Behind`]).
pub async fn insert(tx: &mut Tx<'_>, row: &SettlementRow) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::insert_into(settlements::table).values(row)).execute(conn),
        one_row("settlements insert"))
}

pub async fn find(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    key: &SettlementKey,
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
    merchant_id: &MerchantId,
    status: Option<SettlementStatus>,
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
) -> StoreResult<Vec<(MerchantId, SettlementKey)>> {
    let (after_merchant, after_key) = after;
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::status.eq_any(ACTIVE_STATUSES).or(settlements::reversal.ne(Reversal::None)))
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
    merchant_id: &MerchantId,
    keys: &[SettlementKey],
) -> StoreResult<Vec<SettlementRow>> {
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::merchant_id.eq(merchant_id))
        .filter(settlements::idempotency_key.eq_any(keys))
        .select(SettlementRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}
