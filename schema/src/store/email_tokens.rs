//! Mailed single-use tokens (email verification, password reset).

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::EmailTokenRow;
use crate::schema::email_tokens;
use crate::vocabulary::{Purpose, UserId};
use crate::{StoreResult, Tx};

pub async fn insert(tx: &mut Tx<'_>, row: &EmailTokenRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(email_tokens::table).values(row).execute(conn).await)?;
    Ok(())
}

/// Uses the token: one conditional update, so of two concurrent uses of one
/// token exactly one wins. Answers the token's user, or `None` when the
/// token is unknown, of another purpose, expired or already used.
pub async fn consume(
    tx: &mut Tx<'_>,
    token_sha256: &str,
    purpose: Purpose,
    at: NaiveDateTime,
) -> StoreResult<Option<UserId>> {
    let user_id = dispatch!(tx, conn => diesel::update(email_tokens::table)
        .filter(email_tokens::token_sha256.eq(token_sha256))
        .filter(email_tokens::purpose.eq(purpose))
        .filter(email_tokens::used_at.is_null())
        .filter(email_tokens::expires_at.gt(at))
        .set(email_tokens::used_at.eq(Some(at)))
        .returning(email_tokens::user_id)
        .get_result::<UserId>(conn)
        .await
        .optional())?;
    Ok(user_id)
}

/// Whether the token is usable now, without using it: lets a caller refuse
/// a dead token before doing expensive work for it.
pub async fn is_live(
    tx: &mut Tx<'_>,
    token_sha256: &str,
    purpose: Purpose,
    at: NaiveDateTime,
) -> StoreResult<bool> {
    let count: i64 = dispatch!(tx, conn => email_tokens::table
        .filter(email_tokens::token_sha256.eq(token_sha256))
        .filter(email_tokens::purpose.eq(purpose))
        .filter(email_tokens::used_at.is_null())
        .filter(email_tokens::expires_at.gt(at))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count > 0)
}

/// Moves every token of the user to `at` as its expiry: for tests of
/// expiry, which cannot wait a day.
#[cfg(feature = "testing")]
pub async fn expire_all_for_user(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    at: NaiveDateTime,
) -> StoreResult<usize> {
    let changed = dispatch!(tx, conn => diesel::update(email_tokens::table)
        .filter(email_tokens::user_id.eq(user_id))
        .set(email_tokens::expires_at.eq(at))
        .execute(conn)
        .await)?;
    Ok(changed)
}

/// Marks every other unused token of the user and purpose as used: a
/// successful reset leaves no second reset link working.
pub async fn use_up_others(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    purpose: Purpose,
    at: NaiveDateTime,
) -> StoreResult<usize> {
    let changed = dispatch!(tx, conn => diesel::update(email_tokens::table)
        .filter(email_tokens::user_id.eq(user_id))
        .filter(email_tokens::purpose.eq(purpose))
        .filter(email_tokens::used_at.is_null())
        .set(email_tokens::used_at.eq(Some(at)))
        .execute(conn)
        .await)?;
    Ok(changed)
}

/// Deletes up to `limit` tokens that can never be used again (used or
/// expired); answers how many.
pub async fn purge_dead(tx: &mut Tx<'_>, now: NaiveDateTime, limit: i64) -> StoreResult<usize> {
    let digests: Vec<String> = dispatch!(tx, conn => email_tokens::table
        .filter(email_tokens::used_at.is_not_null().or(email_tokens::expires_at.le(now)))
        .limit(limit)
        .select(email_tokens::token_sha256)
        .load(conn)
        .await)?;
    if digests.is_empty() {
        return Ok(0);
    }
    let deleted = dispatch!(tx, conn => diesel::delete(
            email_tokens::table.filter(email_tokens::token_sha256.eq_any(&digests)),
        )
        .execute(conn)
        .await)?;
    Ok(deleted)
}
