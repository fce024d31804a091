//! Provider webhooks as received.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::InboundEventRow;
use crate::schema::inbound_events;
use crate::store::cached::Cached;
use crate::{StoreResult, Tx};

/// Records the event unless its id was seen before; answers whether it is new.
pub async fn insert_if_new(tx: &mut Tx<'_>, row: &InboundEventRow) -> StoreResult<bool> {
    let inserted = dispatch!(tx, conn => Cached(diesel::insert_into(inbound_events::table)
        .values(row)
        .on_conflict_do_nothing()
        ).execute(conn)
        .await)?;
    Ok(inserted == 1)
}

pub async fn find(
    tx: &mut Tx<'_>,
    provider: &str,
    event_id: &str,
) -> StoreResult<Option<InboundEventRow>> {
    let row = dispatch!(tx, conn => inbound_events::table
        .find((provider, event_id))
        .select(InboundEventRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn count(tx: &mut Tx<'_>, provider: &str) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => inbound_events::table
        .filter(inbound_events::provider.eq(provider))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}
