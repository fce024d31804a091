//! Webhook endpoints, the outbox of transfer events and their delivery
//! attempts. The merchant's endpoint actor is the only writer of a pending
//! event's delivery state; the transfer's actor only inserts events.

use chrono::NaiveDateTime;
use diesel::dsl::{exists, not};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::{
    WebhookAttemptRow, WebhookDeliveryChange, WebhookEndpointRow, WebhookEventRow,
};
use crate::schema::{webhook_attempts, webhook_endpoints, webhook_events};
use crate::store::cached::Cached;
use crate::{StoreResult, Tx};

use crate::vocabulary::{DeliveryStatus, EventId, MerchantId, TransferId};

pub const PENDING: DeliveryStatus = DeliveryStatus::Pending;
pub const DELIVERED: DeliveryStatus = DeliveryStatus::Delivered;
pub const DEAD: DeliveryStatus = DeliveryStatus::Dead;
pub const SKIPPED: DeliveryStatus = DeliveryStatus::Skipped;
/// Every delivery status, for filters.
pub const STATUSES: [DeliveryStatus; 4] = DeliveryStatus::ALL;

pub async fn endpoint(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Option<WebhookEndpointRow>> {
    let row = dispatch!(tx, conn => webhook_endpoints::table
        .find(merchant_id)
        .select(WebhookEndpointRow::as_select())
        .get_result(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Stores the endpoint, replacing an earlier one (whose `created_at` the
/// caller keeps in `row`).
pub async fn put_endpoint(tx: &mut Tx<'_>, row: &WebhookEndpointRow) -> StoreResult<()> {
    let updated = dispatch!(tx, conn => diesel::update(webhook_endpoints::table.find(&row.merchant_id))
        .set(row)
        .execute(conn)
        .await)?;
    if updated == 0 {
        dispatch!(tx, conn => diesel::insert_into(webhook_endpoints::table)
            .values(row)
            .execute(conn)
            .await)?;
    }
    Ok(())
}

/// Removes the endpoint; answers whether there was one.
pub async fn delete_endpoint(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<bool> {
    let deleted = dispatch!(tx, conn => diesel::delete(webhook_endpoints::table.find(merchant_id))
        .execute(conn)
        .await)?;
    Ok(deleted == 1)
}

pub async fn insert_event(tx: &mut Tx<'_>, row: &WebhookEventRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(webhook_events::table).values(row))
        .execute(conn)
        .await)?;
    Ok(())
}

/// Pending events of the merchant due at `now` that head their transfer's
/// queue (no earlier event of the same transfer is still pending), oldest
/// due first: what may be attempted now without breaking a transfer's order.
pub async fn due_heads(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    now: NaiveDateTime,
    limit: i64,
) -> StoreResult<Vec<WebhookEventRow>> {
    let earlier = diesel::alias!(webhook_events as earlier);
    let rows = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::merchant_id.eq(merchant_id))
        .filter(webhook_events::status.eq(PENDING))
        .filter(webhook_events::next_attempt_at.le(now))
        .filter(not(exists(
            earlier
                .filter(earlier.field(webhook_events::transfer_id).eq(webhook_events::transfer_id))
                .filter(earlier.field(webhook_events::status).eq(PENDING))
                .filter(earlier.field(webhook_events::seq).lt(webhook_events::seq))
                .select(earlier.field(webhook_events::id)),
        )))
        .order((
            webhook_events::next_attempt_at.asc(),
            webhook_events::created_at.asc(),
            webhook_events::id.asc(),
        ))
        .limit(limit)
        .select(WebhookEventRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// The events with these ids, of this merchant.
pub async fn find_events(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    ids: &[EventId],
) -> StoreResult<Vec<WebhookEventRow>> {
    let rows = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::merchant_id.eq(merchant_id))
        .filter(webhook_events::id.eq_any(ids))
        .select(WebhookEventRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Writes an attempted event's new delivery state if it is still pending in
/// the round the attempt belonged to, with the attempt's record; answers
/// whether it did (a replay or a removal in between wins).
pub async fn record_attempt(
    tx: &mut Tx<'_>,
    next: &WebhookEventRow,
    attempt: &WebhookAttemptRow,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => Cached(diesel::update(
            webhook_events::table
                .filter(webhook_events::id.eq(&next.id))
                .filter(webhook_events::status.eq(PENDING))
                .filter(webhook_events::round.eq(attempt.round)),
        )
        .set(WebhookDeliveryChange::from(next)))
        .execute(conn)
        .await)?;
    if changed == 1 {
        dispatch!(tx, conn => Cached(diesel::insert_into(webhook_attempts::table).values(attempt))
            .execute(conn)
            .await)?;
    }
    Ok(changed == 1)
}

/// Marks the merchant's pending events skipped (the endpoint went away);
/// answers how many.
pub async fn skip_pending(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    now: NaiveDateTime,
) -> StoreResult<usize> {
    let changed = dispatch!(tx, conn => diesel::update(
            webhook_events::table
                .filter(webhook_events::merchant_id.eq(merchant_id))
                .filter(webhook_events::status.eq(PENDING)),
        )
        .set((
            webhook_events::status.eq(SKIPPED),
            webhook_events::next_attempt_at.eq(None::<NaiveDateTime>),
            webhook_events::updated_at.eq(now),
        ))
        .execute(conn)
        .await)?;
    Ok(changed)
}

/// Re-arms the transfer's delivered and dead-lettered events for an attempt
/// at `now`, in a new round with a fresh retry schedule; answers how many.
pub async fn rearm(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    transfer_id: &TransferId,
    now: NaiveDateTime,
) -> StoreResult<usize> {
    let changed = dispatch!(tx, conn => diesel::update(
            webhook_events::table
                .filter(webhook_events::merchant_id.eq(merchant_id))
                .filter(webhook_events::transfer_id.eq(transfer_id))
                .filter(webhook_events::status.eq_any([DELIVERED, DEAD])),
        )
        .set((
            webhook_events::status.eq(PENDING),
            webhook_events::attempts.eq(0),
            webhook_events::round.eq(webhook_events::round + 1),
            webhook_events::next_attempt_at.eq(Some(now)),
            webhook_events::updated_at.eq(now),
        ))
        .execute(conn)
        .await)?;
    Ok(changed)
}

/// Merchants with pending events, after `after` in id order: what recovery
/// re-activates at start.
pub async fn merchants_with_pending(
    tx: &mut Tx<'_>,
    after: &str,
    limit: i64,
) -> StoreResult<Vec<MerchantId>> {
    let ids = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::status.eq(PENDING))
        .filter(webhook_events::merchant_id.gt(after))
        .select(webhook_events::merchant_id)
        .distinct()
        .order(webhook_events::merchant_id.asc())
        .limit(limit)
        .load(conn)
        .await)?;
    Ok(ids)
}

/// The earliest due time among the merchant's pending events.
pub async fn next_due(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Option<NaiveDateTime>> {
    let due = dispatch!(tx, conn => webhook_events::table
        .filter(webhook_events::merchant_id.eq(merchant_id))
        .filter(webhook_events::status.eq(PENDING))
        .select(diesel::dsl::min(webhook_events::next_attempt_at))
        .get_result(conn)
        .await)?;
    Ok(due)
}

/// One page of the merchant's events, newest first, optionally of one
/// transfer and one delivery status, with each event's attempts in order.
pub async fn list(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    transfer_id: Option<&TransferId>,
    status: Option<DeliveryStatus>,
    limit: i64,
) -> StoreResult<Vec<(WebhookEventRow, Vec<WebhookAttemptRow>)>> {
    let events: Vec<WebhookEventRow> = dispatch!(tx, conn => {
        let mut query = webhook_events::table
            .filter(webhook_events::merchant_id.eq(merchant_id))
            .into_boxed();
        if let Some(transfer_id) = transfer_id {
            query = query.filter(webhook_events::transfer_id.eq(transfer_id));
        }
        if let Some(status) = status {
            query = query.filter(webhook_events::status.eq(status));
        }
        query
            .order((webhook_events::created_at.desc(), webhook_events::id.desc()))
            .limit(limit)
            .select(WebhookEventRow::as_select())
            .load(conn)
            .await
    })?;
    let ids: Vec<&str> = events.iter().map(|event| event.id.as_str()).collect();
    let attempts: Vec<WebhookAttemptRow> = if ids.is_empty() {
        Vec::new()
    } else {
        dispatch!(tx, conn => webhook_attempts::table
            .filter(webhook_attempts::event_id.eq_any(&ids))
            .order((
                webhook_attempts::event_id.asc(),
                webhook_attempts::round.asc(),
                webhook_attempts::attempt.asc(),
            ))
            .select(WebhookAttemptRow::as_select())
            .load(conn)
            .await)?
    };
    Ok(events
        .into_iter()
        .map(|event| {
            let mine = attempts
                .iter()
                .filter(|attempt| attempt.event_id == event.id)
                .cloned()
                .collect();
            (event, mine)
        })
        .collect())
}
