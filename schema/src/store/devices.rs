//! Devices: users' push tokens. A user has at most one active device per
//! token (a partial unique index) and at most [`ACTIVE_DEVICES_PER_USER_MAX`]
//! active devices, so listings and dispatch fan-out stay bounded.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::DeviceRow;
use crate::schema::devices;
use crate::vocabulary::{DeviceId, DeviceStatus, MerchantId, UserId};
use crate::{StoreResult, Tx};

/// Most active devices one user may hold; a dispatch targets at most these.
pub const ACTIVE_DEVICES_PER_USER_MAX: i64 = 100;

pub async fn insert(tx: &mut Tx<'_>, row: &DeviceRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(devices::table).values(row).execute(conn).await)?;
    Ok(())
}

/// The user's active device with this token digest.
pub async fn find_active_by_token(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    token_sha256: &str,
) -> StoreResult<Option<DeviceRow>> {
    let row = dispatch!(tx, conn => devices::table
        .filter(devices::user_id.eq(user_id))
        .filter(devices::token_sha256.eq(token_sha256))
        .filter(devices::status.eq(DeviceStatus::Active))
        .select(DeviceRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn count_active_for_user(tx: &mut Tx<'_>, user_id: &UserId) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => devices::table
        .filter(devices::user_id.eq(user_id))
        .filter(devices::status.eq(DeviceStatus::Active))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}

/// The device when it belongs to this merchant; another merchant's device
/// is not found, exactly like a missing one.
pub async fn find_in_merchant(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    device_id: &DeviceId,
) -> StoreResult<Option<DeviceRow>> {
    let row = dispatch!(tx, conn => devices::table
        .find(device_id)
        .filter(devices::merchant_id.eq(merchant_id))
        .select(DeviceRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Revokes an active device; answers whether this call revoked it (false
/// when it already was), so only the first revocation is audited.
pub async fn revoke(tx: &mut Tx<'_>, device_id: &DeviceId, at: NaiveDateTime) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => diesel::update(devices::table.find(device_id))
        .filter(devices::status.eq(DeviceStatus::Active))
        .set((
            devices::status.eq(DeviceStatus::Revoked),
            devices::revoked_at.eq(Some(at)),
            devices::updated_at.eq(at),
        ))
        .execute(conn)
        .await)?;
    Ok(changed == 1)
}

/// The merchant's active devices, newest first; only `user_id`'s when given.
pub async fn list_active(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    user_id: Option<&UserId>,
    limit: i64,
) -> StoreResult<Vec<DeviceRow>> {
    let rows = dispatch!(tx, conn => {
        let mut query = devices::table
            .filter(devices::merchant_id.eq(merchant_id))
            .filter(devices::status.eq(DeviceStatus::Active))
            .into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(devices::user_id.eq(user_id));
        }
        query
            .order((devices::created_at.desc(), devices::id.desc()))
            .limit(limit)
            .select(DeviceRow::as_select())
            .load(conn)
            .await
    })?;
    Ok(rows)
}

/// Every active device of the user (at most the per-user maximum), oldest
/// first: the targets of a dispatch.
pub async fn active_for_user(tx: &mut Tx<'_>, user_id: &UserId) -> StoreResult<Vec<DeviceRow>> {
    let rows = dispatch!(tx, conn => devices::table
        .filter(devices::user_id.eq(user_id))
        .filter(devices::status.eq(DeviceStatus::Active))
        .order((devices::created_at.asc(), devices::id.asc()))
        .limit(ACTIVE_DEVICES_PER_USER_MAX)
        .select(DeviceRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}
