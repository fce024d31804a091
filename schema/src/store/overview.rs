//! What an operator's summary (`tern status`) reads: work in flight by
//! status, and dead-lettered webhook events by merchant. Aggregates only,
//! each one bounded statement.

use diesel::dsl::count_star;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Tx;
use crate::schema::{settlements, transfers, webhook_events};
use crate::{dispatch, StoreResult};

use super::settlements::ACTIVE_STATUSES;
use super::transfers::TERMINAL_STATUSES;
use super::webhooks::DEAD;

/// Settlements with work left (active, or a reversal under way), by status.
pub async fn settlements_in_flight(tx: &mut Tx<'_>) -> StoreResult<Vec<(String, i64)>> {
    let rows = dispatch!(tx, conn => settlements::table
        .filter(settlements::status.eq_any(ACTIVE_STATUSES).or(settlements::reversal.ne("none")))
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
) -> StoreResult<Vec<(String, i64)>> {
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
