//! Human sessions (decisions §9): the `svc_session` cookie, its token, and
//! the `SessionUser` extractor with the CSRF rule for cookie-authenticated
//! unsafe requests.

use actix_web::cookie::{time, Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::http::header::{CONTENT_TYPE, ORIGIN};
use actix_web::http::Method;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use base64::Engine as _;
use chrono::NaiveDateTime;
use futures_util::future::LocalBoxFuture;
use rand::RngCore;
use sha2::{Digest, Sha256};
use tern_schema::models::UserRow;
use tern_schema::store::sessions;
use tern_schema::types::{utc_now, MerchantStatus};
use tern_schema::vocabulary::UserStatus;

use crate::config::Config;
use crate::http::extract::request_id;
use crate::http::problem::ApiError;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "svc_session";
/// `last_seen_at` is written at most this often per session (or a quarter
/// of the idle timeout, when that is shorter), so authenticated reads do
/// not each turn into a write.
pub const LAST_SEEN_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(60);
/// Random bytes in a session or mailed token: 256 bits.
pub const TOKEN_BYTES: usize = 32;

/// A fresh random token (URL-safe base64) and the digest that is stored.
pub fn new_token() -> (String, String) {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let digest = token_digest(&token);
    (token, digest)
}

/// What is stored for a token: its SHA-256, hex. 256 random bits need no
/// slow KDF.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The cookie that carries a new session.
pub fn session_cookie(
    config: &Config,
    token: String,
    expires_at: NaiveDateTime,
) -> Cookie<'static> {
    // The session was just made: it lives the whole configured lifetime.
    let max_age = i64::try_from(config.session_ttl.as_secs()).unwrap_or(i64::MAX);
    let mut cookie = base_cookie(config, token);
    cookie.set_max_age(time::Duration::seconds(max_age));
    if let Ok(expires) = time::OffsetDateTime::from_unix_timestamp(expires_at.and_utc().timestamp())
    {
        cookie.set_expires(expires);
    }
    cookie
}

/// The cookie that tells the browser to forget the session.
pub fn cleared_cookie(config: &Config) -> Cookie<'static> {
    let mut cookie = base_cookie(config, String::new());
    cookie.make_removal();
    cookie
}

fn base_cookie(config: &Config, value: String) -> Cookie<'static> {
    Cookie::build(SESSION_COOKIE, value)
        .http_only(true)
        .same_site(SameSite::Lax)
        .path("/")
        .secure(config.cookie_secure)
        .finish()
}

/// The session cookie's value, when the request has one.
pub fn presented_token(req: &HttpRequest) -> Option<String> {
    req.cookie(SESSION_COOKIE)
        .map(|cookie| cookie.value().to_owned())
        .filter(|value| !value.is_empty())
}

/// The CSRF rule of decisions §9 for cookie-authenticated requests: an
/// unsafe method must carry a JSON body or none, and an Origin header, when
/// present, must be an allowed origin. A cross-site form can send neither
/// a JSON content type (without a preflight) nor a forged Origin.
pub fn check_csrf(req: &HttpRequest, config: &Config) -> Result<(), ApiError> {
    let safe = matches!(
        *req.method(),
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    );
    if safe {
        return Ok(());
    }
    if let Some(origin) = req.headers().get(ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|origin| {
            config.public_origin().as_deref() == Some(origin)
                || config.allowed_origins.iter().any(|o| o == origin)
        });
        if !allowed {
            return Err(ApiError::CsrfRejected(
                "the request's Origin is not allowed to use this session",
            ));
        }
    }
    if req.headers().contains_key(CONTENT_TYPE) {
        let is_json = req.mime_type().ok().flatten().is_some_and(|mime| {
            mime.type_() == mime::APPLICATION
                && (mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON))
        });
        if !is_json {
            return Err(ApiError::CsrfRejected(
                "a request authenticated by a session cookie must send JSON or no body",
            ));
        }
    }
    Ok(())
}

/// A human caller, authenticated by a live session of an active user.
#[derive(Clone, Debug)]
pub struct SessionUser {
    pub user: UserRow,
    pub session_id: String,
    pub merchant_status: MerchantStatus,
    pub request_id: String,
}

impl FromRequest for SessionUser {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = presented_token(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let request_id = request_id(req);
        let csrf = state
            .as_ref()
            .map(|state| check_csrf(req, &state.config))
            .unwrap_or(Ok(()));
        Box::pin(async move {
            let state =
                state.ok_or_else(|| ApiError::Internal("application state missing".into()))?;
            let token = token.ok_or(ApiError::Unauthorized("a session is required"))?;
            csrf?;
            authenticate(&state, &token, request_id).await
        })
    }
}

/// How stale `last_seen_at` may be before a request writes it again.
pub fn last_seen_resolution(config: &Config) -> chrono::Duration {
    let resolution = LAST_SEEN_RESOLUTION.min(config.session_idle_ttl / 4);
    chrono::Duration::from_std(resolution).unwrap_or(chrono::Duration::seconds(60))
}

/// Sessions last seen at or before this instant are idle. The stored time
/// lags real use by up to one resolution, so idleness is judged one
/// resolution late: a session ends between the idle timeout and the idle
/// timeout plus the resolution after its last use, never before.
pub fn idle_cutoff(config: &Config, now: NaiveDateTime) -> NaiveDateTime {
    let idle = chrono::Duration::from_std(config.session_idle_ttl)
        .unwrap_or(chrono::Duration::minutes(30));
    now - idle - last_seen_resolution(config)
}

/// The live session behind `token`: 401 when unknown, revoked, expired or
/// idle, 403 when its user has been disabled.
pub async fn authenticate(
    state: &AppState,
    token: &str,
    request_id: String,
) -> Result<SessionUser, ApiError> {
    const INVALID: &str = "the session is not valid; log in again";
    let mut pooled = state.db.get().await?;
    let (session, user, merchant_status) =
        sessions::find_by_token(&mut pooled.tx(), &token_digest(token))
            .await?
            .ok_or(ApiError::Unauthorized(INVALID))?;
    let now = utc_now();
    if session.revoked_at.is_some()
        || session.expires_at <= now
        || session.last_seen_at <= idle_cutoff(&state.config, now)
    {
        return Err(ApiError::Unauthorized(INVALID));
    }
    let stale_before = now - last_seen_resolution(&state.config);
    if session.last_seen_at < stale_before {
        record_last_seen(state.db.clone(), session.id.clone(), stale_before, now);
    }
    if user.status == UserStatus::Disabled {
        return Err(ApiError::AccountDisabled);
    }
    let merchant_status = MerchantStatus::parse(&merchant_status)
        .ok_or_else(|| ApiError::Internal(format!("unknown merchant status {merchant_status}")))?;
    Ok(SessionUser {
        user,
        session_id: session.id,
        merchant_status,
        request_id,
    })
}

/// Written off the request path, like an API key's last use: a slow or
/// failing write must not delay or fail an authenticated read.
fn record_last_seen(
    db: tern_schema::Db,
    session_id: String,
    stale_before: NaiveDateTime,
    at: NaiveDateTime,
) {
    actix_web::rt::spawn(async move {
        let written: Result<(), tern_schema::StoreError> = tern_schema::write_tx!(db, |tx| {
            sessions::touch_last_seen(tx, &session_id, stale_before, at).await
        });
        if let Err(error) = written {
            tracing::warn!(%error, "could not record session use");
        }
    });
}
