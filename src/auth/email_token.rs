//! Mailed single-use tokens: email verification (24 h) and password reset
//! (1 h), decisions §9. Only their digests are stored.

use std::time::Duration;

use chrono::NaiveDateTime;
use tern_schema::models::EmailTokenRow;
use tern_schema::store::email_tokens;
use tern_schema::vocabulary::UserId;
use tern_schema::{StoreResult, Tx};

use crate::auth::session::{new_token, token_digest};

pub const VERIFY_EMAIL_TTL: Duration = Duration::from_secs(24 * 3_600);
pub const PASSWORD_RESET_TTL: Duration = Duration::from_secs(3_600);
/// Longest token Tern could have issued, with room; longer input is not
/// looked up at all.
pub const TOKEN_LENGTH_MAX: usize = 128;

pub use tern_schema::vocabulary::Purpose;

/// How long a token of this purpose stays usable.
pub fn ttl(purpose: Purpose) -> Duration {
    match purpose {
        Purpose::VerifyEmail => VERIFY_EMAIL_TTL,
        Purpose::PasswordReset => PASSWORD_RESET_TTL,
    }
}

/// Stores a new token for the user and answers it, to be mailed. Earlier
/// tokens stay valid until used or expired.
pub async fn issue(
    tx: &mut Tx<'_>,
    user_id: &UserId,
    purpose: Purpose,
    now: NaiveDateTime,
) -> StoreResult<String> {
    let (token, digest) = new_token();
    let ttl = chrono::Duration::from_std(ttl(purpose)).unwrap_or(chrono::Duration::hours(1));
    email_tokens::insert(
        tx,
        &EmailTokenRow {
            token_sha256: digest,
            user_id: user_id.to_owned(),
            purpose,
            created_at: now,
            expires_at: now + ttl,
            used_at: None,
        },
    )
    .await?;
    Ok(token)
}

/// Uses the token once; answers its user, or `None` when the token is
/// unknown, of the other purpose, expired or already used.
pub async fn consume(
    tx: &mut Tx<'_>,
    token: &str,
    purpose: Purpose,
    now: NaiveDateTime,
) -> StoreResult<Option<UserId>> {
    if token.is_empty() || token.len() > TOKEN_LENGTH_MAX {
        return Ok(None);
    }
    email_tokens::consume(tx, &token_digest(token), purpose, now).await
}

/// Whether the token could be used now (it stays unused).
pub async fn is_live(
    tx: &mut Tx<'_>,
    token: &str,
    purpose: Purpose,
    now: NaiveDateTime,
) -> StoreResult<bool> {
    if token.is_empty() || token.len() > TOKEN_LENGTH_MAX {
        return Ok(false);
    }
    email_tokens::is_live(tx, &token_digest(token), purpose, now).await
}
