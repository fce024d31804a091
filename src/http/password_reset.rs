//! Password reset by mailed token (1 h, single use). Asking never tells
//! whether an email is registered; using a token signs out every session.

use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use tern_schema::audit;
use tern_schema::store::{email_tokens, sessions, users};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::UserStatus;
use tern_schema::write_tx;
use utoipa::ToSchema;

use crate::auth::email_token::{self, Purpose};
use crate::auth::mails;
use crate::auth::password::check_strength;
use crate::http::auth::{normalise_email, user_event};
use crate::http::client_address::client_ip_key;
use crate::http::extract::{request_id, JsonBody};
use crate::http::problem::{ApiError, Problem};
use crate::http::verification::dead_token;
use crate::state::AppState;
use crate::validate;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetRequest {
    #[schema(format = "email")]
    pub email: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetConfirmRequest {
    /// The `token=` value of the mailed link.
    pub token: String,
    #[schema(min_length = 8, max_length = 128)]
    pub new_password: String,
}

/// Ask for a password reset link.
///
/// Always 202: a link is mailed only when the email is registered, and the
/// answer is the same either way.
#[utoipa::path(post, path = "/v1/auth/password-reset/request", tag = "auth", operation_id = "request_password_reset", request_body = PasswordResetRequest,
    responses(
        (status = 202, description = "Accepted; a link is mailed if the email is registered"),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing, mistyped or unknown fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests for this email or from this address; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many reset requests in progress; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn request(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<PasswordResetRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    state
        .limits
        .check("password_reset_ip", &client_ip_key(&req))?;
    let JsonBody(body) = body?;
    // No registration could have stored an invalid address: the same 202,
    // and nothing unbounded ever becomes a limiter key.
    let Ok(email) = validate::email(&body.email).map(|email| normalise_email(&email)) else {
        return Ok(HttpResponse::Accepted().finish());
    };
    // Counted per submitted email, registered or not, so the limit tells
    // nothing either.
    state.limits.check("password_reset", &email)?;
    // The answer waits on nothing that depends on the email: the lookup,
    // the token and the mail are written after it, so a registered email
    // cannot be told from an unknown one by how long the answer takes.
    // Waiting for a permit depends on the queue, never on the email.
    let permit = state.reset_permits.clone().acquire_owned();
    let Ok(Ok(permit)) = tokio::time::timeout(RESET_PERMIT_WAIT, permit).await else {
        return Err(ApiError::Overloaded {
            detail: "too many password reset requests are being handled; retry shortly".into(),
            retry_after_s: 1,
        });
    };
    let request_id = request_id(&req);
    let state = state.into_inner();
    actix_web::rt::spawn(async move {
        if let Err(error) = issue_reset(&state, &email, &request_id).await {
            tracing::warn!(%error, %request_id, "could not handle a password reset request");
        }
        drop(permit);
    });
    Ok(HttpResponse::Accepted().finish())
}

/// Password reset requests being handled after their answer, per
/// application: bounds what a flood of them can queue behind the answers.
pub const RESET_REQUESTS_IN_FLIGHT_MAX: usize = 256;
/// How long a request waits for one of those before it is 503.
pub const RESET_PERMIT_WAIT: Duration = Duration::from_secs(2);

/// Issues a reset token and writes its mail to the outbox, in one
/// transaction, when the email belongs to an active user.
async fn issue_reset(state: &AppState, email: &str, request_id: &str) -> Result<(), ApiError> {
    // Most requests of a flood name no one: a read settles them without
    // queueing for SQLite's one writer.
    let known = {
        let mut pooled = state.db.get().await?;
        let found = users::find_by_email(&mut pooled.tx(), email).await?;
        found
    };
    if known.is_none_or(|user| user.status == UserStatus::Disabled) {
        return Ok(());
    }
    let now = utc_now();
    let issued: Result<bool, ApiError> = write_tx!(state.db, |tx| {
        let Some(user) = users::find_by_email(tx, email).await? else {
            return Ok(false);
        };
        if user.status == UserStatus::Disabled {
            return Ok(false);
        }
        let token = email_token::issue(tx, &user.id, Purpose::PasswordReset, now).await?;
        let mail = mails::password_reset(&state.config, &user.email, &user.name, &token);
        mails::enqueue(tx, &mail, now).await?;
        let event = user_event(
            &user,
            "user.password_reset_requested",
            request_id,
            json!({}),
        );
        audit::append(tx, event).await?;
        Ok(true)
    });
    if issued? {
        state.mail.wake();
    }
    Ok(())
}

/// Set a new password with the mailed token; every session is revoked,
/// and every other reset link of the user stops working.
#[utoipa::path(post, path = "/v1/auth/password-reset/confirm", tag = "auth", operation_id = "confirm_password_reset", request_body = PasswordResetConfirmRequest,
    responses(
        (status = 204, description = "Password changed; the token is used up and every session revoked"),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "Token invalid, expired or already used", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Weak password", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests from this address; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn confirm(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<PasswordResetConfirmRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    state
        .limits
        .check("password_reset_ip", &client_ip_key(&req))?;
    let JsonBody(body) = body?;
    check_strength(&body.new_password)
        .map_err(|message| ApiError::field("new_password", message))?;
    let token = body.token.trim().to_owned();
    let now = utc_now();
    // Refuse a dead token before spending a hash on it.
    {
        let mut pooled = state.db.get().await?;
        if !email_token::is_live(&mut pooled.tx(), &token, Purpose::PasswordReset, now).await? {
            return Err(dead_token());
        }
    }
    let password_hash = state.passwords.hash(body.new_password).await?;
    let request_id = request_id(&req);
    let now = utc_now();
    let reset: Result<(), ApiError> = write_tx!(state.db, |tx| {
        // The token may have been used while the hash was computed.
        let user_id = email_token::consume(tx, &token, Purpose::PasswordReset, now)
            .await?
            .ok_or_else(dead_token)?;
        let user = users::find(tx, &user_id)
            .await?
            .ok_or_else(|| ApiError::Internal(format!("token of missing user {user_id}")))?;
        users::set_password_hash(tx, &user.id, &password_hash, now).await?;
        let revoked = sessions::revoke_all_for_user(tx, &user.id, now).await?;
        // No second link mailed before this reset may change the password again.
        let tokens_used_up =
            email_tokens::use_up_others(tx, &user.id, Purpose::PasswordReset, now).await?;
        let event = user_event(
            &user,
            "user.password_reset",
            &request_id,
            json!({"sessions_revoked": revoked, "reset_tokens_revoked": tokens_used_up}),
        );
        audit::append(tx, event).await?;
        Ok(())
    });
    reset?;
    Ok(HttpResponse::NoContent().finish())
}
