//! API keys: looked up by their public prefix, verified by the digest of the
//! secret part, never stored in clear.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::ApiKeyRow;
use crate::schema::{api_keys, merchants};
use crate::store::cached::Cached;
use crate::vocabulary::MerchantId;
use crate::{StoreResult, Tx};

/// Most keys one merchant may hold, revoked ones included, so that listing
/// them is bounded.
pub const KEYS_PER_MERCHANT_MAX: i64 = 200;

pub async fn insert(tx: &mut Tx<'_>, row: &ApiKeyRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(api_keys::table).values(row)).execute(conn).await)?;
    Ok(())
}

/// The key with this prefix and its merchant's status code.
pub async fn find_by_prefix(
    tx: &mut Tx<'_>,
    prefix: &str,
) -> StoreResult<Option<(ApiKeyRow, String)>> {
    let found = dispatch!(tx, conn => api_keys::table
        .inner_join(merchants::table)
        .filter(api_keys::prefix.eq(prefix))
        .select((ApiKeyRow::as_select(), merchants::status))
        .first(conn)
        .await
        .optional())?;
    Ok(found)
}

pub async fn list_for_merchant(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Vec<ApiKeyRow>> {
    let rows = dispatch!(tx, conn => api_keys::table
        .filter(api_keys::merchant_id.eq(merchant_id))
        .order((api_keys::created_at.desc(), api_keys::id.desc()))
        .limit(KEYS_PER_MERCHANT_MAX)
        .select(ApiKeyRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

pub async fn count_for_merchant(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => api_keys::table
        .filter(api_keys::merchant_id.eq(merchant_id))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}

/// Revokes the merchant's key; answers the row as it was, or `None` when the
/// merchant has no such key. Revoking twice keeps the first revocation time.
pub async fn revoke(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    key_id: &str,
    at: NaiveDateTime,
) -> StoreResult<Option<ApiKeyRow>> {
    let found = dispatch!(tx, conn => api_keys::table
        .filter(api_keys::id.eq(key_id))
        .filter(api_keys::merchant_id.eq(merchant_id))
        .select(ApiKeyRow::as_select())
        .first(conn)
        .await
        .optional())?;
    let Some(row) = found else {
        return Ok(None);
    };
    if row.revoked_at.is_none() {
        dispatch!(tx, conn => Cached(diesel::update(api_keys::table.find(key_id))
            .set(api_keys::revoked_at.eq(Some(at)))
            ).execute(conn)
            .await)?;
    }
    Ok(Some(row))
}

/// Records use; callers throttle this so reads do not turn into writes.
pub async fn touch_last_used(tx: &mut Tx<'_>, key_id: &str, at: NaiveDateTime) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::update(api_keys::table.find(key_id))
        .set(api_keys::last_used_at.eq(Some(at)))
        ).execute(conn)
        .await)?;
    Ok(())
}
