//! Who is calling: the `Caller` extractor authenticates a merchant API key
//! (Authorization: Bearer, or X-API-Key) and carries its merchant and scopes.

use actix_web::dev::Payload;
use actix_web::http::header::{HeaderMap, AUTHORIZATION};
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use tern_schema::audit::AuditActor;
use tern_schema::types::{utc_now, MerchantStatus};
use tern_schema::vocabulary::{MerchantId, UserId};

use crate::auth::api_key;
use crate::auth::operator::Authenticated;
use crate::auth::scopes::Scopes;
use crate::auth::session::{self, SessionUser};
use crate::http::extract::request_id;
use crate::http::problem::ApiError;
use crate::state::AppState;

pub const API_KEY_HEADER: &str = "x-api-key";

/// How the caller proved who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// A merchant API key (machine caller).
    ApiKey { api_key_id: String },
    /// A human's session cookie; the user owns the merchant.
    Session { user_id: UserId, session_id: String },
}

/// An authenticated merchant credential.
#[derive(Clone, Debug)]
pub struct Caller {
    pub merchant_id: MerchantId,
    pub credential: Credential,
    pub scopes: Scopes,
    pub merchant_status: MerchantStatus,
    pub request_id: String,
    /// When an expiring API key stops working; keys it creates expire no
    /// later (decisions §1a). `None` for keys without expiry and for
    /// sessions: a session's expiry is not a key's (a dashboard mints keys
    /// meant to outlive the login that made them).
    pub key_expires_at: Option<chrono::NaiveDateTime>,
}

/// A resource that belongs to one merchant, or to none (a system ledger
/// account), which is nobody's to read.
pub trait MerchantOwned {
    fn merchant_id(&self) -> Option<&MerchantId>;
}

impl MerchantOwned for tern_schema::models::ApiKeyRow {
    fn merchant_id(&self) -> Option<&MerchantId> {
        Some(&self.merchant_id)
    }
}

impl Caller {
    /// A human acting on the merchant they own, with every scope
    /// (decisions §9).
    pub fn for_session(human: SessionUser) -> Caller {
        Caller {
            merchant_id: human.user.merchant_id,
            credential: Credential::Session {
                user_id: human.user.id,
                session_id: human.session_id,
            },
            scopes: Scopes::all(),
            merchant_status: human.merchant_status,
            request_id: human.request_id,
            key_expires_at: None,
        }
    }

    /// Who the audit chain names for what this caller does.
    pub fn actor(&self) -> AuditActor {
        match &self.credential {
            Credential::ApiKey { api_key_id } => AuditActor::ApiKey(api_key_id.clone()),
            Credential::Session { user_id, .. } => AuditActor::User(user_id.to_string()),
        }
    }

    /// What per-credential limits count against: the key, or the user. Only
    /// settlement submission counts this way (decisions §13); limits on
    /// shared resources count the merchant, which minting keys cannot
    /// multiply.
    pub fn limit_key(&self) -> &str {
        match &self.credential {
            Credential::ApiKey { api_key_id } => api_key_id,
            Credential::Session { user_id, .. } => user_id.as_str(),
        }
    }

    /// The human behind a session; `None` for machine callers.
    pub fn user_id(&self) -> Option<&UserId> {
        match &self.credential {
            Credential::ApiKey { .. } => None,
            Credential::Session { user_id, .. } => Some(user_id),
        }
    }

    /// 403 naming the scope when the credential lacks it.
    pub fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.scopes.contains(scope) {
            Ok(())
        } else {
            Err(ApiError::MissingScope(scope.to_owned()))
        }
    }

    /// 403 unless the merchant is active (settlement operations).
    pub fn require_active(&self) -> Result<(), ApiError> {
        match self.merchant_status {
            MerchantStatus::Active => Ok(()),
            status => Err(ApiError::MerchantInactive(status.as_str())),
        }
    }

    /// The resource when it is the caller's; another merchant's resource is
    /// reported exactly like a missing one, so ids cannot be probed.
    pub fn own<T: MerchantOwned>(&self, found: Option<T>, what: &str) -> Result<T, ApiError> {
        match found {
            Some(resource) if resource.merchant_id() == Some(&self.merchant_id) => Ok(resource),
            _ => Err(ApiError::NotFound(format!("no such {what}"))),
        }
    }
}

/// The presented key: `Authorization: Bearer <key>` or `X-API-Key: <key>`.
fn presented_key(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(|key| key.trim().to_owned());
    bearer.or_else(|| {
        headers
            .get(API_KEY_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(|key| key.trim().to_owned())
    })
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let presented = presented_key(req.headers());
        // A key wins over a cookie: machine callers never need CSRF rules.
        let session = match presented {
            Some(_) => None,
            None => session::presented_token(req),
        };
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let csrf = match (&session, &state) {
            (Some(_), Some(state)) => session::check_csrf(req, &state.config),
            _ => Ok(()),
        };
        let request_id = request_id(req);
        let req = req.clone();
        Box::pin(async move {
            let state =
                state.ok_or_else(|| ApiError::Internal("application state missing".into()))?;
            let caller = if let Some(token) = session {
                csrf?;
                let human = session::authenticate(&state, &token, request_id).await?;
                Caller::for_session(human)
            } else {
                let presented = presented.ok_or(ApiError::Unauthorized(
                    "an API key or a session is required",
                ))?;
                authenticate(&state, &presented, request_id).await?
            };
            req.extensions_mut().insert(Authenticated);
            Ok(caller)
        })
    }
}

async fn authenticate(
    state: &AppState,
    presented: &str,
    request_id: String,
) -> Result<Caller, ApiError> {
    const UNKNOWN: &str = "the API key is not valid";
    let (prefix, secret) = api_key::split(presented).ok_or(ApiError::Unauthorized(UNKNOWN))?;
    let key = state
        .keys
        .lookup(prefix)
        .await?
        .ok_or(ApiError::Unauthorized(UNKNOWN))?;
    if !api_key::secret_matches(secret, &key.secret_sha256) {
        return Err(ApiError::Unauthorized(UNKNOWN));
    }
    if key.revoked {
        return Err(ApiError::Unauthorized("the API key has been revoked"));
    }
    let now = utc_now();
    if key.expires_at.is_some_and(|expires_at| expires_at <= now) {
        return Err(ApiError::Unauthorized("the API key has expired"));
    }
    if state.keys.claim_last_used_write(prefix) {
        record_last_used(state.db.clone(), key.key_id.clone());
    }
    Ok(Caller {
        merchant_id: key.merchant_id,
        credential: Credential::ApiKey {
            api_key_id: key.key_id,
        },
        scopes: key.scopes,
        merchant_status: key.merchant_status,
        request_id,
        key_expires_at: key.expires_at,
    })
}

/// Written off the request path: a slow or failing write must not delay or
/// fail an authenticated read.
fn record_last_used(db: tern_schema::Db, key_id: String) {
    actix_web::rt::spawn(async move {
        let written: Result<(), tern_schema::StoreError> = tern_schema::write_tx!(db, |tx| {
            tern_schema::store::api_keys::touch_last_used(tx, &key_id, utc_now()).await
        });
        if let Err(error) = written {
            tracing::warn!(%error, "could not record API key use");
        }
    });
}
