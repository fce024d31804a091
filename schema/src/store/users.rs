//! Users: human accounts, found by id or by their normalised email.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::UserRow;
use crate::schema::{merchants, users};
use crate::vocabulary::{MerchantId, MerchantStatus, UserId, UserStatus};
use crate::{StoreResult, Tx};

pub async fn insert(tx: &mut Tx<'_>, row: &UserRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(users::table).values(row).execute(conn).await)?;
    Ok(())
}

pub async fn find(tx: &mut Tx<'_>, user_id: &UserId) -> StoreResult<Option<UserRow>> {
    let row = dispatch!(tx, conn => users::table
        .find(user_id)
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The user when it belongs to this merchant; another merchant's user is
/// not found, exactly like a missing one.
pub async fn find_in_merchant(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    user_id: &UserId,
) -> StoreResult<Option<UserRow>> {
    let row = dispatch!(tx, conn => users::table
        .find(user_id)
        .filter(users::merchant_id.eq(merchant_id))
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The user's status and its merchant's, read together: what decides
/// whether the user's cards may spend (decisions §1a). `None` when there is
/// no such user.
pub async fn standing(
    tx: &mut Tx<'_>,
    user_id: &UserId,
) -> StoreResult<Option<(UserStatus, MerchantStatus)>> {
    let row = dispatch!(tx, conn => users::table
        .inner_join(merchants::table)
        .filter(users::id.eq(user_id))
        .select((users::status, merchants::status))
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// `email` must already be normalised (trimmed, lowercased).
pub async fn find_by_email(tx: &mut Tx<'_>, email: &str) -> StoreResult<Option<UserRow>> {
    let row = dispatch!(tx, conn => users::table
        .filter(users::email.eq(email))
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn set_name(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    name: &str,
    at: NaiveDateTime,
) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::update(users::table.find(user_id))
        .set((users::name.eq(name), users::updated_at.eq(at)))
        .execute(conn)
        .await)?;
    Ok(())
}

pub async fn set_password_hash(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    password_hash: &str,
    at: NaiveDateTime,
) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::update(users::table.find(user_id))
        .set((users::password_hash.eq(password_hash), users::updated_at.eq(at)))
        .execute(conn)
        .await)?;
    Ok(())
}

/// Marks the email verified; a second verification keeps the first time.
pub async fn mark_email_verified(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    at: NaiveDateTime,
) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::update(users::table.find(user_id))
        .filter(users::email_verified_at.is_null())
        .set((users::email_verified_at.eq(Some(at)), users::updated_at.eq(at)))
        .execute(conn)
        .await)?;
    Ok(())
}

/// Sets the status of the user with this (normalised) email; answers the
/// row as it was, or `None` when there is no such user.
pub async fn set_status_by_email(
    tx: &mut Tx<'_>,
    email: &str,
    status: UserStatus,
    at: NaiveDateTime,
) -> StoreResult<Option<UserRow>> {
    let Some(before) = find_by_email(tx, email).await? else {
        return Ok(None);
    };
    dispatch!(tx, conn => diesel::update(users::table.find(&before.id))
        .set((users::status.eq(status), users::updated_at.eq(at)))
        .execute(conn)
        .await)?;
    Ok(Some(before))
}
