//! The console's one error type and the one place it becomes a response:
//! an HTML page with the exact status (the API's errors are problem
//! documents, `http/problem.rs`; a person in a browser reads these). The
//! cause of a failure goes to the log, never into the page.

use actix_web::http::header::RETRY_AFTER;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use tern_actors::runtime::RuntimeError;
use tern_schema::StoreError;

use super::{html, page};
use crate::http::problem::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No TERN_OPERATOR_TOKEN: the console is off, never open.
    #[error("the console is off")]
    Off,
    /// An Authorization header that is not the operator token.
    #[error("not the operator token")]
    Unauthorized,
    /// A state-changing request without a sign-in, a CSRF token or an
    /// Origin of this site.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    #[error("rate limited")]
    RateLimited { retry_after_s: u64 },
    /// Another node owns the merchant's endpoint actor: the edge forwards
    /// the request there (`http::forward`).
    #[error("served by another node")]
    Elsewhere { owner: Option<String> },
    /// Overloaded or the database is down: retry shortly.
    #[error("unavailable: {detail}")]
    Unavailable { detail: String, retry_after_s: u64 },
    #[error("internal: {0}")]
    Internal(String),
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            ConsoleError::Off | ConsoleError::Elsewhere { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::Unauthorized => StatusCode::UNAUTHORIZED,
            ConsoleError::Forbidden(_) => StatusCode::FORBIDDEN,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ConsoleError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let mut response = match self {
            ConsoleError::Off => html(status, page::off()),
            // The relay needs the API's answer (it carries the owner).
            ConsoleError::Elsewhere { owner } => {
                return ApiError::Elsewhere {
                    owner: owner.clone(),
                }
                .error_response();
            }
            ConsoleError::Unauthorized => html(
                status,
                page::sign_in(Some("The Authorization header is not the operator token.")),
            ),
            ConsoleError::Forbidden(detail) => html(status, page::error("Refused", detail)),
            ConsoleError::BadRequest(detail) => html(status, page::error("Bad request", detail)),
            ConsoleError::RateLimited { retry_after_s } => html(
                status,
                page::sign_in(Some(&format!(
                    "Too many sign-in attempts from this address; try again in {retry_after_s} s."
                ))),
            ),
            ConsoleError::Unavailable { detail, .. } => {
                html(status, page::error("Unavailable", detail))
            }
            ConsoleError::Internal(cause) => {
                tracing::error!(%cause, "console: internal error");
                html(
                    status,
                    page::error(
                        "Internal error",
                        "Something went wrong on Tern's side; the log has the cause under this request's X-Request-ID.",
                    ),
                )
            }
        };
        let retry_after_s = match self {
            ConsoleError::RateLimited { retry_after_s }
            | ConsoleError::Unavailable { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        };
        if let Some(retry_after_s) = retry_after_s {
            if let Ok(value) = retry_after_s.to_string().parse() {
                response.headers_mut().insert(RETRY_AFTER, value);
            }
        }
        response
    }
}

impl From<StoreError> for ConsoleError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(%cause, "console: database unavailable");
                ConsoleError::Unavailable {
                    detail: "The database is unavailable; retry shortly.".into(),
                    retry_after_s: 1,
                }
            }
            other => ConsoleError::Internal(other.to_string()),
        }
    }
}

impl From<RuntimeError> for ConsoleError {
    fn from(error: RuntimeError) -> Self {
        if let RuntimeError::Elsewhere { owner, .. } = error {
            return ConsoleError::Elsewhere { owner };
        }
        if let Some(retry_after) = error.retry_after() {
            tracing::warn!(%error, "console: runtime overloaded or unavailable");
            return ConsoleError::Unavailable {
                detail: "Too much work in flight; retry shortly.".into(),
                retry_after_s: retry_after.as_secs().max(1),
            };
        }
        ConsoleError::Internal(error.to_string())
    }
}

impl From<ApiError> for ConsoleError {
    /// The limiter answers the API's error; only its 429 reaches here.
    fn from(error: ApiError) -> Self {
        match error {
            ApiError::RateLimited { retry_after_s } => ConsoleError::RateLimited { retry_after_s },
            other => ConsoleError::Internal(other.to_string()),
        }
    }
}
