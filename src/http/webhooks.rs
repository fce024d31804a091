//! Webhook endpoint management (interface: Webhook endpoint management;
//! decisions §8): the merchant's endpoint, replay of a transfer's events,
//! and the deliveries listing for debugging (*extension*). Changes go
//! through the merchant's endpoint actor, which also delivers.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tern_actors::runtime::Registry;
use tern_actors::webhook::machine::Status;
use tern_actors::webhook::signing::mask;
use tern_actors::webhook::{EndpointCommand, EndpointReply, WebhookEndpointKind};
use tern_schema::models::{WebhookAttemptRow, WebhookEndpointRow, WebhookEventRow};
use tern_schema::store::{transfers, webhooks as store};
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{EventId, MerchantId, TransferId};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::http::extract::{JsonBody, Query};
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

pub const DELIVERIES_LIMIT_DEFAULT: i64 = 50;
pub const DELIVERIES_LIMIT_MAX: i64 = 200;
/// Longest transfer id looked up; longer ones cannot be Tern's.

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpointRequest {
    /// HTTPS URL, at most 2,048 characters, without credentials.
    #[schema(example = "https://merchant.example/hooks/tern")]
    pub url: String,
    /// HMAC key, at least 24 characters. A `whsec_<base64>` secret is the
    /// base64 of the key (Standard Webhooks); any other is its UTF-8 bytes.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpointResponse {
    #[schema(value_type = String)]
    pub merchant_id: MerchantId,
    pub url: String,
    /// A redacted preview; the secret is never returned.
    #[schema(example = "whsec_****LaSw")]
    pub secret_mask: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The transfer whose delivered and dead-lettered events to send again.
    pub transfer_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayResponse {
    /// Events re-armed for immediate redelivery.
    pub requeued: usize,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Only this transfer's events.
    pub transfer_id: Option<String>,
    /// pending, delivered, dead or skipped.
    pub status: Option<String>,
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
}

/// One attempt to deliver an event.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryAttempt {
    /// 1, 2, ... within a round; a replay starts a new round.
    pub attempt: i32,
    pub round: i32,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's status, when it answered.
    pub status_code: Option<i32>,
    /// Why the attempt failed: a refused target, timeout, connection error
    /// or non-2xx answer.
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// An event and the state of its delivery (*extension*).
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    /// The event id: `webhook-id` on every attempt.
    #[schema(value_type = String)]
    pub event_id: EventId,
    /// `transfer.<status>`.
    #[serde(rename = "type")]
    pub event_type: String,
    #[schema(value_type = String)]
    pub transfer_id: TransferId,
    /// pending, delivered, dead (dead-lettered) or skipped (no endpoint).
    pub status: String,
    /// Attempts in the current round.
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub request_id: String,
    pub created_at: DateTime<Utc>,
    pub attempt_log: Vec<DeliveryAttempt>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveriesResponse {
    pub items: Vec<Delivery>,
    pub count: usize,
}

fn registry(state: &AppState) -> &Registry<WebhookEndpointKind> {
    &state.webhooks
}

fn endpoint_view(row: &WebhookEndpointRow) -> WebhookEndpointResponse {
    WebhookEndpointResponse {
        merchant_id: row.merchant_id.clone(),
        url: row.url.clone(),
        secret_mask: mask(&row.secret),
        created_at: as_utc(row.created_at),
        updated_at: as_utc(row.updated_at),
    }
}

/// Store the endpoint, replacing any earlier one.
#[utoipa::path(put, path = "/v1/webhooks/endpoint", operation_id = "put_webhook_endpoint", tag = "webhooks",
    request_body = WebhookEndpointRequest,
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 204, description = "Stored; replaces any earlier endpoint"),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope webhooks:write, no merchant context, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid URL (not https, credentials, too long, internal address) or secret (under 24 characters)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put_endpoint(
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<JsonBody<WebhookEndpointRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("webhooks:write")?;
    caller.require_active()?;
    state
        .limits
        .check("webhook_write", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let url = validate::webhook::url(&request.url, state.config.webhook_allow_private)
        .map_err(|message| errors.insert("url".into(), message))
        .ok();
    if let Err(message) = validate::webhook::secret(&request.secret) {
        errors.insert("secret".into(), message);
    }
    let Some(url) = url.filter(|_| errors.is_empty()) else {
        return Err(ApiError::Validation(errors));
    };
    let command = EndpointCommand::Put {
        url,
        secret: request.secret,
        actor: caller.actor(),
        request_id: caller.request_id.clone(),
    };
    registry(&state)
        .call(caller.merchant_id.as_str(), command)
        .await?;
    tracing::info!(merchant_id = %caller.merchant_id, "webhook endpoint stored");
    Ok(HttpResponse::NoContent().finish())
}

/// The endpoint, with its secret masked.
#[utoipa::path(get, path = "/v1/webhooks/endpoint", operation_id = "get_webhook_endpoint", tag = "webhooks",
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = WebhookEndpointResponse),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope webhooks:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No endpoint configured", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_endpoint(
    caller: Caller,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require("webhooks:read")?;
    state
        .limits
        .check("webhook_read", caller.merchant_id.as_str())?;
    let mut pooled = state.db.get().await?;
    let mut tx = pooled.tx();
    match store::endpoint(&mut tx, &caller.merchant_id).await? {
        Some(row) => Ok(HttpResponse::Ok().json(endpoint_view(&row))),
        None => Err(ApiError::NotFound("no webhook endpoint configured".into())),
    }
}

