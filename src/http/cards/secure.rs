//! Secure card details (decisions §10): a time-boxed reveal of what only the
//! issuer holds. Tern never stores a PAN or CVV; in mode `demo` it relays
//! them from the issuer for one answer, in mode `embed` it hands out the
//! issuer's signed iframe URL so the details never pass through Tern at all.
//!
//! Revealing a card number is the most sensitive thing the card API does,
//! so it asks more than reading a card: API keys need `cards:write` (not
//! `cards:read`), and a session must give its password again (step-up),
//! because a session cookie alone may be a stolen or unattended browser.

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_actors::card::machine::{self, Operation, Refusal};
use tern_actors::card::status_of;
use tern_actors::card::CardFailure;
use tern_actors::ports::{CardIssuer, EmbedRequest};
use tern_schema::audit::{self, AuditRecord};
use tern_schema::models::CardRow;
use tern_schema::store::users;
use tern_schema::vocabulary::CardId;
use tern_schema::{write_tx, StoreError};
use utoipa::ToSchema;

use super::{owned_card, SCOPE_WRITE};
use crate::auth::password::PASSWORD_LENGTH_MAX;
use crate::auth::Caller;
use crate::config::SecureDetailsMode;
use crate::http::extract::OptionalJsonBody;
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

/// How long a reveal lasts: the demo answer's `revealed_until`, and the
/// embed URL's expiry at the issuer.
pub const SECURE_DETAILS_TTL_SECONDS: i64 = 60;
/// Longest `target_origin` accepted; real origins are far shorter.
pub const TARGET_ORIGIN_CHARS_MAX: usize = 255;
/// The `code` of the answer when the operator has turned reveals off.
pub const NOT_ENABLED_CODE: &str = "SECURE_DETAILS_NOT_ENABLED";
/// The rate limit counting step-up password checks, per session user.
pub const STEP_UP_LIMIT: &str = "step_up";
/// Secure-detail reveals per merchant.
pub const SECURE_LIMIT: &str = "card_secure";
/// Hosts a plain-http origin may name: a developer's own machine. Anywhere
/// else an iframe showing a PAN must come over TLS.
const LOOPBACK_HOSTS: [&str; 2] = ["localhost", "127.0.0.1"];

// No `Debug`: it carries a password, which must never reach a log line.
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecureDetailsRequest {
    /// Session callers: their own password, asked again (step-up).
    /// API-key callers need none; one sent is ignored.
    #[schema(value_type = Option<String>, format = Password)]
    pub password: Option<String>,
    /// Mode `embed` only, and required there: the browser origin that will
    /// frame the iframe, `https://host[:port]` (plain http only for
    /// localhost and 127.0.0.1). Ignored in the other modes.
    #[schema(example = "https://app.example.com")]
    pub target_origin: Option<String>,
}

/// A time-boxed reveal of a card's details, or why there is none.
// No `Debug`: it may carry a PAN and CVV, which must never reach a log line.
#[derive(Serialize, ToSchema)]
pub struct SecureDetails {
    pub enabled: bool,
    #[schema(value_type = String)]
    pub card_id: CardId,
    /// `demo` or `embed`; absent when not enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "demo")]
    pub mode: Option<&'static str>,
    /// Mode `embed`: the issuer-signed iframe URL, framable only by
    /// `target_origin` and only until `revealed_until`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_url: Option<String>,
    /// Mode `demo` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "4242424242424242")]
    pub pan: Option<String>,
    /// Mode `demo` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "123")]
    pub cvv: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry_month: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry_year: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = 60)]
    pub ttl_seconds: Option<i64>,
    /// When the client must hide the details (demo) or the iframe stops
    /// loading (embed); whole seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revealed_until: Option<DateTime<Utc>>,
    /// Why nothing was revealed, when not enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `SECURE_DETAILS_NOT_ENABLED` when not enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

impl SecureDetails {
    fn empty(card_id: CardId) -> SecureDetails {
        SecureDetails {
            enabled: false,
            card_id,
            mode: None,
            embed_url: None,
            pan: None,
            cvv: None,
            expiry_month: None,
            expiry_year: None,
            ttl_seconds: None,
            revealed_until: None,
            reason: None,
            code: None,
        }
    }
}

/// A browser origin exactly as browsers serialise it, so it is safe to put
/// in the issuer's CSP header; https, or http on the loopback host.
fn check_origin(origin: Option<&str>) -> Result<String, ApiError> {
    const MESSAGE: &str = "must be a browser origin https://host[:port] (http only for localhost)";
    let origin =
        origin.ok_or_else(|| ApiError::field("target_origin", "is required in mode embed"))?;
    if origin.len() > TARGET_ORIGIN_CHARS_MAX {
        return Err(ApiError::field("target_origin", MESSAGE));
    }
    let valid = url::Url::parse(origin).is_ok_and(|url| {
        let secure = match url.scheme() {
            "https" => true,
            "http" => url
                .host_str()
                .is_some_and(|host| LOOPBACK_HOSTS.contains(&host)),
            _ => false,
        };
        secure && url.origin().ascii_serialization() == origin
    });
    if valid {
        Ok(origin.to_owned())
    } else {
        Err(ApiError::field("target_origin", MESSAGE))
    }
}

