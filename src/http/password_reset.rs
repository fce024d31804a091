//! Password reset by mailed token (1 h, single use). Asking never tells
//! whether an email is registered; using a token signs out every session.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use tern_schema::audit;
use tern_schema::store::{sessions, users};
use tern_schema::types::utc_now;
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
    let request_id = request_id(&req);
    let now = utc_now();
    let issued: Result<Option<(tern_schema::models::UserRow, String)>, ApiError> =
        write_tx!(state.db, |tx| {
            let Some(user) = users::find_by_email(tx, &email).await? else {
                return Ok(None);
            };
            if user.status == users::STATUS_DISABLED {
                return Ok(None);
            }
            let token = email_token::issue(tx, &user.id, Purpose::PasswordReset, now).await?;
            let event = user_event(
                &user,
                "user.password_reset_requested",
                &request_id,
                json!({}),
            );
            audit::append(tx, event).await?;
            Ok(Some((user, token)))
        });
    if let Some((user, token)) = issued? {
        mails::send_later(
            state.mailer.clone(),
            mails::password_reset(&state.config, &user.email, &user.name, &token),
        );
    }
    Ok(HttpResponse::Accepted().finish())
}

/// Set a new password with the mailed token; every session is revoked.
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
        let event = user_event(
            &user,
            "user.password_reset",
            &request_id,
            json!({"sessions_revoked": revoked}),
        );
        audit::append(tx, event).await?;
        Ok(())
    });
    reset?;
    Ok(HttpResponse::NoContent().finish())
}
