//! Human accounts (decisions §9): registration, login and logout. A user
//! owns the merchant created with them and acts on it through a session.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::models::{MerchantRow, SessionRow, UserRow};
use tern_schema::store::{sessions, users};
use tern_schema::types::{as_utc, utc_now, MerchantStatus};
use tern_schema::vocabulary::{MerchantId, UserId, UserStatus};
use tern_schema::{write_tx, StoreError, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::email_token::{self, Purpose};
use crate::auth::mails;
use crate::auth::password::check_strength;
use crate::auth::session::{
    check_csrf, cleared_cookie, new_token, presented_token, session_cookie, token_digest,
};
use crate::http::client_address::client_ip_key;
use crate::http::extract::{request_id, JsonBody};
use crate::http::m2m::open_merchant;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

/// Human registration: a name, an email and a password (decisions §9).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HumanRegisterRequest {
    #[schema(min_length = 1, example = "Ada Lovelace")]
    pub name: String,
    #[schema(format = "email", example = "ada@example.com")]
    pub email: String,
    #[schema(min_length = 8, max_length = 128)]
    pub password: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    #[schema(format = "email", example = "ada@example.com")]
    pub email: String,
    pub password: String,
    /// Accepted; the session's absolute lifetime stays server-configured.
    #[serde(default)]
    pub remember_me: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LoginResponse {
    #[schema(value_type = String, format = Uuid)]
    pub user_id: UserId,
    #[schema(value_type = String, format = Uuid)]
    pub merchant_id: MerchantId,
    pub email_verified: bool,
    pub session_expires_at: DateTime<Utc>,
}

/// The one answer to every failed login, whatever the reason.
const INVALID_CREDENTIALS: &str = "the email or password is not correct";

/// Register a person: a user, the merchant they own, and a session.
///
/// Sets the `svc_session` cookie and mails a verification link
/// (best-effort). Email verification is not needed to log in.
#[utoipa::path(post, path = "/v1/auth/register", tag = "auth", operation_id = "register_user", request_body = HumanRegisterRequest,
    responses(
        (status = 201, description = "User, merchant and session created; `svc_session` cookie set", body = LoginResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Email already registered", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Empty name, invalid email or weak password", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Per-IP limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Internal error", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Self-service registration disabled", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn register(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<HumanRegisterRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    if !state.config.self_service_registration {
        return Err(ApiError::RegistrationDisabled);
    }
    state.limits.check("register", &client_ip_key(&req))?;
    let JsonBody(body) = body?;
    let (name, email) = validate_registration(&body)?;
    let password_hash = state.passwords.hash(body.password).await?;

    let now = utc_now();
    let request_id = request_id(&req);
    let merchant = MerchantRow {
        id: MerchantId::generate(),
        organization_name: name.clone(),
        status: MerchantStatus::Active,
        created_at: now,
        updated_at: now,
    };
    let user = UserRow {
        id: UserId::generate(),
        merchant_id: merchant.id.clone(),
        email,
        name,
        password_hash,
        status: UserStatus::Active,
        email_verified_at: None,
        created_at: now,
        updated_at: now,
    };
    let (token, session) = new_session(&state, &user.id);
    let stored: Result<(), ApiError> = write_tx!(state.db, |tx| {
        if users::find_by_email(tx, &user.email).await?.is_some() {
            return Err(email_taken());
        }
        let actor = AuditActor::User(user.id.to_string());
        open_merchant(tx, &merchant, actor.clone(), &request_id).await?;
        users::insert(tx, &user)
            .await
            .map_err(|error| match error {
                // Another registration with this email committed first.
                StoreError::UniqueViolation(_) => email_taken(),
                other => other.into(),
            })?;
        sessions::insert(tx, &session).await?;
        let verification = email_token::issue(tx, &user.id, Purpose::VerifyEmail, now).await?;
        let mail = mails::verification(&state.config, &user.email, &user.name, &verification);
        mails::enqueue(tx, &mail, now).await?;
        let registered = user_event(
            &user,
            "user.registered",
            &request_id,
            json!({"email": user.email, "name": user.name}),
        );
        audit::append(tx, registered).await?;
        Ok(())
    });
    stored?;
    state.mail.wake();
    tracing::info!(user_id = %user.id, merchant_id = %merchant.id, "user registered");
    Ok(HttpResponse::Created()
        .cookie(session_cookie(&state.config, token, session.expires_at))
        .json(login_response(&user, &session)))
}

/// Log in with email and password.
///
/// Answers a fresh `svc_session` cookie. Every failure is the same 401, so
/// the answer never tells whether an email is registered.
#[utoipa::path(post, path = "/v1/auth/login", tag = "auth", request_body = LoginRequest,
    responses(
        (status = 200, description = "Logged in; fresh `svc_session` cookie set", body = LoginResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Invalid credentials (no email enumeration)", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing or mistyped fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Per-IP limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many password checks are waiting; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<LoginRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check("login", &client_ip_key(&req))?;
    let JsonBody(body) = body?;
    let request_id = request_id(&req);
    let email = normalise_email(&body.email);
    let found = if email.len() > validate::EMAIL_LENGTH_MAX {
        None
    } else {
        let mut pooled = state.db.get().await?;
        let mut tx = pooled.tx();
        users::find_by_email(&mut tx, &email).await?
    };
    let Some(user) = found else {
        // Same work as a wrong password, so timing does not tell either.
        state.passwords.verify_dummy(body.password).await?;
        tracing::info!(%request_id, "login failed: unknown email");
        return Err(ApiError::Unauthorized(INVALID_CREDENTIALS));
    };
    let matches = state
        .passwords
        .verify(body.password, user.password_hash.clone())
        .await?;
    let refusal = if !matches {
        Some((
            "wrong_password",
            ApiError::Unauthorized(INVALID_CREDENTIALS),
        ))
    } else if user.status == UserStatus::Disabled {
        Some(("account_disabled", ApiError::AccountDisabled))
    } else {
        None
    };
    if let Some((reason, error)) = refusal {
        let failed = user_event(
            &user,
            "user.login_failed",
            &request_id,
            json!({"reason": reason}),
        );
        record_failure(state.db.clone(), failed);
        return Err(error);
    }
    let (token, session) = new_session(&state, &user.id);
    let stored: Result<(), ApiError> = write_tx!(state.db, |tx| {
        sessions::insert(tx, &session).await?;
        let event = user_event(
            &user,
            "user.logged_in",
            &request_id,
            json!({"session_id": session.id}),
        );
        audit::append(tx, event).await?;
        Ok(())
    });
    stored?;
    Ok(HttpResponse::Ok()
        .cookie(session_cookie(&state.config, token, session.expires_at))
        .json(login_response(&user, &session)))
}

/// Log out: revoke the session and clear the cookie.
///
/// Idempotent: a revoked or expired session cookie still answers 204 and
/// clears it. Without any session cookie the answer is 401.
#[utoipa::path(post, path = "/v1/auth/logout", tag = "auth", security(("session" = [])),
    responses(
        (status = 204, description = "Session revoked; cookie cleared"),
        (status = 401, description = "No session cookie", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Cross-site request refused (CSRF rule)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn logout(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let token = presented_token(&req).ok_or(ApiError::Unauthorized("a session is required"))?;
    check_csrf(&req, &state.config)?;
    let request_id = request_id(&req);
    let now = utc_now();
    let digest = token_digest(&token);
    let revoked: Result<(), ApiError> = write_tx!(state.db, |tx| {
        let Some(session) = sessions::revoke_by_token(tx, &digest, now).await? else {
            return Ok(());
        };
        if session.revoked_at.is_none() && session.expires_at > now {
            log_out(tx, &session, &request_id).await?;
        }
        Ok(())
    });
    revoked?;
    Ok(HttpResponse::NoContent()
        .cookie(cleared_cookie(&state.config))
        .finish())
}

/// Audits a failed login after the answer: a write on this path only
/// would make a wrong password slower than an unknown email, which is
/// exactly what the one identical 401 hides.
fn record_failure(db: tern_schema::Db, event: AuditRecord) {
    actix_web::rt::spawn(async move {
        let recorded: Result<(), StoreError> = write_tx!(db, |tx| audit::append(tx, event).await);
        if let Err(error) = recorded {
            tracing::warn!(%error, "could not audit a failed login");
        }
    });
}

async fn log_out(tx: &mut Tx<'_>, session: &SessionRow, request_id: &str) -> Result<(), ApiError> {
    let Some(user) = users::find(tx, &session.user_id).await? else {
        return Ok(());
    };
    let event = user_event(
        &user,
        "user.logged_out",
        request_id,
        json!({"session_id": session.id}),
    );
    audit::append(tx, event).await?;
    Ok(())
}

/// A new session for the user: the cookie token and the row storing its
/// digest. Every login gets a new token; none is ever reused.
fn new_session(state: &AppState, user_id: &UserId) -> (String, SessionRow) {
    let (token, digest) = new_token();
    let now = utc_now();
    let ttl =
        chrono::Duration::from_std(state.config.session_ttl).unwrap_or(chrono::Duration::hours(24));
    let session = SessionRow {
        id: format!("ses_{}", Uuid::now_v7().simple()),
        token_sha256: digest,
        user_id: user_id.to_owned(),
        created_at: now,
        expires_at: now + ttl,
        revoked_at: None,
        last_seen_at: now,
    };
    (token, session)
}

fn login_response(user: &UserRow, session: &SessionRow) -> LoginResponse {
    LoginResponse {
        user_id: user.id.clone(),
        merchant_id: user.merchant_id.clone(),
        email_verified: user.email_verified_at.is_some(),
        session_expires_at: as_utc(session.expires_at),
    }
}

/// An audit event about a user, on their merchant's chain, by that user.
pub fn user_event(
    user: &UserRow,
    action: &'static str,
    request_id: &str,
    data: serde_json::Value,
) -> AuditRecord {
    AuditRecord {
        merchant_id: user.merchant_id.clone(),
        actor: AuditActor::User(user.id.to_string()),
        action,
        resource_type: "user",
        resource_id: user.id.to_string(),
        request_id: request_id.to_owned(),
        data,
    }
}

/// Emails are trimmed and compared case-insensitively (decisions §9).
pub fn normalise_email(email: &str) -> String {
    email.trim().to_lowercase()
}

fn email_taken() -> ApiError {
    ApiError::Conflict {
        code: Some("EMAIL_ALREADY_REGISTERED"),
        detail: "this email is already registered; log in or reset the password".into(),
    }
}

fn validate_registration(body: &HumanRegisterRequest) -> Result<(String, String), ApiError> {
    let mut errors = FieldErrors::new();
    let name = validate::name(&body.name)
        .map_err(|message| errors.insert("name".into(), message.into()))
        .ok();
    let email = validate::email(&body.email)
        .map_err(|message| errors.insert("email".into(), message.into()))
        .ok();
    if let Err(message) = check_strength(&body.password) {
        errors.insert("password".into(), message.into());
    }
    match (name, email) {
        (Some(name), Some(email)) if errors.is_empty() => Ok((name, normalise_email(&email))),
        _ => Err(ApiError::Validation(errors)),
    }
}
