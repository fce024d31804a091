//! The merchant's audit chain: its events and their verification.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tern_schema::audit;
use tern_schema::store::audit as store;
use tern_schema::types::as_utc;
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::http::extract::Query;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

// The description of AuditVerification names the rescan window's size.
const _: () = assert!(audit::RESCAN_ROWS_PER_CALL == 2_000);

pub const LIST_LIMIT_DEFAULT: i64 = 50;
pub const LIST_LIMIT_MAX: i64 = 200;

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEvent {
    pub id: String,
    /// Position in the merchant's chain, from 1.
    pub seq: i64,
    pub occurred_at: DateTime<Utc>,
    /// `api_key`, `user`, `operator` or `system`.
    pub actor_type: String,
    pub actor_id: String,
    #[schema(example = "api_key.created")]
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub request_id: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub prev_hash: String,
    pub hash: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEventList {
    pub data: Vec<AuditEvent>,
    /// Older events exist; pass the last seq as `before_seq`.
    pub has_more: bool,
}

/// The outcome of one verification. Each call reads one consistent
/// snapshot and verifies: every event appended since the merchant's
/// checkpoint (the last event an earlier valid call reached), linked from
/// the checkpoint's hash; the checkpoint's own event (still there, with the
/// recorded hash, hashing to it); and up to 2,000 older events, continuing
/// where the previous call's rescan stopped and starting again at the first
/// event once it reaches the checkpoint. The first call verifies the whole
/// chain. So an event edited or deleted after the checkpoint is reported
/// by the next call, and one before it within one pass of the rescan,
/// ceil(checkpoint_seq / 2000) + 1 calls. A call that finds a broken event
/// moves neither the checkpoint nor the rescan, so later calls keep
/// reporting it; other tampering further back shows once it is repaired
/// (operators' `tern audit verify` walks the whole chain at once). Someone
/// able to rewrite every event from the edited one to the head, with fresh
/// hashes, the head and the checkpoint, cannot be detected from the chain
/// alone: keep the `head_hash` of a valid answer elsewhere and check that
/// the chain still holds it (GET /v1/audit/events).
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditVerification {
    /// Every event this call examined is present, unedited and in line,
    /// and the chain reaches the head it records.
    pub valid: bool,
    /// Events this call examined (hashed again): those after the
    /// checkpoint, the checkpoint's own event and the rescanned ones.
    pub checked: i64,
    /// The hash of the chain's last event, as its head records it.
    pub head_hash: String,
    /// The first event found missing, edited or out of line; null when valid.
    pub first_invalid_seq: Option<i64>,
    /// *Extension*: the seq of the chain's last event.
    pub head_seq: i64,
    /// *Extension*: the checkpoint this call continued from; 0 when it
    /// verified from the first event.
    pub checkpoint_seq: i64,
    /// *Extension*: events after `checkpoint_seq` this call examined, what
    /// was appended since the previous valid call.
    pub checked_since_checkpoint: i64,
    /// *Extension*: the first and last seq of the older events this call
    /// re-verified; null when there were none (no checkpoint yet).
    pub rescanned_from_seq: Option<i64>,
    /// *Extension*: see `rescanned_from_seq`.
    pub rescanned_through_seq: Option<i64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
    /// List events older than this seq.
    pub before_seq: Option<i64>,
}

/// List the merchant's audit events, newest first.
#[utoipa::path(get, path = "/v1/audit/events", tag = "audit", params(EventsQuery), security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = AuditEventList),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope audit:read", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid limit or cursor", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn events(
    caller: Caller,
    state: web::Data<AppState>,
    Query(query): Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("audit:read")?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(query.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    if query.before_seq.is_some_and(|seq| seq < 1) {
        return Err(ApiError::field("before_seq", "must be at least 1"));
    }
    let mut pooled = state.db.get().await?;
    let mut rows = store::events_before(
        &mut pooled.tx(),
        &caller.merchant_id,
        query.before_seq,
        limit + 1,
    )
    .await?;
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let data = rows
        .into_iter()
        .map(|row| AuditEvent {
            data: serde_json::from_str(&row.data).unwrap_or(serde_json::Value::Null),
            id: row.id,
            seq: row.seq,
            occurred_at: as_utc(row.occurred_at),
            actor_type: row.actor_type,
            actor_id: row.actor_id,
            action: row.action,
            resource_type: row.resource_type,
            resource_id: row.resource_id,
            request_id: row.request_id,
            prev_hash: row.prev_hash,
            hash: row.hash,
        })
        .collect();
    Ok(HttpResponse::Ok().json(AuditEventList { data, has_more }))
}

/// Verify the merchant's audit hash chain: what was appended since the
/// last verification, its checkpoint, and a rolling window of older events
/// (see AuditVerification for what a call guarantees). Rate limited per
/// merchant (`audit_verify` in TERN_RATE_LIMITS, default 10 per minute).
#[utoipa::path(get, path = "/v1/audit/verify", tag = "audit", security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = AuditVerification),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope audit:read", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited per merchant; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn verify(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require("audit:read")?;
    state
        .limits
        .check("audit_verify", caller.merchant_id.as_str())?;
    let db = state.db.clone();
    let merchant_id = caller.merchant_id.clone();
    // In a task of its own: a client that hangs up must not drop the
    // verification midway, which would leave its pooled connection inside
    // the snapshot's transaction.
    let result = actix_web::rt::spawn(async move { audit::verify(&db, &merchant_id).await })
        .await
        .map_err(|error| ApiError::Internal(format!("audit verification task: {error}")))??;
    let (rescanned_from_seq, rescanned_through_seq) = result.rescanned.unzip();
    Ok(HttpResponse::Ok().json(AuditVerification {
        valid: result.valid,
        checked: result.checked,
        head_hash: result.head_hash,
        first_invalid_seq: result.first_invalid_seq,
        head_seq: result.head_seq,
        checkpoint_seq: result.checkpoint_seq,
        checked_since_checkpoint: result.checked_since_checkpoint,
        rescanned_from_seq,
        rescanned_through_seq,
    }))
}
