//! Webhooks from the card provider (`POST /v1/webhooks/<card_provider>`):
//! the signature is verified over the raw body before anything is stored,
//! and each provider event id is recorded once however often it arrives.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use tern_actors::adapters::{
    verify_sandbox_signature, SANDBOX_SIGNATURE_HEADER, SIGNATURE_TOLERANCE_DEFAULT,
};
use tern_schema::models::InboundEventRow;
use tern_schema::store::inbound_events;
use tern_schema::types::utc_now;
use tern_schema::write_tx;
use utoipa::ToSchema;

use crate::http::extract::{parse_json, request_id};
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

/// The configured card provider's name in the path (decisions §1).
pub const CARD_PROVIDER: &str = "sandbox";
/// Longest event id or type stored.
pub const EVENT_FIELD_LENGTH_MAX: usize = 255;

/// A provider event. Providers add fields over time, so unknown ones are kept, not refused.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProviderEvent {
    pub id: String,
    #[serde(rename = "type")]
    #[schema(example = "payment.succeeded")]
    pub event_type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Received {
    pub received: bool,
    /// The event id was delivered before; nothing new was recorded.
    pub duplicate: bool,
}

/// Receive a card-provider webhook, verified by its signature header.
#[utoipa::path(post, path = "/v1/webhooks/{provider}", tag = "webhooks", request_body = ProviderEvent,
    params(("provider" = String, Path, description = "The configured card provider: `sandbox`")),
    security(("provider_signature" = [])),
    responses(
        (status = 200, body = Received),
        (status = 400, description = "Missing, malformed, stale or wrong signature, or a body that is not an event", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such provider", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn receive(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if path.as_str() != CARD_PROVIDER {
        return Err(ApiError::NotFound(format!(
            "no provider named {}",
            path.as_str()
        )));
    }
    let secret = state
        .config
        .card_provider_webhook_secret
        .as_deref()
        .ok_or_else(|| ApiError::Internal("no card provider webhook secret".into()))?;
    let header = req
        .headers()
        .get(SANDBOX_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| {
            ApiError::InvalidSignature(format!("the {SANDBOX_SIGNATURE_HEADER} header is missing"))
        })?;
    let now = chrono::Utc::now().timestamp();
    verify_sandbox_signature(
        secret.as_bytes(),
        header,
        &body,
        now,
        SIGNATURE_TOLERANCE_DEFAULT,
    )
    .map_err(|error| ApiError::InvalidSignature(error.to_string()))?;

    let event: ProviderEvent = parse_json(&body).map_err(|error| match error {
        ApiError::Validation(errors) => {
            ApiError::BadRequest(format!("not a provider event: {errors:?}"))
        }
        other => other,
    })?;
    let too_long = |text: &str| text.is_empty() || text.len() > EVENT_FIELD_LENGTH_MAX;
    if too_long(&event.id) || too_long(&event.event_type) {
        return Err(ApiError::BadRequest(
            "event id and type must be 1 to 255 characters".into(),
        ));
    }
    let row = InboundEventRow {
        provider: CARD_PROVIDER.to_owned(),
        event_id: event.id,
        event_type: event.event_type,
        payload: String::from_utf8_lossy(&body).into_owned(),
        request_id: request_id(&req),
        received_at: utc_now(),
        processed_at: None,
    };
    let new: Result<bool, ApiError> = write_tx!(state.db, |tx| Ok(inbound_events::insert_if_new(
        tx, &row
    )
    .await?));
    let new = new?;
    tracing::info!(event_id = %row.event_id, event_type = %row.event_type, duplicate = !new, "provider event received");
    Ok(HttpResponse::Ok().json(Received {
        received: true,
        duplicate: !new,
    }))
}
