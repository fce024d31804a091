//! Push dispatches and their per-device deliveries. A dispatch and its
//! deliveries are written in one transaction; each delivery then moves from
//! `pending` to `delivered` or `failed` as the gateway answers.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Conn;
use crate::dispatch;
use crate::models::{DeviceRow, PushDeliveryRow, PushDispatchRow};
use crate::schema::{devices, push_deliveries, push_dispatches};
use crate::store::cached::Cached;
use crate::vocabulary::{DeviceId, DispatchId, PushStatus};
use crate::{StoreResult, Tx};

/// Dispatches with pending deliveries picked up per query at start.
pub const PENDING_DISPATCHES_PAGE: i64 = 500;

pub async fn insert_dispatch(tx: &mut Tx<'_>, row: &PushDispatchRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(push_dispatches::table).values(row).execute(conn).await)?;
    Ok(())
}

/// Inserts a dispatch's deliveries (at most one per active device, so
/// 100): one statement on PostgreSQL; one cached statement per row on
/// SQLite, which has no round trips to save (diesel-async cannot build
/// SQLite's multi-row INSERT: diesel_async#277).
pub async fn insert_deliveries(tx: &mut Tx<'_>, rows: &[PushDeliveryRow]) -> StoreResult<()> {
    match tx.conn().await? {
        Conn::Pg(conn) if rows.len() > 1 => {
            diesel::insert_into(push_deliveries::table)
                .values(rows)
                .execute(conn)
                .await?;
        }
        _ => {
            for row in rows {
                dispatch!(tx, conn => Cached(diesel::insert_into(push_deliveries::table).values(row)).execute(conn).await)?;
            }
        }
    }
    Ok(())
}

pub async fn find_dispatch(
    tx: &mut Tx<'_>,
    dispatch_id: &DispatchId,
) -> StoreResult<Option<PushDispatchRow>> {
    let row = dispatch!(tx, conn => push_dispatches::table
        .find(dispatch_id)
        .select(PushDispatchRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The dispatch's deliveries still pending, with their devices.
pub async fn pending_deliveries(
    tx: &mut Tx<'_>,
    dispatch_id: &DispatchId,
) -> StoreResult<Vec<(PushDeliveryRow, DeviceRow)>> {
    let rows = dispatch!(tx, conn => push_deliveries::table
        .inner_join(devices::table)
        .filter(push_deliveries::dispatch_id.eq(dispatch_id))
        .filter(push_deliveries::status.eq(PushStatus::Pending))
        .order(push_deliveries::device_id.asc())
        .select((PushDeliveryRow::as_select(), DeviceRow::as_select()))
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Every delivery of the dispatch, in device order.
pub async fn deliveries(
    tx: &mut Tx<'_>,
    dispatch_id: &DispatchId,
) -> StoreResult<Vec<PushDeliveryRow>> {
    let rows = dispatch!(tx, conn => push_deliveries::table
        .filter(push_deliveries::dispatch_id.eq(dispatch_id))
        .order(push_deliveries::device_id.asc())
        .select(PushDeliveryRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Dispatches that still have pending deliveries, oldest first, after
/// `after` (a dispatch id; ids sort by time) for paging.
pub async fn pending_dispatch_ids(
    tx: &mut Tx<'_>,
    after: Option<&DispatchId>,
    limit: i64,
) -> StoreResult<Vec<DispatchId>> {
    let after = after.map_or("", DispatchId::as_str);
    let ids = dispatch!(tx, conn => push_deliveries::table
        .filter(push_deliveries::status.eq(PushStatus::Pending))
        .filter(push_deliveries::dispatch_id.gt(after))
        .select(push_deliveries::dispatch_id)
        .distinct()
        .order(push_deliveries::dispatch_id.asc())
        .limit(limit)
        .load::<DispatchId>(conn)
        .await)?;
    Ok(ids)
}

/// What one attempt (or the last one) left of a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryOutcome<'a> {
    pub status: PushStatus,
    pub attempts: i32,
    pub last_error: Option<&'a str>,
    pub provider_message_id: Option<&'a str>,
    pub at: NaiveDateTime,
}

/// Records an outcome on a delivery that is still pending; a delivery that
/// already has a final outcome keeps it (a resumed send after a crash may
/// race the original one on another node).
pub async fn record(
    tx: &mut Tx<'_>,
    dispatch_id: &DispatchId,
    device_id: &DeviceId,
    outcome: &DeliveryOutcome<'_>,
) -> StoreResult<()> {
    let delivered_at = (outcome.status == PushStatus::Delivered).then_some(outcome.at);
    dispatch!(tx, conn => diesel::update(push_deliveries::table.find((dispatch_id, device_id)))
        .filter(push_deliveries::status.eq(PushStatus::Pending))
        .set((
            push_deliveries::status.eq(outcome.status),
            push_deliveries::attempts.eq(outcome.attempts),
            push_deliveries::last_error.eq(outcome.last_error),
            push_deliveries::provider_message_id.eq(outcome.provider_message_id),
            push_deliveries::updated_at.eq(outcome.at),
            push_deliveries::delivered_at.eq(delivered_at),
        ))
        .execute(conn)
        .await)?;
    Ok(())
}

/// The dispatch recorded for this signed request, with how many devices it
/// targeted: what a replay of the request answers.
pub async fn find_by_replay(
    tx: &mut Tx<'_>,
    replay_sha256: &str,
) -> StoreResult<Option<(DispatchId, i64)>> {
    let found: Option<DispatchId> = dispatch!(tx, conn => push_dispatches::table
        .filter(push_dispatches::replay_sha256.eq(replay_sha256))
        .select(push_dispatches::id)
        .first(conn)
        .await
        .optional())?;
    let Some(dispatch_id) = found else {
        return Ok(None);
    };
    let devices: i64 = dispatch!(tx, conn => push_deliveries::table
        .filter(push_deliveries::dispatch_id.eq(&dispatch_id))
        .count()
        .get_result(conn)
        .await)?;
    Ok(Some((dispatch_id, devices)))
}
