//! Email verification: using a mailed token, and asking for another.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use tern_schema::audit;
use tern_schema::store::users;
use tern_schema::types::utc_now;
use tern_schema::write_tx;
use utoipa::ToSchema;

use crate::auth::email_token::{self, Purpose};
use crate::auth::mails;
use crate::auth::session::SessionUser;
use crate::http::auth::user_event;
use crate::http::extract::{request_id, JsonBody};
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyEmailRequest {
    /// The `token=` value of the mailed link.
    pub token: Option<String>,
}

/// Verify the email address with the mailed token (single use, 24 h).
#[utoipa::path(post, path = "/v1/auth/verify-email", tag = "auth", request_body = VerifyEmailRequest,
    responses(
        (status = 204, description = "Email verified; the token is used up"),
        (status = 400, description = "Malformed JSON or missing token", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "Token invalid, expired or already used", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing, mistyped or unknown fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many attempts from this address; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn verify_email(
    req: actix_web::HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<VerifyEmailRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    // Each attempt is a write transaction, and no credential names the
    // caller: bounded per client address.
    state.limits.check(
        "verify_email_ip",
        &crate::http::client_address::client_ip_key(&req),
    )?;
    let JsonBody(body) = body?;
    let token = body
        .token
        .filter(|token| !token.trim().is_empty())
        .ok_or_else(|| ApiError::BadRequest("token is required".into()))?;
    let request_id = request_id(&req);
    let now = utc_now();
    let verified: Result<(), ApiError> = write_tx!(state.db, |tx| {
        let user_id = email_token::consume(tx, token.trim(), Purpose::VerifyEmail, now)
            .await?
            .ok_or_else(dead_token)?;
        let user = users::find(tx, &user_id)
            .await?
            .ok_or_else(|| ApiError::Internal(format!("token of missing user {user_id}")))?;
        users::mark_email_verified(tx, &user.id, now).await?;
        let event = user_event(
            &user,
            "user.email_verified",
            &request_id,
            json!({"email": user.email}),
        );
        audit::append(tx, event).await?;
        Ok(())
    });
    verified?;
    Ok(HttpResponse::NoContent().finish())
}

/// Mail a new verification link.
///
/// Answers 204 whether or not a mail goes out (none when the address is
/// already verified). Earlier links stay valid until used or expired.
#[utoipa::path(post, path = "/v1/auth/verify-email/resend", tag = "auth", operation_id = "resend_verification_email", security(("session" = [])),
    responses(
        (status = 204, description = "A new link is on its way, if the address is unverified"),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Cross-site request refused", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Per-user or per-address limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Internal error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resend(
    req: actix_web::HttpRequest,
    human: SessionUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check(
        "resend_ip",
        &crate::http::client_address::client_ip_key(&req),
    )?;
    let user = human.user;
    state.limits.check("resend", user.id.as_str())?;
    if user.email_verified_at.is_some() {
        return Ok(HttpResponse::NoContent().finish());
    }
    let now = utc_now();
    let event = user_event(
        &user,
        "user.verification_sent",
        &human.request_id,
        json!({"email": user.email}),
    );
    let issued: Result<(), ApiError> = write_tx!(state.db, |tx| {
        let token = email_token::issue(tx, &user.id, Purpose::VerifyEmail, now).await?;
        let mail = mails::verification(&state.config, &user.email, &user.name, &token);
        mails::enqueue(tx, &mail, now).await?;
        audit::append(tx, event).await?;
        Ok(())
    });
    issued?;
    state.mail.wake();
    Ok(HttpResponse::NoContent().finish())
}

pub fn dead_token() -> ApiError {
    ApiError::Gone {
        code: Some("TOKEN_INVALID"),
        detail: "the token is invalid, expired or already used".into(),
    }
}
