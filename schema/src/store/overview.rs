//! What an operator's summary (`tern status`) and the operator console
//! read: work in flight by status, and dead-lettered webhook events by
//! merchant. Each one bounded statement.

use chrono::NaiveDateTime;
use diesel::dsl::count_star;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Tx;
use crate::schema::{merchants, settlements, transfers, webhook_events};
use crate::vocabulary::{MerchantId, Reversal, TransferId};
use crate::{dispatch, StoreResult};

use super::settlements::ACTIVE_STATUSES;
use super::transfers::TERMINAL_STATUSES;
use super::webhooks::DEAD;

/// Settlements with work left (active, or a reversal under way), by status.
pub async fn settlements_in_flight(tx: &mut Tx<'_>) -> StoreResult<Vec<(String, i64)>> {
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::status.eq_any(ACTIVE_STATUSES).or(settlements::reversal.ne(Reversal::None)))
        .group_by(settlements::status)
        .select((settlements::status, count_star()))
        .order(settlements::status.asc())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Transfers not yet terminal, by status.
pub async fn transfers_in_flight(tx: &mut Tx<'_>) -> StoreResult<Vec<(String, i64)>> {
    let rows = dispatch!(tx, conn => transfers::table
        .filter(transfers::status.ne_all(TERMINAL_STATUSES))
        .group_by(transfers::status)
        .select((transfers::status, count_star()))
        .order(transfers::status.asc())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Merchants with dead-lettered webhook events, most first, at most
/// `limit`: what waits for a replay.
pub async fn dead_letters_by_merchant(
    tx: &mut Tx<'_>,
    limit: i64,
) -> StoreResult<Vec<(MerchantId, i64)>> {
    let rows = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::status.eq(DEAD))
        .group_by(webhook_events::merchant_id)
        .select((webhook_events::merchant_id, count_star()))
        .order((count_star().desc(), webhook_events::merchant_id.asc()))
        .limit(limit)
        .load(conn)
        .await)?;
    Ok(rows)
}

/// A dead-lettered webhook event as the operator console lists it.
#[derive(Clone, Debug, PartialEq, Eq, Queryable)]
pub struct DeadLetter {
    pub event_id: String,
    pub merchant_id: MerchantId,
    pub transfer_id: TransferId,
    pub event_type: String,
    /// Attempts in the round that ended in the dead letter.
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    /// When the last attempt gave up: the event's last change.
    pub dead_since: NaiveDateTime,
}

/// Dead-lettered events, at most `limit`, grouped by merchant then transfer
/// (in the transfer's event order), with the count of all of them: what
/// the console lists with a replay button per transfer.
pub async fn dead_letters(tx: &mut Tx<'_>, limit: i64) -> StoreResult<(Vec<DeadLetter>, i64)> {
    let total: i64 = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::status.eq(DEAD))
        .count()
        .get_result(conn)
        .await)?;
    let rows = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::status.eq(DEAD))
        .order((
            webhook_events::merchant_id.asc(),
            webhook_events::transfer_id.asc(),
            webhook_events::seq.asc(),
        ))
        .select((
            webhook_events::id,
            webhook_events::merchant_id,
            webhook_events::transfer_id,
            webhook_events::event_type,
            webhook_events::attempts,
            webhook_events::last_status_code,
            webhook_events::last_error,
            webhook_events::updated_at,
        ))
        .limit(limit)
        .load(conn)
        .await)?;
    Ok((rows, total))
}

/// The organization names of these merchants, by id (unknown ids are left
/// out). At most as many rows as ids given.
pub async fn merchant_names(
    tx: &mut Tx<'_>,
    ids: &[&MerchantId],
) -> StoreResult<Vec<(MerchantId, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = dispatch!(tx, conn => merchants::table
        .filter(merchants::id.eq_any(ids.iter().copied()))
        .select((merchants::id, merchants::organization_name))
        .load(conn)
        .await)?;
    Ok(rows)
}