/// Session callers prove it is still them with their password; API keys
/// with `cards:write` are trusted as they are. A failed step-up is audited
/// (what was tried, never the password) and answers 401.
async fn step_up(
    state: &AppState,
    caller: &Caller,
    card: &CardRow,
    password: Option<String>,
) -> Result<(), ApiError> {
    let Some(user_id) = caller.user_id() else {
        return Ok(());
    };
    state.limits.check(STEP_UP_LIMIT, user_id.as_str())?;
    let user = {
        let mut pooled = state.db.get().await?;
        let mut tx = pooled.tx();
        users::find(&mut tx, user_id).await?
    };
    let Some(user) = user else {
        return Err(ApiError::Unauthorized("the session's user is gone"));
    };
    let refused = match password {
        None => Some("missing_password"),
        // Longer than any password Tern accepts: wrong without hashing it.
        Some(password) if password.chars().count() > PASSWORD_LENGTH_MAX => Some("wrong_password"),
        Some(password) => {
            let matches = state.passwords.verify(password, user.password_hash).await?;
            (!matches).then_some("wrong_password")
        }
    };
    let Some(reason) = refused else {
        return Ok(());
    };
    let event = AuditRecord {
        merchant_id: card.merchant_id.clone(),
        actor: caller.actor(),
        action: "card.secure_details_refused",
        resource_type: "card",
        resource_id: card.id.to_string(),
        request_id: caller.request_id.clone(),
        data: json!({"reason": reason}),
    };
    let recorded: Result<(), StoreError> = write_tx!(state.db, |tx| audit::append(tx, event).await);
    // The refusal stands whether or not it could be recorded.
    if let Err(error) = recorded {
        tracing::warn!(%error, card_id = %card.id, "could not audit a refused step-up");
    }
    Err(ApiError::Unauthorized(
        "revealing card details needs your password",
    ))
}

/// The whole-second instant `SECURE_DETAILS_TTL_SECONDS` from now: the
/// issuer signs expiries in whole seconds, and the answer says the same.
fn reveal_ends() -> Result<DateTime<Utc>, ApiError> {
    let end = Utc::now().timestamp() + SECURE_DETAILS_TTL_SECONDS;
    DateTime::from_timestamp(end, 0)
        .ok_or_else(|| ApiError::Internal("the reveal's end is out of range".into()))
}

fn issuer(state: &AppState) -> Result<&dyn CardIssuer, ApiError> {
    state
        .issuer
        .as_deref()
        .ok_or_else(|| ApiError::NotReady("no card issuer is configured".into()))
}

/// The PAN, CVV and expiry, straight from the issuer into the answer.
async fn demo(
    state: &AppState,
    card: &CardRow,
    provider_card_id: &str,
) -> Result<SecureDetails, ApiError> {
    let secrets = issuer(state)?
        .secrets(provider_card_id)
        .await
        .map_err(|error| ApiError::BadGateway(error.to_string()))?;
    Ok(SecureDetails {
        enabled: true,
        mode: Some("demo"),
        pan: Some(secrets.pan),
        cvv: Some(secrets.cvv),
        expiry_month: Some(secrets.expiry_month),
        expiry_year: Some(secrets.expiry_year),
        ttl_seconds: Some(SECURE_DETAILS_TTL_SECONDS),
        revealed_until: Some(reveal_ends()?),
        ..SecureDetails::empty(card.id.clone())
    })
}

/// The issuer's signed iframe URL; the expiry Tern knows, no secrets.
async fn embed(
    state: &AppState,
    card: &CardRow,
    provider_card_id: &str,
    target_origin: String,
) -> Result<SecureDetails, ApiError> {
    let until = reveal_ends()?;
    let request = EmbedRequest {
        provider_card_id: provider_card_id.to_owned(),
        target_origin,
        expires_at: until.naive_utc(),
    };
    let url = issuer(state)?
        .embed_url(&request)
        .await
        .map_err(|error| ApiError::BadGateway(error.to_string()))?;
    Ok(SecureDetails {
        enabled: true,
        mode: Some("embed"),
        embed_url: Some(url),
        expiry_month: card.expiry_month,
        expiry_year: card.expiry_year,
        ttl_seconds: Some(SECURE_DETAILS_TTL_SECONDS),
        revealed_until: Some(until),
        ..SecureDetails::empty(card.id.clone())
    })
}

