//! Devices (decisions §11): users' push tokens. Session callers act for
//! themselves; machine callers name the user, who must belong to their
//! merchant. Another merchant's user or device is 404, like a missing one.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use tern_schema::audit::{self, AuditRecord};
use tern_schema::models::DeviceRow;
use tern_schema::store::devices::{self as store, ACTIVE_DEVICES_PER_USER_MAX};
use tern_schema::store::users;
use tern_schema::types::{as_utc, utc_now};
use tern_schema::vocabulary::{DeviceId, DeviceStatus, UserId};
use tern_schema::{write_tx, StoreError};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::http::extract::{JsonBody, Query};
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate::{self, device as check};

pub const LIST_LIMIT_DEFAULT: i64 = 50;
pub const LIST_LIMIT_MAX: i64 = 200;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceRequest {
    /// `ios` or `android`.
    #[schema(example = "ios")]
    pub platform: String,
    /// The push token the platform gave the app: 1 to 4,096 printable
    /// ASCII characters without spaces.
    #[schema(example = "9f2c4e1a7b3d5f60e8a1c2b3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d")]
    pub token: String,
    /// The user the device belongs to: required for API-key callers; a
    /// session caller may omit it or give their own.
    pub user_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Device {
    /// `dev_` + a time-sortable id.
    #[schema(value_type = String, example = "dev_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub id: DeviceId,
    #[schema(example = "ios")]
    pub platform: String,
    #[schema(value_type = String)]
    pub user_id: UserId,
    /// `active` or `revoked`.
    #[schema(example = "active")]
    pub status: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceList {
    /// Active devices, newest first.
    pub data: Vec<Device>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeviceQuery {
    /// Only this user's devices (API-key callers; a session caller sees
    /// their own).
    pub user_id: Option<String>,
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
}

fn view(row: DeviceRow) -> Device {
    Device {
        id: row.id,
        platform: row.platform.as_str().to_owned(),
        user_id: row.user_id,
        status: row.status.as_str().to_owned(),
        created_at: as_utc(row.created_at),
    }
}

fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The user the caller acts for: a session caller's own (naming another
/// is refused), or the one a machine caller names (required).
fn acting_user(caller: &Caller, named: Option<&str>) -> Result<UserId, ApiError> {
    match (caller.user_id(), named) {
        (Some(own), None) => Ok(own.clone()),
        (Some(own), Some(named)) if named == own.as_str() => Ok(own.clone()),
        (Some(_), Some(_)) => Err(ApiError::Forbidden(
            "a session acts for its own user; omit user_id or give your own".into(),
        )),
        (None, None) => Err(ApiError::field(
            "user_id",
            "is required for API-key callers",
        )),
        (None, Some(named)) => {
            check::user_id(named).map_err(|message| ApiError::field("user_id", message))?;
            Ok(UserId::new(named))
        }
    }
}

/// What registration found or did.
enum Registration {
    NoSuchUser,
    Existing(DeviceRow),
    Full,
    Created(DeviceRow),
}

/// Register a push token for a user. The same token again for the same
/// user answers the existing device with 200.
#[utoipa::path(post, path = "/v1/devices", operation_id = "register_device", tag = "devices",
    request_body = DeviceRequest,
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 201, description = "Registered", body = Device),
        (status = 200, description = "The token was already registered for this user: the existing device", body = Device),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope devices:write, or a session naming another user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user holds the most active devices allowed (100; code DEVICE_LIMIT_REACHED)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid platform or token, unknown field, or user_id missing for an API-key caller", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn register(
    caller: Caller,
    state: web::Data<AppState>,
    JsonBody(request): JsonBody<DeviceRequest>,
) -> Result<HttpResponse, ApiError> {
    caller.require("devices:write")?;
    state
        .limits
        .check("device_write", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let platform = check::platform(&request.platform)
        .map_err(|message| errors.insert("platform".into(), message))
        .ok();
    if let Err(message) = check::token(&request.token) {
        errors.insert("token".into(), message);
    }
    let user_id = match acting_user(&caller, request.user_id.as_deref()) {
        Ok(user_id) => Some(user_id),
        Err(ApiError::Validation(more)) => {
            errors.extend(more);
            None
        }
        Err(other) => return Err(other),
    };
    let (Some(platform), Some(user_id)) = (platform, user_id) else {
        return Err(ApiError::Validation(errors));
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let now = utc_now();
    let row = DeviceRow {
        id: DeviceId::generate(),
        merchant_id: caller.merchant_id.clone(),
        user_id,
        platform,
        token_sha256: token_sha256(&request.token),
        token: request.token,
        status: DeviceStatus::Active,
        created_at: now,
        updated_at: now,
        revoked_at: None,
    };
    let registration = match insert_device(&state, &caller, &row).await {
        // Two first registrations of one token raced (PostgreSQL; SQLite
        // writes one at a time): the index kept one, which is the answer.
        Err(StoreError::UniqueViolation(_)) => {
            let mut pooled = state.db.get().await?;
            let mut tx = pooled.tx();
            store::find_active_by_token(&mut tx, &row.user_id, &row.token_sha256)
                .await?
                .map(Registration::Existing)
                .ok_or_else(|| ApiError::Conflict {
                    code: None,
                    detail: "the device was registered and revoked concurrently; retry".into(),
                })?
        }
        other => other?,
    };
    match registration {
        Registration::NoSuchUser => Err(ApiError::NotFound("no such user".into())),
        Registration::Full => Err(ApiError::Conflict {
            code: Some("DEVICE_LIMIT_REACHED"),
            detail: format!(
                "a user holds at most {ACTIVE_DEVICES_PER_USER_MAX} active devices; revoke one first"
            ),
        }),
        Registration::Existing(existing) => Ok(HttpResponse::Ok().json(view(existing))),
        Registration::Created(created) => {
            tracing::info!(merchant_id = %caller.merchant_id, device_id = %created.id, "device registered");
            Ok(HttpResponse::Created().json(view(created)))
        }
    }
}

async fn insert_device(
    state: &AppState,
    caller: &Caller,
    row: &DeviceRow,
) -> Result<Registration, StoreError> {
    write_tx!(state.db, |tx| {
        if users::find_in_merchant(tx, &row.merchant_id, &row.user_id)
            .await?
            .is_none()
        {
            return Ok(Registration::NoSuchUser);
        }
        if let Some(existing) =
            store::find_active_by_token(tx, &row.user_id, &row.token_sha256).await?
        {
            return Ok(Registration::Existing(existing));
        }
        if store::count_active_for_user(tx, &row.user_id).await? >= ACTIVE_DEVICES_PER_USER_MAX {
            return Ok(Registration::Full);
        }
        store::insert(tx, row).await?;
        let registered = AuditRecord {
            merchant_id: row.merchant_id.clone(),
            actor: caller.actor(),
            action: "device.registered",
            resource_type: "device",
            resource_id: row.id.to_string(),
            request_id: caller.request_id.clone(),
            // Never the token: it addresses the user's phone.
            data: json!({"user_id": row.user_id, "platform": row.platform}),
        };
        audit::append(tx, registered).await?;
        Ok(Registration::Created(row.clone()))
    })
}

/// The merchant's active devices, newest first.
#[utoipa::path(get, path = "/v1/devices", operation_id = "list_devices", tag = "devices",
    params(DeviceQuery),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = DeviceList),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope devices:read, or a session naming another user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid limit or user_id", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    Query(query): Query<DeviceQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("devices:read")?;
    state
        .limits
        .check("device_read", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(query.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let user_id = match (caller.user_id(), query.user_id.as_deref()) {
        (None, None) => None,
        (_, named) => Some(acting_user(&caller, named)?),
    };
    let mut pooled = state.db.get().await?;
    let mut tx = pooled.tx();
    if let Some(user_id) = &user_id {
        if users::find_in_merchant(&mut tx, &caller.merchant_id, user_id)
            .await?
            .is_none()
        {
            return Err(ApiError::NotFound("no such user".into()));
        }
    }
    let rows = store::list_active(&mut tx, &caller.merchant_id, user_id.as_ref(), limit).await?;
    Ok(HttpResponse::Ok().json(DeviceList {
        data: rows.into_iter().map(view).collect(),
    }))
}

/// Revoke a device: it gets no more notifications. Revoking again is 204.
#[utoipa::path(delete, path = "/v1/devices/{id}", operation_id = "revoke_device", tag = "devices",
    params(("id" = String, Path, description = "The device id (`dev_...`)")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 204, description = "Revoked (also when it already was)"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope devices:write", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such device for this merchant (or, for a session, for this user)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn revoke(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require("devices:write")?;
    state
        .limits
        .check("device_write", caller.merchant_id.as_str())?;
    let Some(device_id) = DeviceId::from_text(&path.into_inner()) else {
        return Err(ApiError::NotFound("no such device".into()));
    };
    let revoked: Result<bool, ApiError> = write_tx!(state.db, |tx| {
        let found = store::find_in_merchant(tx, &caller.merchant_id, &device_id).await?;
        // A session sees only its own user's devices.
        let Some(device) =
            found.filter(|device| caller.user_id().is_none_or(|own| *own == device.user_id))
        else {
            return Err(ApiError::NotFound("no such device".into()));
        };
        let changed = store::revoke(tx, &device.id, utc_now()).await?;
        if changed {
            let revoked = AuditRecord {
                merchant_id: caller.merchant_id.clone(),
                actor: caller.actor(),
                action: "device.revoked",
                resource_type: "device",
                resource_id: device.id.to_string(),
                request_id: caller.request_id.clone(),
                data: json!({"user_id": device.user_id}),
            };
            audit::append(tx, revoked).await?;
        }
        Ok(changed)
    });
    if revoked? {
        tracing::info!(merchant_id = %caller.merchant_id, %device_id, "device revoked");
    }
    Ok(HttpResponse::NoContent().finish())
}
