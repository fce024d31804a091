//! Sessions, found by the digest of their cookie token.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::{SessionRow, UserRow};
use crate::schema::{merchants, sessions, users};
use crate::store::cached::Cached;
use crate::vocabulary::UserId;
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
    user_id: &UserId,
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

/// Most sessions one listing shows, newest first.
pub const SESSIONS_LISTED_MAX: i64 = 100;
/// Most rows one purge run deletes per table.
pub const PURGE_BATCH_MAX: i64 = 1_000;

/// The user's live sessions, newest first: not revoked, before their
/// absolute expiry, and seen after `idle_cutoff`.
pub async fn live_for_user(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    now: NaiveDateTime,
    idle_cutoff: NaiveDateTime,
) -> StoreResult<Vec<SessionRow>> {
    let rows = dispatch!(tx, conn => sessions::table
        .filter(sessions::user_id.eq(user_id))
        .filter(sessions::revoked_at.is_null())
        .filter(sessions::expires_at.gt(now))
        .filter(sessions::last_seen_at.gt(idle_cutoff))
        .order((sessions::created_at.desc(), sessions::id.desc()))
        .limit(SESSIONS_LISTED_MAX)
        .select(SessionRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Revokes the user's session with this id; answers it as it was, or
/// `None` when the user has no such session (another user's included).
pub async fn revoke_for_user(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    session_id: &str,
    at: NaiveDateTime,
) -> StoreResult<Option<SessionRow>> {
    let found = dispatch!(tx, conn => sessions::table
        .filter(sessions::id.eq(session_id))
        .filter(sessions::user_id.eq(user_id))
        .select(SessionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    if found.as_ref().is_some_and(|row| row.revoked_at.is_none()) {
        dispatch!(tx, conn => diesel::update(sessions::table.find(session_id))
            .filter(sessions::revoked_at.is_null())
            .set(sessions::revoked_at.eq(Some(at)))
            .execute(conn)
            .await)?;
    }
    Ok(found)
}

/// Revokes every unrevoked session of the user but `keep`; answers how many.
pub async fn revoke_others(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    keep: &str,
    at: NaiveDateTime,
) -> StoreResult<usize> {
    let revoked = dispatch!(tx, conn => diesel::update(sessions::table)
        .filter(sessions::user_id.eq(user_id))
        .filter(sessions::id.ne(keep))
        .filter(sessions::revoked_at.is_null())
        .set(sessions::revoked_at.eq(Some(at)))
        .execute(conn)
        .await)?;
    Ok(revoked)
}

/// Records use of the session, unless a write since `stale_before`
/// already did: concurrent requests of one session write once.
pub async fn touch_last_seen(
    tx: &mut Tx<'_>,
    session_id: &str,
    stale_before: NaiveDateTime,
    at: NaiveDateTime,
) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::update(sessions::table.find(session_id))
        .filter(sessions::last_seen_at.lt(stale_before))
        .set(sessions::last_seen_at.eq(at))
        .execute(conn)
        .await)?;
    Ok(())
}

/// Deletes up to [`PURGE_BATCH_MAX`] sessions that can never be used
/// again: revoked, past their absolute expiry, or idle since before
/// `idle_cutoff`. Answers how many.
pub async fn purge_dead(
    tx: &mut Tx<'_>,
    now: NaiveDateTime,
    idle_cutoff: NaiveDateTime,
) -> StoreResult<usize> {
    let ids: Vec<String> = dispatch!(tx, conn => sessions::table
        .filter(
            sessions::revoked_at
                .is_not_null()
                .or(sessions::expires_at.le(now))
                .or(sessions::last_seen_at.le(idle_cutoff)),
        )
        .limit(PURGE_BATCH_MAX)
        .select(sessions::id)
        .load(conn)
        .await)?;
    if ids.is_empty() {
        return Ok(0);
    }
    let deleted = dispatch!(tx, conn => diesel::delete(sessions::table.filter(sessions::id.eq_any(&ids)))
        .execute(conn)
        .await)?;
    Ok(deleted)
}

/// Moves the session's last use to `at`: for tests of the idle timeout.
#[cfg(feature = "testing")]
pub async fn set_last_seen(
    tx: &mut Tx<'_>,
    session_id: &str,
    at: NaiveDateTime,
) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::update(sessions::table.find(session_id))
        .set(sessions::last_seen_at.eq(at))
        .execute(conn)
        .await)?;
    Ok(())
}