/// Reveal a card's details for 60 seconds.
///
/// Needs `cards:write` from API keys (revealing a PAN is more than reading
/// a card) and the caller's password from sessions. Everything is checked
/// before the deployment's mode is looked at, so with reveals turned off
/// a caller still learns nothing about a card it may not see: the credential,
/// the card (404), the step-up (401) and the card's status (409) come first,
/// then mode `disabled` answers 200 with `enabled: false`. Answers carry
/// `Cache-Control: no-store`; each reveal is audited with its mode, never
/// the details.
#[utoipa::path(post, path = "/v1/cards/{id}/secure-details", operation_id = "reveal_card_details", tag = "cards",
    params(("id" = String, Path)),
    request_body(content = Option<SecureDetailsRequest>, description = "Optional: password (sessions) and target_origin (mode embed)"),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "Revealed for ttl_seconds (mode demo or embed), or enabled false with code SECURE_DETAILS_NOT_ENABLED", body = SecureDetails),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing or invalid credential; for a session, a missing or wrong password", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The card is closed (CARD_CLOSED) or still being issued (CARD_NOT_ISSUED)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown field; target_origin missing or not an https origin in mode embed", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many reveals for this merchant, or too many password checks; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; nothing was revealed", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn reveal(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<OptionalJsonBody<SecureDetailsRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    let request = body?.0.unwrap_or_default();
    let reveal = match state.config.secure_details_mode {
        SecureDetailsMode::Disabled => Reveal::Off,
        SecureDetailsMode::Demo => Reveal::Demo,
        SecureDetailsMode::Embed => Reveal::Embed(check_origin(request.target_origin.as_deref())?),
    };
    let card = owned_card(&state, &caller, &path).await?;
    // Per merchant, whatever the credential: each reveal calls the issuer
    // and shows a PAN, and minting keys must not multiply that.
    state
        .limits
        .check(SECURE_LIMIT, caller.merchant_id.as_str())?;
    step_up(&state, &caller, &card, request.password).await?;
    machine::apply(status_of(&card), Operation::RevealDetails)
        .map_err(|refused| ApiError::from(CardFailure::Refused(refused)))?;
    let provider_card_id = card
        .provider_card_id
        .clone()
        .ok_or(CardFailure::Refused(Refusal::NotIssued))?;
    let details = match reveal {
        Reveal::Off => SecureDetails {
            reason: Some("secure card details are turned off on this deployment".into()),
            code: Some(NOT_ENABLED_CODE),
            ..SecureDetails::empty(card.id.clone())
        },
        Reveal::Demo => demo(&state, &card, &provider_card_id).await?,
        Reveal::Embed(origin) => embed(&state, &card, &provider_card_id, origin).await?,
    };
    if let Some(mode) = details.mode {
        audit_reveal(&state, &caller, &card, mode).await?;
        tracing::info!(card_id = %card.id, merchant_id = %card.merchant_id, mode, "card details revealed");
    }
    Ok(HttpResponse::Ok()
        .insert_header((CACHE_CONTROL, "no-store"))
        .json(details))
}

/// What the deployment's mode asks of a reveal.
enum Reveal {
    Off,
    Demo,
    /// With the checked `target_origin`.
    Embed(String),
}

/// Written before the answer leaves: a reveal that cannot be recorded is
/// not made.
async fn audit_reveal(
    state: &AppState,
    caller: &Caller,
    card: &CardRow,
    mode: &'static str,
) -> Result<(), ApiError> {
    let event = AuditRecord {
        merchant_id: card.merchant_id.clone(),
        actor: caller.actor(),
        action: "card.secure_details_revealed",
        resource_type: "card",
        resource_id: card.id.to_string(),
        request_id: caller.request_id.clone(),
        data: json!({"mode": mode, "ttl_seconds": SECURE_DETAILS_TTL_SECONDS}),
    };
    let recorded: Result<(), StoreError> = write_tx!(state.db, |tx| audit::append(tx, event).await);
    Ok(recorded?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_tls_or_loopback_origins_pass() {
        for good in [
            "https://app.example.com",
            "https://app.example.com:8443",
            "http://localhost:3000",
            "http://127.0.0.1:5173",
        ] {
            assert_eq!(check_origin(Some(good)).ok().as_deref(), Some(good));
        }
        for bad in [
            "http://app.example.com",
            "https://app.example.com/",
            "https://app.example.com/path",
            "https://APP.example.com",
            "https://app.example.com:443",
            "javascript:alert(1)",
            "app.example.com",
            "https://app.example.com; script-src *",
            "",
        ] {
            assert!(check_origin(Some(bad)).is_err(), "{bad}");
        }
        assert!(check_origin(None).is_err());
        let long = format!("https://{}.example", "a".repeat(TARGET_ORIGIN_CHARS_MAX));
        assert!(check_origin(Some(&long)).is_err());
    }
}