/// Remove the endpoint; events not yet delivered are skipped.
#[utoipa::path(delete, path = "/v1/webhooks/endpoint", operation_id = "delete_webhook_endpoint", tag = "webhooks",
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 204, description = "Removed, or there was none"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope webhooks:write", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete_endpoint(
    caller: Caller,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require("webhooks:write")?;
    state
        .limits
        .check("webhook_write", caller.merchant_id.as_str())?;
    let command = EndpointCommand::Delete {
        actor: caller.actor(),
        request_id: caller.request_id.clone(),
    };
    registry(&state)
        .call(caller.merchant_id.as_str(), command)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Re-arm the transfer's delivered and dead-lettered events for immediate
/// redelivery.
#[utoipa::path(post, path = "/v1/webhooks/replay", operation_id = "replay_webhooks", tag = "webhooks",
    request_body = ReplayRequest,
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = ReplayResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope webhooks:write, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such transfer for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No endpoint configured to deliver to (code WEBHOOK_ENDPOINT_NOT_CONFIGURED)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing transfer_id", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn replay(
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<JsonBody<ReplayRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("webhooks:write")?;
    caller.require_active()?;
    state
        .limits
        .check("webhook_write", caller.merchant_id.as_str())?;
    let transfer_id = match request.transfer_id {
        Some(id) if !id.trim().is_empty() => id,
        _ => {
            let mut errors = FieldErrors::new();
            errors.insert("transfer_id".into(), "is required".into());
            return Err(ApiError::Validation(errors));
        }
    };
    let transfer_id = own_transfer(&state, &caller, &transfer_id).await?;
    let command = EndpointCommand::Replay {
        transfer_id,
        actor: caller.actor(),
        request_id: caller.request_id.clone(),
    };
    match registry(&state)
        .call(caller.merchant_id.as_str(), command)
        .await?
    {
        EndpointReply::Requeued(requeued) => {
            Ok(HttpResponse::Ok().json(ReplayResponse { requeued }))
        }
        EndpointReply::NoEndpoint => Err(ApiError::Conflict {
            code: Some("WEBHOOK_ENDPOINT_NOT_CONFIGURED"),
            detail:
                "no webhook endpoint is configured to deliver to; PUT /v1/webhooks/endpoint first"
                    .into(),
        }),
        other => Err(ApiError::Internal(format!(
            "unexpected replay reply {other:?}"
        ))),
    }
}

/// The caller's transfer named by `text`; 404 when it is not one (no
/// lookup when the text cannot be a transfer id).
async fn own_transfer(
    state: &AppState,
    caller: &Caller,
    text: &str,
) -> Result<TransferId, ApiError> {
    let found = match TransferId::from_text(text) {
        Some(id) => {
            let mut pooled = state.db.get().await?;
            let mut tx = pooled.tx();
            transfers::find(&mut tx, &id).await?
        }
        None => None,
    };
    caller.own(found, "transfer").map(|row| row.id)
}

fn delivery_view((event, attempts): (WebhookEventRow, Vec<WebhookAttemptRow>)) -> Delivery {
    Delivery {
        attempt_log: attempts
            .into_iter()
            .map(|attempt| DeliveryAttempt {
                attempt: attempt.attempt,
                round: attempt.round,
                attempted_at: as_utc(attempt.attempted_at),
                status_code: attempt.status_code,
                error: attempt.error,
                duration_ms: attempt.duration_ms,
            })
            .collect(),
        event_id: event.id,
        event_type: event.event_type,
        transfer_id: event.transfer_id,
        status: event.status.to_string(),
        attempts: event.attempts,
        next_attempt_at: event.next_attempt_at.map(as_utc),
        delivered_at: event.delivered_at.map(as_utc),
        request_id: event.request_id,
        created_at: as_utc(event.created_at),
    }
}

/// *Extension*: the merchant's events, newest first, with every attempt.
#[utoipa::path(get, path = "/v1/webhooks/deliveries", operation_id = "list_webhook_deliveries", tag = "webhooks",
    params(DeliveriesQuery),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = DeliveriesResponse),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope webhooks:read", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid status or limit", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn deliveries(
    caller: Caller,
    state: web::Data<AppState>,
    Query(query): Query<DeliveriesQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("webhooks:read")?;
    state
        .limits
        .check("webhook_read", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(
        query.limit,
        DELIVERIES_LIMIT_DEFAULT,
        DELIVERIES_LIMIT_MAX,
        &mut errors,
    );
    if let Some(status) = &query.status {
        if Status::parse(status).is_none() {
            errors.insert(
                "status".into(),
                format!(
                    "must be one of {}",
                    store::STATUSES.map(Status::as_str).join(", ")
                ),
            );
        }
    }
    if query
        .transfer_id
        .as_ref()
        .is_some_and(|id| id.len() > TransferId::LENGTH_MAX)
    {
        errors.insert("transfer_id".into(), "is not a transfer id".into());
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let transfer_id = query.transfer_id.as_deref().map(TransferId::new);
    let mut pooled = state.db.get().await?;
    let rows = store::list(
        &mut pooled.tx(),
        &caller.merchant_id,
        transfer_id.as_ref(),
        // Validated above: `None` only when no filter was asked for.
        query.status.as_deref().and_then(Status::parse),
        limit,
    )
    .await?;
    let items: Vec<Delivery> = rows.into_iter().map(delivery_view).collect();
    Ok(HttpResponse::Ok().json(DeliveriesResponse {
        count: items.len(),
        items,
    }))
}
