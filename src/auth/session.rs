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
use tern_schema::store::{sessions, users};
use tern_schema::types::{utc_now, MerchantStatus};

use crate::config::Config;
use crate::http::extract::request_id;
use crate::http::problem::ApiError;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "svc_session";
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

/// The live session behind `token`: 401 when unknown, revoked or expired,
/// 403 when its user has been disabled.
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
    if session.revoked_at.is_some() || session.expires_at <= utc_now() {
        return Err(ApiError::Unauthorized(INVALID));
    }
    if user.status == users::STATUS_DISABLED {
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
