//! Sessions, found by the digest of their cookie token.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::{SessionRow, UserRow};
use crate::schema::{merchants, sessions, users};
use crate::store::cached::Cached;
use crate::{StoreResult, Tx};

pub async fn insert(tx: &mut Tx<'_>, row: &SessionRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(sessions::table).values(row)).execute(conn).await)?;
    Ok(())
}

/// The session with this token digest, its user and the user's merchant
/// status, whatever their state: callers decide what revoked, expired or
/// disabled mean for them.
pub async fn find_by_token(
    tx: &mut Tx<'_>,
    token_sha256: &str,
) -> StoreResult<Option<(SessionRow, UserRow, String)>> {
    let found = dispatch!(tx, conn => sessions::table
        .inner_join(users::table.inner_join(merchants::table))
        .filter(sessions::token_sha256.eq(token_sha256))
        .select((SessionRow::as_select(), UserRow::as_select(), merchants::status))
        .first(conn)
        .await
        .optional())?;
    Ok(found)
}

/// Revokes the session with this token digest; answers it as it was.
/// Revoking twice keeps the first revocation time.
pub async fn revoke_by_token(
    tx: &mut Tx<'_>,
    token_sha256: &str,
    at: NaiveDateTime,
) -> StoreResult<Option<SessionRow>> {
    let found = dispatch!(tx, conn => sessions::table
        .filter(sessions::token_sha256.eq(token_sha256))
        .select(SessionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    if found.as_ref().is_some_and(|row| row.revoked_at.is_none()) {
        dispatch!(tx, conn => diesel::update(sessions::table)
            .filter(sessions::token_sha256.eq(token_sha256))
            .set(sessions::revoked_at.eq(Some(at)))
            .execute(conn)
            .await)?;
    }
    Ok(found)
}

/// Revokes every live session of the user; answers how many.
pub async fn revoke_all_for_user(
    tx: &mut Tx<'_>,
    user_id: &str,
    at: NaiveDateTime,
) -> StoreResult<usize> {
    let revoked = dispatch!(tx, conn => diesel::update(sessions::table)
        .filter(sessions::user_id.eq(user_id))
        .filter(sessions::revoked_at.is_null())
        .filter(sessions::expires_at.gt(at))
        .set(sessions::revoked_at.eq(Some(at)))
        .execute(conn)
        .await)?;
    Ok(revoked)
}
