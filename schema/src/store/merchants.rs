//! Merchants: the tenants every other resource belongs to.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::MerchantRow;
use crate::schema::merchants;
use crate::types::{utc_now, MerchantStatus};
use crate::vocabulary::MerchantId;
use crate::{StoreResult, Tx};

pub async fn insert(tx: &mut Tx<'_>, row: &MerchantRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(merchants::table).values(row).execute(conn).await)?;
    Ok(())
}

pub async fn find(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<Option<MerchantRow>> {
    let row = dispatch!(tx, conn => merchants::table
        .find(merchant_id)
        .select(MerchantRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Sets the status and answers the row as it was before, or `None` when the
/// merchant does not exist.
pub async fn set_status(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    status: MerchantStatus,
) -> StoreResult<Option<MerchantRow>> {
    let Some(before) = find(tx, merchant_id).await? else {
        return Ok(None);
    };
    let now = utc_now();
    dispatch!(tx, conn => diesel::update(merchants::table.find(merchant_id))
        .set((merchants::status.eq(status), merchants::updated_at.eq(now)))
        .execute(conn)
        .await)?;
    Ok(Some(before))
}

pub async fn count(tx: &mut Tx<'_>) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => merchants::table.count().get_result(conn).await)?;
    Ok(count)
}
