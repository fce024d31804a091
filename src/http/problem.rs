//! The one place errors become problem documents (RFC 7807).
//!
//! A handler returns [`ApiError`]; its `error_response` carries a [`Problem`]
//! in the response extensions, and the request middleware finishes it with
//! what only the request knows: the `type` base URL, `instance` and
//! `request_id`. Responses that actix-web itself produced for errors get a
//! generic problem by status there too, so no error leaves without one.

use crate::auth::password::PasswordError;
use std::collections::BTreeMap;

use actix_web::http::header::{HeaderValue, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use tern_actors::quote::{PricingError, QuoteError};
use tern_actors::runtime::{RuntimeError, RETRY_AFTER_UNAVAILABLE};
use tern_schema::StoreError;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Field name -> message, for validation failures.
pub type FieldErrors = BTreeMap<String, String>;

/// Every problem type Tern answers with: slug, status, title, explanation.
/// GET /problems/<slug> serves the explanation.
pub const PROBLEM_TYPES: &[(&str, u16, &str, &str)] = &[
    ("malformed-json", 400, "Malformed JSON", "The request body is not valid JSON. Send a JSON document with Content-Type: application/json."),
    ("bad-request", 400, "Bad request", "The request is missing something it needs, such as a required header."),
    ("invalid-signature", 400, "Invalid signature", "The webhook's signature header is missing, malformed, stale or does not match its body; nothing was recorded."),
    ("invalid-idempotency-key", 400, "Invalid Idempotency-Key", "Mutations require an Idempotency-Key header holding a UUID v4."),
    ("unauthorized", 401, "Unauthorized", "The credential is missing, unknown, revoked or expired. Send Authorization: Bearer svc_<prefix>_<secret> or X-API-Key."),
    ("invalid-service-signature", 401, "Invalid service signature", "The X-Svc-Signature header is missing, malformed, older or newer than 5 minutes, or does not match the body; nothing was recorded."),
    ("insufficient-scope", 403, "Insufficient scope", "The credential is valid but lacks the scope this operation needs; the detail names it."),
    ("merchant-inactive", 403, "Merchant not active", "The merchant is suspended or disabled and may not perform this operation."),
    ("forbidden", 403, "Forbidden", "The caller may not perform this operation."),
    ("csrf-rejected", 403, "Cross-site request refused", "A request authenticated by the session cookie must send JSON (or no body) and, when it carries an Origin header, come from an allowed origin."),
    ("account-disabled", 403, "Account disabled", "The user account has been disabled by an operator; logging in and using its sessions are refused."),
    ("not-found", 404, "Not found", "No such resource, or it belongs to another merchant."),
    ("method-not-allowed", 405, "Method not allowed", "The path exists but not with this method; the Allow header lists the methods it takes."),
    ("conflict", 409, "Conflict", "The request conflicts with the current state of the resource."),
    ("reversal-pending", 202, "Reversal pending", "The provider accepted the reversal and finishes it later. Not an error: GET the settlement to see it become reversed."),
    ("gone", 410, "Gone", "The resource existed but is no longer usable, such as an expired quote or token."),
    ("payload-too-large", 413, "Payload too large", "Request bodies are limited to 64 KiB."),
    ("unsupported-media-type", 415, "Unsupported media type", "Request bodies must be JSON with Content-Type: application/json."),
    ("validation-error", 422, "Validation failed", "The body or query is well-formed but some fields are invalid; `errors` maps each field to what is wrong."),
    ("rate-limited", 429, "Too many requests", "A rate limit was exceeded; retry after the number of seconds in Retry-After."),
    ("wallet-not-supported", 501, "Wallet provisioning not available", "The card issuer cannot provision a token into this mobile wallet; nothing was stored."),
    ("issuer-unavailable", 502, "Card issuer failed", "The card issuer refused or failed the request; nothing was changed. Retry later."),
    ("internal-error", 500, "Internal error", "Something went wrong on Tern's side. The request_id identifies it in the logs."),
    ("service-unavailable", 503, "Service unavailable", "Tern cannot serve this request right now; retry after the number of seconds in Retry-After if given."),
    ("not-ready", 503, "Not ready", "A component Tern needs is unavailable; the detail names it."),
    ("registration-disabled", 503, "Registration disabled", "Self-service merchant registration is turned off on this deployment."),
    ("dispatch-disabled", 503, "Push dispatch disabled", "No dispatch secret (TERN_DISPATCH_SECRET) or no push gateway is configured on this deployment."),
];

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("invalid signature: {0}")]
    InvalidSignature(String),
    #[error("invalid Idempotency-Key: {0}")]
    InvalidIdempotencyKey(String),
    #[error("unauthorized: {0}")]
    Unauthorized(&'static str),
    /// A service-to-service request whose signature does not check out.
    #[error("invalid service signature: {0}")]
    SignatureRejected(&'static str),
    #[error("missing scope {0}")]
    MissingScope(String),
    #[error("merchant is {0}")]
    MerchantInactive(&'static str),
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A cookie-authenticated unsafe request that breaks the CSRF rule.
    #[error("CSRF check failed: {0}")]
    CsrfRejected(&'static str),
    #[error("the account is disabled")]
    AccountDisabled,
    #[error("not found: {0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed(Vec<String>),
    #[error("conflict: {detail}")]
    Conflict {
        code: Option<&'static str>,
        detail: String,
    },
    #[error("gone: {detail}")]
    Gone {
        code: Option<&'static str>,
        detail: String,
    },
    /// Not an error: a 202 whose body is a problem document (decisions §5).
    #[error("reversal pending: {0}")]
    ReversalPending(String),
    #[error("payload larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("unsupported media type")]
    UnsupportedMediaType,
    #[error("validation failed")]
    Validation(FieldErrors),
    #[error("rate limited")]
    RateLimited { retry_after_s: u64 },
    #[error("overloaded: {detail}")]
    Overloaded { detail: String, retry_after_s: u64 },
    /// Another node owns the entity: the edge forwards the request to
    /// `owner` (`http::forward`); unforwarded, a 503 to retry.
    #[error("served by another node")]
    Elsewhere { owner: Option<String> },
    #[error("not ready: {0}")]
    NotReady(String),
    #[error("self-service registration is disabled")]
    RegistrationDisabled,
    #[error("push dispatch is disabled: {0}")]
    DispatchDisabled(&'static str),
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// A provider Tern depends on failed; nothing was changed.
    #[error("bad gateway: {0}")]
    BadGateway(String),
    /// The issuer's answer to a card change was lost; Tern finishes it.
    #[error("issuer answer lost: {0}")]
    IssuerUnconfirmed(String),
    #[error("internal: {0}")]
    Internal(String),
}

impl ApiError {
    /// A validation failure on one field.
    pub fn field(name: &str, message: impl Into<String>) -> ApiError {
        ApiError::Validation(BTreeMap::from([(name.to_owned(), message.into())]))
    }

    pub fn problem(&self) -> Problem {
        let mut problem = match self {
            ApiError::MalformedJson(detail) => Problem::new("malformed-json").detail(detail),
            ApiError::BadRequest(detail) => Problem::new("bad-request").detail(detail),
            ApiError::InvalidIdempotencyKey(detail) => {
                Problem::new("invalid-idempotency-key").detail(detail)
            }
            ApiError::InvalidSignature(detail) => Problem::new("invalid-signature").detail(detail),
            ApiError::Unauthorized(detail) => Problem::new("unauthorized").detail(*detail),
            ApiError::SignatureRejected(detail) => {
                Problem::new("invalid-service-signature").detail(*detail)
            }
            ApiError::MissingScope(scope) => Problem::new("insufficient-scope")
                .detail(format!("this operation requires the scope {scope}"))
                .code("INSUFFICIENT_SCOPE"),
            ApiError::MerchantInactive(status) => Problem::new("merchant-inactive")
                .detail(format!("the merchant is {status}"))
                .code(if *status == "suspended" {
                    "MERCHANT_SUSPENDED"
                } else {
                    "MERCHANT_DISABLED"
                }),
            ApiError::Forbidden(detail) => Problem::new("forbidden").detail(detail),
            ApiError::CsrfRejected(detail) => Problem::new("csrf-rejected")
                .detail(*detail)
                .code("CSRF_REJECTED"),
            ApiError::AccountDisabled => Problem::new("account-disabled")
                .detail("the account is disabled; contact the operator")
                .code("ACCOUNT_DISABLED"),
            ApiError::NotFound(detail) => Problem::new("not-found").detail(detail),
            ApiError::MethodNotAllowed(allowed) => Problem::new("method-not-allowed")
                .detail(format!("allowed: {}", allowed.join(", "))),
            ApiError::Conflict { code, detail } => {
                let problem = Problem::new("conflict").detail(detail);
                match code {
                    Some(code) => problem.code(code),
                    None => problem,
                }
            }
            ApiError::Gone { code, detail } => {
                let problem = Problem::new("gone").detail(detail);
                match code {
                    Some(code) => problem.code(code),
                    None => problem,
                }
            }
            ApiError::ReversalPending(detail) => Problem::new("reversal-pending").detail(detail),
            ApiError::PayloadTooLarge(limit) => {
                Problem::new("payload-too-large").detail(format!("the body exceeds {limit} bytes"))
            }
            ApiError::UnsupportedMediaType => {
                Problem::new("unsupported-media-type").detail("send Content-Type: application/json")
            }
            ApiError::Validation(errors) => Problem::new("validation-error")
                .detail(validation_detail(errors))
                .errors(errors.clone()),
            ApiError::RateLimited { retry_after_s } => {
                Problem::new("rate-limited").detail(format!("retry after {retry_after_s} s"))
            }
            ApiError::Overloaded { detail, .. } => {
                Problem::new("service-unavailable").detail(detail)
            }
            ApiError::Elsewhere { .. } => Problem::new("service-unavailable").detail(
                "another node serves this resource and could not be reached; retry shortly",
            ),
            ApiError::NotReady(detail) => Problem::new("not-ready").detail(detail),
            ApiError::RegistrationDisabled => Problem::new("registration-disabled")
                .detail("self-service registration is disabled on this deployment"),
            ApiError::DispatchDisabled(detail) => Problem::new("dispatch-disabled").detail(*detail),
            ApiError::NotImplemented(detail) => Problem::new("wallet-not-supported").detail(detail),
            // Provider messages may carry its internals: the log keeps them.
            ApiError::BadGateway(_) => Problem::new("issuer-unavailable")
                .detail("the card issuer failed; nothing was changed, retry later"),
            ApiError::IssuerUnconfirmed(_) => Problem::new("issuer-unavailable").detail(
                "the card issuer's answer was lost; Tern finishes the change once the issuer \
                 confirms it (GET the card to see it), so there is nothing to retry",
            ),
            // The cause goes to the log with the request id, never to the client.
            ApiError::Internal(_) => {
                Problem::new("internal-error").detail("an internal error occurred")
            }
        };
        problem.status = self.status_code().as_u16();
        problem
    }
}

fn validation_detail(errors: &FieldErrors) -> String {
    match errors.len() {
        0 => "the request is invalid".to_owned(),
        1 => errors
            .iter()
            .map(|(field, message)| format!("{field}: {message}"))
            .collect(),
        n => format!("{n} fields are invalid"),
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_)
            | ApiError::BadRequest(_)
            | ApiError::InvalidIdempotencyKey(_)
            | ApiError::InvalidSignature(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) | ApiError::SignatureRejected(_) => StatusCode::UNAUTHORIZED,
            ApiError::MissingScope(_)
            | ApiError::MerchantInactive(_)
            | ApiError::Forbidden(_)
            | ApiError::CsrfRejected(_)
            | ApiError::AccountDisabled => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Gone { .. } => StatusCode::GONE,
            ApiError::ReversalPending(_) => StatusCode::ACCEPTED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::BadGateway(_) | ApiError::IssuerUnconfirmed(_) => StatusCode::BAD_GATEWAY,
            ApiError::Overloaded { .. }
            | ApiError::Elsewhere { .. }
            | ApiError::NotReady(_)
            | ApiError::RegistrationDisabled
            | ApiError::DispatchDisabled(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Internal(cause) => tracing::error!(cause = %cause, "internal error"),
            ApiError::BadGateway(cause) | ApiError::IssuerUnconfirmed(cause) => {
                tracing::warn!(cause = %cause, "provider failed")
            }
            _ => {}
        }
        let mut response = HttpResponse::build(self.status_code());
        match self {
            ApiError::RateLimited { retry_after_s } => {
                response.insert_header((RETRY_AFTER, retry_after_s.to_string()));
            }
            ApiError::Overloaded { retry_after_s, .. } => {
                response.insert_header((RETRY_AFTER, retry_after_s.to_string()));
            }
            ApiError::Elsewhere { .. } => {
                response.insert_header((RETRY_AFTER, "1"));
            }
            ApiError::MethodNotAllowed(allowed) => {
                if let Ok(value) = HeaderValue::from_str(&allowed.join(", ")) {
                    response.insert_header((ALLOW, value));
                }
            }
            _ => {}
        }
        let mut response = response.finish();
        response.extensions_mut().insert(self.problem());
        if let ApiError::Elsewhere { owner: Some(owner) } = self {
            response
                .extensions_mut()
                .insert(crate::http::forward::ForwardTo(owner.clone()));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(cause = %cause, "database unavailable");
                ApiError::Overloaded {
                    detail: "the database is unavailable; retry shortly".into(),
                    retry_after_s: RETRY_AFTER_UNAVAILABLE.as_secs(),
                }
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<PasswordError> for ApiError {
    fn from(error: PasswordError) -> Self {
        match error {
            PasswordError::Busy => ApiError::Overloaded {
                detail: "too many password checks are waiting; retry shortly".into(),
                retry_after_s: 1,
            },
            PasswordError::Failed(cause) => ApiError::Internal(cause),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> Self {
        if let RuntimeError::Elsewhere { owner, .. } = error {
            return ApiError::Elsewhere { owner };
        }
        if let Some(retry_after) = error.retry_after() {
            tracing::warn!(%error, "runtime overloaded or unavailable");
            return ApiError::Overloaded {
                detail: "too much work in flight; retry shortly".into(),
                retry_after_s: retry_after.as_secs().max(1),
            };
        }
        match error {
            RuntimeError::NotFound { kind, .. } => ApiError::NotFound(format!("no such {kind}")),
            RuntimeError::Conflict { kind, .. } => ApiError::Conflict {
                code: None,
                detail: format!("the {kind} was modified concurrently; retry"),
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<tern_schema::ledger::LedgerError> for ApiError {
    fn from(error: tern_schema::ledger::LedgerError) -> Self {
        use tern_schema::ledger::LedgerError;
        match error {
            LedgerError::InsufficientFunds { .. } => ApiError::field(
                "amount",
                "exceeds the available balance of the source account",
            ),
            LedgerError::Overflow { .. } => ApiError::field(
                "amount",
                format!(
                    "would take a ledger balance past its limit of {} minor units",
                    i64::MAX
                ),
            ),
            LedgerError::Store(store) => store.into(),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// Why a quote could not be made: what is wrong goes under the request
/// field it concerns (decisions §3: 422 with field errors).
impl From<QuoteError> for ApiError {
    fn from(error: QuoteError) -> Self {
        match error {
            QuoteError::Pricing { currency, error } => {
                let message = match error {
                    PricingError::BelowMinimum { minimum_minor } => {
                        format!(
                            "must be at least {} {currency}",
                            currency.format(minimum_minor)
                        )
                    }
                    PricingError::AboveMaximum { maximum_minor } => {
                        format!(
                            "must be at most {} {currency}",
                            currency.format(maximum_minor)
                        )
                    }
                    PricingError::NothingToReceive {
                        platform_fee_minor,
                        network_fee_minor,
                    } => format!(
                        "does not cover the fees ({} platform + {} network {currency}): \
                         the receive amount would not be positive",
                        currency.format(platform_fee_minor),
                        currency.format(network_fee_minor)
                    ),
                    PricingError::Overflow => "is too large to quote".to_owned(),
                };
                ApiError::field("send_amount", message)
            }
            QuoteError::NotQuoted { currency, asset } => ApiError::field(
                "receive_asset",
                format!("{asset} is not quoted for {currency}"),
            ),
            QuoteError::Rates(error) => {
                tracing::warn!(%error, "rate source unavailable");
                ApiError::Overloaded {
                    detail: "no rate is available right now; retry shortly".into(),
                    retry_after_s: RETRY_AFTER_UNAVAILABLE.as_secs(),
                }
            }
            QuoteError::Store(error) => error.into(),
            QuoteError::Lifetime => ApiError::Internal("the quote lifetime is out of range".into()),
        }
    }
}

impl From<tern_schema::DieselError> for ApiError {
    fn from(error: tern_schema::DieselError) -> Self {
        StoreError::from(error).into()
    }
}

/// A problem document. `type`, `instance` and `request_id` are filled in by
/// the request middleware.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// `{public url}/problems/<slug>`; GET it for an explanation.
    #[serde(rename = "type")]
    pub type_url: String,
    pub title: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The X-Request-ID of the request, to quote to support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// A named condition, such as `INSUFFICIENT_SCOPE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Field name -> message, for validation failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<FieldErrors>,
    #[serde(skip)]
    pub slug: &'static str,
}

impl Problem {
    /// A problem of a catalogued type; an unknown slug falls back to
    /// internal-error so a typo cannot leak an uncatalogued type.
    pub fn new(slug: &'static str) -> Problem {
        let (slug, status, title) = PROBLEM_TYPES
            .iter()
            .find(|(known, ..)| *known == slug)
            .map(|(slug, status, title, _)| (*slug, *status, *title))
            .unwrap_or(("internal-error", 500, "Internal error"));
        Problem {
            type_url: slug.to_owned(),
            title: title.to_owned(),
            status,
            detail: None,
            instance: None,
            request_id: None,
            code: None,
            errors: None,
            slug,
        }
    }

    /// The generic problem for a status produced outside [`ApiError`].
    pub fn for_status(status: StatusCode) -> Problem {
        let slug = PROBLEM_TYPES
            .iter()
            .find(|(_, code, ..)| *code == status.as_u16())
            .map(|(slug, ..)| *slug)
            .unwrap_or(if status.is_client_error() {
                "bad-request"
            } else {
                "internal-error"
            });
        let mut problem = Problem::new(slug);
        problem.status = status.as_u16();
        problem
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Problem {
        self.detail = Some(detail.into());
        self
    }

    pub fn code(mut self, code: &str) -> Problem {
        self.code = Some(code.to_owned());
        self
    }

    pub fn errors(mut self, errors: FieldErrors) -> Problem {
        self.errors = Some(errors);
        self
    }

    /// Completes the document with what only the request knows and renders it.
    pub fn render(mut self, public_url: &str, instance: &str, request_id: &str) -> Vec<u8> {
        self.type_url = format!("{public_url}/problems/{}", self.slug);
        self.instance = Some(instance.to_owned());
        self.request_id = Some(request_id.to_owned());
        serde_json::to_vec(&self)
            .unwrap_or_else(|_| b"{\"title\":\"Internal error\",\"status\":500}".to_vec())
    }
}

/// GET /problems/{slug}: a short human page explaining a problem type.
pub async fn problem_page(slug: actix_web::web::Path<String>) -> Result<HttpResponse, ApiError> {
    let Some((slug, status, title, text)) = PROBLEM_TYPES
        .iter()
        .find(|(known, ..)| *known == slug.as_str())
    else {
        return Err(ApiError::NotFound(format!("no problem type named {slug}")));
    };
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><h1>{title}</h1><p>HTTP status {status}. Problem type <code>{slug}</code>.</p><p>{text}</p>\
         <p>Every Tern error is an <code>application/problem+json</code> document carrying this type, \
         a <code>request_id</code> and, for validation failures, <code>errors</code> by field. \
         See <a href=\"/docs\">/docs</a>.</p></body></html>"
    );
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "text/html; charset=utf-8"))
        .body(page))
}

impl From<tern_actors::card::CardFailure> for ApiError {
    fn from(failure: tern_actors::card::CardFailure) -> Self {
        use tern_actors::card::CardFailure;
        match failure {
            CardFailure::Refused(refusal) => ApiError::Conflict {
                code: Some(refusal.code()),
                detail: refusal.detail().to_owned(),
            },
            CardFailure::LiveCardExists => ApiError::Conflict {
                code: Some("ACTIVE_CARD_ALREADY_EXISTS"),
                detail: "the user already has an active or frozen virtual card".into(),
            },
            CardFailure::Issuer(cause) => ApiError::BadGateway(cause),
            CardFailure::IssuerUnconfirmed(cause) => ApiError::IssuerUnconfirmed(cause),
            CardFailure::WalletNotSupported(reason) => {
                // The issuer's words stay in the log, as with BadGateway.
                tracing::info!(%reason, "wallet provisioning not supported");
                ApiError::NotImplemented("the issuer cannot provision this wallet".into())
            }
            CardFailure::InvalidLimits(errors) => ApiError::Validation(
                errors
                    .into_iter()
                    .map(|(field, message)| (field.to_owned(), message))
                    .collect(),
            ),
            CardFailure::WalletTokenLimit => ApiError::Conflict {
                code: Some("WALLET_TOKEN_LIMIT_REACHED"),
                detail: "the card holds the most wallet tokens allowed".into(),
            },
            CardFailure::NotFound => ApiError::NotFound("no such card".into()),
            CardFailure::NotYet => ApiError::Overloaded {
                detail: "the card is still recording what this event names; send it again".into(),
                retry_after_s: 1,
            },
            CardFailure::EntryRefused { field, reason } => ApiError::field(field, reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_a_catalogued_type_with_its_status() {
        let errors = [
            ApiError::MalformedJson("x".into()),
            ApiError::Unauthorized("x"),
            ApiError::MissingScope("settlements:write".into()),
            ApiError::MerchantInactive("suspended"),
            ApiError::NotFound("x".into()),
            ApiError::MethodNotAllowed(vec!["GET".into()]),
            ApiError::Conflict {
                code: Some("X"),
                detail: "x".into(),
            },
            ApiError::Gone {
                code: Some("QUOTE_EXPIRED"),
                detail: "x".into(),
            },
            ApiError::PayloadTooLarge(65_536),
            ApiError::UnsupportedMediaType,
            ApiError::field("email", "invalid"),
            ApiError::RateLimited { retry_after_s: 3 },
            ApiError::Overloaded {
                detail: "x".into(),
                retry_after_s: 1,
            },
            ApiError::RegistrationDisabled,
            ApiError::SignatureRejected("x"),
            ApiError::DispatchDisabled("x"),
            ApiError::Internal("secret cause".into()),
        ];
        for error in errors {
            let problem = error.problem();
            assert_eq!(problem.status, error.status_code().as_u16(), "{error}");
            let catalogued = PROBLEM_TYPES
                .iter()
                .find(|(slug, ..)| *slug == problem.slug);
            assert_eq!(
                catalogued.map(|(_, status, ..)| *status),
                Some(problem.status),
                "{error}"
            );
        }
    }

    #[test]
    fn internal_errors_hide_their_cause() {
        let body = ApiError::Internal("password=hunter2".into())
            .problem()
            .render("http://t", "/x", "r1");
        let text = String::from_utf8(body).expect("utf-8");
        assert!(!text.contains("hunter2"));
        assert!(text.contains("\"type\":\"http://t/problems/internal-error\""));
        assert!(text.contains("\"request_id\":\"r1\""));
    }

    #[test]
    fn slugs_are_unique() {
        let mut slugs: Vec<&str> = PROBLEM_TYPES.iter().map(|(slug, ..)| *slug).collect();
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), PROBLEM_TYPES.len());
    }
}
