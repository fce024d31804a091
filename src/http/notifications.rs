//! Push dispatch (decisions §11): a service, not a merchant, asks Tern to
//! notify a user's devices. It proves itself with `X-Svc-Signature` over the
//! raw body, checked before the body is parsed. The dispatch, one delivery
//! row per active device and the audit event commit together; the messages
//! are sent afterwards (`tern_actors::push`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_actors::adapters::{
    replay_digest, signed_timestamp, verify_signature, SignatureError, DISPATCH_SIGNATURE_HEADER,
    SIGNATURE_TOLERANCE_DEFAULT,
};
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::models::{PushDeliveryRow, PushDispatchRow};
use tern_schema::store::{devices, push, users};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{DispatchId, PushStatus, UserId, UserStatus};
use tern_schema::{write_tx, StoreError};
use utoipa::ToSchema;

use crate::http::client_address::client_ip_key;
use crate::http::extract::{check_json_headers, parse_json, request_id};
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate::device as check;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatchRequest {
    /// The user whose active devices are notified.
    pub user_id: String,
    /// 1 to 256 characters.
    #[schema(example = "Payment received")]
    pub title: String,
    /// 1 to 4,096 characters.
    #[schema(example = "Your card was charged 12.00 EUR")]
    pub body: String,
    /// A JSON object passed to the app as is (at most 4 KiB).
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DispatchAccepted {
    #[schema(value_type = String, example = "psh_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub dispatch_id: DispatchId,
    /// How many active devices were targeted (0 when the user has none).
    pub devices: usize,
}

/// A validated dispatch.
struct Dispatch {
    user_id: UserId,
    title: String,
    body: String,
    data: Option<String>,
}

/// Notify a user's active devices. Signed with `X-Svc-Signature: t=<unix
/// seconds>,v1=<hex HMAC-SHA256(dispatch secret, "{t}.{raw body}")>`,
/// accepted within 5 minutes of its timestamp.
#[utoipa::path(post, path = "/v1/notifications/dispatch", operation_id = "dispatch_notification", tag = "notifications",
    request_body = DispatchRequest,
    security(("service_signature" = [])),
    responses(
        (status = 202, description = "Recorded; the messages are sent in the background", body = DispatchAccepted),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, malformed, stale or wrong X-Svc-Signature", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing, empty or too long fields, data not an object, or unknown fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No dispatch secret or no push gateway configured", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn dispatch(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let secret = state
        .config
        .dispatch_secret
        .as_deref()
        .ok_or(ApiError::DispatchDisabled(
            "no dispatch secret (TERN_DISPATCH_SECRET) is configured",
        ))?;
    let delivery = state
        .push
        .as_ref()
        .ok_or(ApiError::DispatchDisabled("no push gateway is configured"))?;
    // No credential names the caller before the signature is checked, so
    // the limit counts per client address.
    let client = client_ip_key(&req);
    state.limits.check("push_dispatch", &client)?;
    let replay = verify(&req, secret.as_bytes(), &body)?;
    check_json_headers(&req)?;
    let request: DispatchRequest = parse_json(&body)?;
    let dispatch = validated(request)?;
    if let Some(first) = first_dispatch(&state, &replay).await? {
        return Ok(first);
    }

    let now = utc_now();
    let dispatch_id = DispatchId::generate();
    let request_id = request_id(&req);
    let targeted: Result<usize, ApiError> = write_tx!(state.db, |tx| {
        let Some(user) = users::find(tx, &dispatch.user_id).await? else {
            return Err(ApiError::NotFound("no such user".into()));
        };
        // A disabled account gets no notifications; the dispatch is still
        // recorded, with no device targeted.
        let targets = if user.status == UserStatus::Disabled {
            Vec::new()
        } else {
            devices::active_for_user(tx, &user.id).await?
        };
        let row = PushDispatchRow {
            id: dispatch_id.clone(),
            merchant_id: user.merchant_id.clone(),
            user_id: user.id.clone(),
            title: dispatch.title.clone(),
            body: dispatch.body.clone(),
            data: dispatch.data.clone(),
            request_id: request_id.clone(),
            created_at: now,
            replay_sha256: Some(replay.clone()),
        };
        // First write of the transaction: a concurrent twin waits here on
        // the unique digest and fails once this one commits.
        match push::insert_dispatch(tx, &row).await {
            Err(StoreError::UniqueViolation(_)) => return Err(replayed()),
            other => other?,
        }
        let deliveries: Vec<PushDeliveryRow> = targets
            .iter()
            .map(|device| PushDeliveryRow {
                dispatch_id: row.id.clone(),
                device_id: device.id.clone(),
                status: PushStatus::Pending,
                attempts: 0,
                last_error: None,
                provider_message_id: None,
                created_at: now,
                updated_at: now,
                delivered_at: None,
            })
            .collect();
        push::insert_deliveries(tx, &deliveries).await?;
        let dispatched = AuditRecord {
            merchant_id: user.merchant_id,
            actor: AuditActor::System,
            action: "push.dispatched",
            resource_type: "push_dispatch",
            resource_id: row.id.to_string(),
            request_id: row.request_id.clone(),
            // Never the title or body: they are the user's messages.
            data: json!({"user_id": row.user_id, "devices": targets.len()}),
        };
        audit::append(tx, dispatched).await?;
        Ok(targets.len())
    });
    let devices = match targeted {
        Err(ApiError::Conflict {
            code: Some(DISPATCH_REPLAYED),
            ..
        }) => {
            // The same signed request committed first, on this node or
            // another: answer what it answered, send nothing.
            return first_dispatch(&state, &replay)
                .await?
                .ok_or_else(|| ApiError::Internal("a replayed dispatch vanished".into()));
        }
        other => other?,
    };
    if devices > 0 {
        delivery.spawn(dispatch_id.clone());
    }
    tracing::info!(%dispatch_id, devices, "push dispatched");
    Ok(HttpResponse::Accepted().json(DispatchAccepted {
        dispatch_id,
        devices,
    }))
}

/// Marks, inside the dispatch's transaction, that the same signed request
/// committed first; never answered as such (see [`first_dispatch`]).
const DISPATCH_REPLAYED: &str = "DISPATCH_REPLAYED";

fn replayed() -> ApiError {
    ApiError::Conflict {
        code: Some(DISPATCH_REPLAYED),
        detail: "this signed dispatch was already recorded".into(),
    }
}

/// The answer of the dispatch already recorded for this signed request: a
/// request repeated within the signature tolerance (decisions §11).
async fn first_dispatch(
    state: &AppState,
    replay_sha256: &str,
) -> Result<Option<HttpResponse>, ApiError> {
    let mut pooled = state.db.get().await?;
    let Some((dispatch_id, devices)) =
        push::find_by_replay(&mut pooled.tx(), replay_sha256).await?
    else {
        return Ok(None);
    };
    tracing::info!(%dispatch_id, "push dispatch replayed; nothing sent again");
    Ok(Some(HttpResponse::Accepted().json(DispatchAccepted {
        dispatch_id,
        devices: usize::try_from(devices).unwrap_or_default(),
    })))
}

/// 401 unless the header signs exactly these bytes within the tolerance;
/// answers the request's replay digest.
fn verify(req: &HttpRequest, secret: &[u8], body: &[u8]) -> Result<String, ApiError> {
    let header = req
        .headers()
        .get(DISPATCH_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .ok_or(ApiError::SignatureRejected(
            "the X-Svc-Signature header is missing",
        ))?;
    let now = chrono::Utc::now().timestamp();
    verify_signature(secret, header, body, now, SIGNATURE_TOLERANCE_DEFAULT).map_err(|error| {
        ApiError::SignatureRejected(match error {
            SignatureError::Malformed => "the X-Svc-Signature header is malformed",
            SignatureError::Stale => "the signature timestamp is more than 5 minutes away",
            SignatureError::Mismatch => "the signature does not match the body",
        })
    })?;
    let timestamp = signed_timestamp(header).ok_or(ApiError::SignatureRejected(
        "the X-Svc-Signature header is malformed",
    ))?;
    Ok(replay_digest(timestamp, body))
}

fn validated(request: DispatchRequest) -> Result<Dispatch, ApiError> {
    let mut errors = FieldErrors::new();
    let mut field = |name: &str, checked: Result<String, String>| {
        checked
            .map_err(|message| errors.insert(name.to_owned(), message))
            .ok()
    };
    let user_id = field(
        "user_id",
        check::user_id(&request.user_id).map(|()| request.user_id.clone()),
    );
    let title = field(
        "title",
        check::text(&request.title, check::TITLE_CHARS_MAX, false),
    );
    let body = field(
        "body",
        check::text(&request.body, check::BODY_CHARS_MAX, true),
    );
    let data = match request.data.as_ref().filter(|data| !data.is_null()) {
        None => Some(None),
        Some(data) => field("data", check::data(data)).map(Some),
    };
    match (user_id, title, body, data) {
        (Some(user_id), Some(title), Some(body), Some(data)) => Ok(Dispatch {
            user_id: UserId::new(user_id),
            title,
            body,
            data,
        }),
        _ => Err(ApiError::Validation(errors)),
    }
}
