//! Quote rows: written once when priced, read by their merchant (GET, and
//! the transfer that binds one). Never updated or deleted: an expired quote
//! stays for audit.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::QuoteRow;
use crate::schema::quotes;
use crate::store::cached::Cached;
use crate::vocabulary::{MerchantId, QuoteId};
use crate::{StoreResult, Tx};

pub async fn insert(tx: &mut Tx<'_>, row: &QuoteRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(quotes::table).values(row)).execute(conn).await)?;
    Ok(())
}

/// The merchant's quote with this id, expired or not; another merchant's
/// quote is `None`, exactly like a missing one.
pub async fn find_for_merchant(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    quote_id: &QuoteId,
) -> StoreResult<Option<QuoteRow>> {
    let row = dispatch!(tx, conn => quotes::table
        .filter(quotes::id.eq(quote_id))
        .filter(quotes::merchant_id.eq(merchant_id))
        .select(QuoteRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}
