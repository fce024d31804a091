//! The Idempotency-Key on the wire (decisions §4), shared by every create
//! that takes one: the header, and the answers a key's earlier use gives.

use actix_web::http::header::{HeaderValue, LOCATION};
use actix_web::{HttpRequest, HttpResponse};
use uuid::Uuid;

use crate::http::problem::ApiError;

pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED_HEADER: &str = "idempotent-replayed";

/// The Idempotency-Key header as sent, if it is text.
pub fn raw_idempotency_key(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(IDEMPOTENCY_KEY_HEADER)?;
    value.to_str().ok().map(str::trim)
}

/// The Idempotency-Key header: a UUID v4, canonicalised (400 otherwise).
pub fn idempotency_key(req: &HttpRequest) -> Result<Uuid, ApiError> {
    let value = req.headers().get(IDEMPOTENCY_KEY_HEADER).ok_or_else(|| {
        ApiError::InvalidIdempotencyKey("the Idempotency-Key header is required".into())
    })?;
    value
        .to_str()
        .ok()
        .and_then(|text| Uuid::parse_str(text.trim()).ok())
        .filter(|uuid| uuid.get_version_num() == 4)
        .ok_or_else(|| {
            ApiError::InvalidIdempotencyKey("the Idempotency-Key must be a UUID v4".into())
        })
}

/// The recorded answer to the key's first request, sent again, marked
/// `Idempotent-Replayed: true`, with the resource's Location when known.
pub fn replay(
    status: u16,
    body: String,
    location: Option<String>,
) -> Result<HttpResponse, ApiError> {
    let status = actix_web::http::StatusCode::from_u16(status)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut response = HttpResponse::build(status);
    if let Some(location) = location {
        response.insert_header((LOCATION, location));
    }
    Ok(response
        .insert_header((IDEMPOTENT_REPLAYED_HEADER, HeaderValue::from_static("true")))
        .content_type("application/json")
        .body(body))
}

/// The first request with this key has not finished (409).
pub fn in_progress() -> ApiError {
    ApiError::Conflict {
        code: Some("IDEMPOTENCY_KEY_IN_USE"),
        detail: "a request with this Idempotency-Key is still being processed; retry shortly"
            .into(),
    }
}

/// The key is a transfer leg's settlement key (decisions §7): no request
/// may take it, whatever its body (409).
pub fn leg_key() -> ApiError {
    ApiError::Conflict {
        code: Some(LEG_KEY_CODE),
        detail: "this Idempotency-Key is the settlement key of a transfer's leg; choose another"
            .into(),
    }
}

/// The `code` of [`leg_key`]'s problem.
pub const LEG_KEY_CODE: &str = "TRANSFER_LEG_KEY";

/// The key was used with a different request (422).
pub fn mismatch() -> ApiError {
    ApiError::field(
        "Idempotency-Key",
        "was already used with a different request body",
    )
}
