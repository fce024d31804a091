//! API key management (decisions §1a, extension): list, create, revoke.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::models::ApiKeyRow;
use tern_schema::store::api_keys::{self, KEYS_PER_MERCHANT_MAX};
use tern_schema::types::{as_utc, truncate_micros, utc_now};
use tern_schema::write_tx;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{api_key, Caller, Scopes};
use crate::http::extract::OptionalJsonBody;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyView {
    pub api_key_id: Uuid,
    pub api_key_prefix: String,
    pub name: Option<String>,
    pub scopes: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList {
    pub data: Vec<ApiKeyView>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyRequest {
    #[schema(example = "reporting")]
    pub name: Option<String>,
    /// Defaults to the creating key's scopes; may not exceed them.
    pub scopes: Option<Vec<String>>,
    /// When the key stops working; must be in the future. A key created by
    /// an expiring key expires no later than its creator: an omitted or
    /// later value is capped to the creator's.
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey {
    pub api_key_id: Uuid,
    /// The key in full: shown this once, never again.
    pub api_key: String,
    pub api_key_prefix: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// The audit record of a new key (never its secret).
pub fn key_created(row: &ApiKeyRow, actor: AuditActor, request_id: &str) -> AuditRecord {
    AuditRecord {
        merchant_id: row.merchant_id.clone(),
        actor,
        action: "api_key.created",
        resource_type: "api_key",
        resource_id: row.id.clone(),
        request_id: request_id.to_owned(),
        data: json!({"api_key_prefix": row.prefix, "name": row.name, "scopes": row.scopes, "expires_at": row.expires_at.map(as_utc)}),
    }
}

fn view(row: ApiKeyRow) -> ApiKeyView {
    ApiKeyView {
        api_key_id: Uuid::parse_str(&row.id).unwrap_or_default(),
        api_key_prefix: row.prefix,
        name: row.name,
        scopes: Scopes::from_stored(&row.scopes).names(),
        created_at: as_utc(row.created_at),
        last_used_at: row.last_used_at.map(as_utc),
        expires_at: row.expires_at.map(as_utc),
        revoked_at: row.revoked_at.map(as_utc),
    }
}

/// List the merchant's API keys, newest first. Secrets are never listed.
#[utoipa::path(get, path = "/v1/api-keys", operation_id = "list_api_keys", tag = "api-keys", security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = ApiKeyList),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope api_keys:read", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require("api_keys:read")?;
    let mut pooled = state.db.get().await?;
    let rows = api_keys::list_for_merchant(&mut pooled.tx(), &caller.merchant_id).await?;
    Ok(HttpResponse::Ok().json(ApiKeyList {
        data: rows.into_iter().map(view).collect(),
    }))
}

/// Create an API key. The key is in the response once.
#[utoipa::path(post, path = "/v1/api-keys", operation_id = "create_api_key", tag = "api-keys", request_body(content = Option<CreateApiKeyRequest>),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 201, body = CreatedApiKey),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope api_keys:write, scopes the creator lacks, or merchant not active", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The merchant holds the most keys allowed", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown scopes, empty name or past expiry", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    caller: Caller,
    state: web::Data<AppState>,
    body: OptionalJsonBody<CreateApiKeyRequest>,
) -> Result<HttpResponse, ApiError> {
    caller.require("api_keys:write")?;
    // A suspended or disabled merchant keeps its keys but mints no new ones.
    caller.require_active()?;
    let request = body.0.unwrap_or_default();
    let NewKey {
        name,
        scopes,
        expires_at,
    } = validate_create(&request)?;
    let scopes = scopes.unwrap_or_else(|| caller.scopes.clone());
    let beyond = scopes.missing_from(&caller.scopes);
    if !beyond.is_empty() {
        return Err(ApiError::Forbidden(format!(
            "a key cannot grant scopes its creator lacks: {}",
            beyond.join(", ")
        )));
    }

    let now = utc_now();
    let key = api_key::generate();
    let row = ApiKeyRow {
        id: Uuid::new_v4().to_string(),
        merchant_id: caller.merchant_id.clone(),
        prefix: key.prefix.clone(),
        secret_sha256: key.secret_sha256.clone(),
        name,
        scopes: scopes.to_stored(),
        created_at: now,
        last_used_at: None,
        expires_at: capped_expiry(expires_at, caller.key_expires_at),
        revoked_at: None,
    };
    let created: Result<(), ApiError> = write_tx!(state.db, |tx| {
        if api_keys::count_for_merchant(tx, &caller.merchant_id).await? >= KEYS_PER_MERCHANT_MAX {
            return Err(ApiError::Conflict {
                code: Some("API_KEY_LIMIT_REACHED"),
                detail: format!(
                    "a merchant holds at most {KEYS_PER_MERCHANT_MAX} keys, revoked ones included"
                ),
            });
        }
        api_keys::insert(tx, &row).await?;
        audit::append(tx, key_created(&row, caller.actor(), &caller.request_id)).await?;
        Ok(())
    });
    created?;
    tracing::info!(merchant_id = %caller.merchant_id, api_key_id = %row.id, "api key created");
    Ok(HttpResponse::Created().json(CreatedApiKey {
        api_key_id: Uuid::parse_str(&row.id).unwrap_or_default(),
        api_key: key.plaintext,
        api_key_prefix: key.prefix,
        scopes: scopes.names(),
        expires_at: row.expires_at.map(as_utc),
    }))
}

/// The new key's expiry: the requested one, but never after the creating
/// key's own (decisions §1a: an omitted or later `expires_at` is capped),
/// so a key cannot outlive its parent by minting a child.
fn capped_expiry(
    requested: Option<DateTime<Utc>>,
    creator: Option<NaiveDateTime>,
) -> Option<NaiveDateTime> {
    let requested = requested.map(|at| truncate_micros(at.naive_utc()));
    match (requested, creator) {
        (Some(requested), Some(creator)) => Some(requested.min(creator)),
        (requested, None) => requested,
        (None, creator) => creator,
    }
}

/// A validated creation request.
struct NewKey {
    name: Option<String>,
    /// `None`: inherit the creator's scopes.
    scopes: Option<Scopes>,
    expires_at: Option<DateTime<Utc>>,
}

fn validate_create(request: &CreateApiKeyRequest) -> Result<NewKey, ApiError> {
    let mut errors = FieldErrors::new();
    let name = match &request.name {
        None => None,
        Some(name) => validate::name(name)
            .map_err(|m| errors.insert("name".into(), m.into()))
            .ok(),
    };
    let scopes = request.scopes.as_deref().and_then(|requested| {
        validate::scopes(requested)
            .map_err(|m| errors.insert("scopes".into(), m))
            .ok()
    });
    if request.expires_at.is_some_and(|at| at <= Utc::now()) {
        errors.insert("expires_at".into(), "must be in the future".into());
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    Ok(NewKey {
        name,
        scopes,
        expires_at: request.expires_at,
    })
}

/// Revoke an API key. It answers 401 within one second on every node.
#[utoipa::path(delete, path = "/v1/api-keys/{id}", operation_id = "revoke_api_key", tag = "api-keys", security(("bearer" = []), ("api_key" = []), ("session" = [])),
    params(("id" = String, Path, description = "The api_key_id")),
    responses(
        (status = 204, description = "Revoked (also when it already was)"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope api_keys:write", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such key for this merchant", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn revoke(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require("api_keys:write")?;
    let key_id = path.into_inner();
    let revoked: Result<Option<ApiKeyRow>, ApiError> = write_tx!(state.db, |tx| {
        let found = api_keys::revoke(tx, &caller.merchant_id, &key_id, utc_now()).await?;
        if let Some(row) = found.as_ref().filter(|row| row.revoked_at.is_none()) {
            let revoked = AuditRecord {
                merchant_id: caller.merchant_id.clone(),
                actor: caller.actor(),
                action: "api_key.revoked",
                resource_type: "api_key",
                resource_id: row.id.clone(),
                request_id: caller.request_id.clone(),
                data: json!({"api_key_prefix": row.prefix}),
            };
            audit::append(tx, revoked).await?;
        }
        Ok(found)
    });
    let row = caller.own(revoked?, "API key")?;
    state.keys.invalidate(&row.prefix);
    tracing::info!(merchant_id = %caller.merchant_id, api_key_id = %row.id, "api key revoked");
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("a time")
    }

    #[test]
    fn a_child_key_never_outlives_its_creator() {
        let creator = Some(at("2030-01-01 00:00:00"));
        let earlier = DateTime::<Utc>::from_naive_utc_and_offset(at("2029-06-01 00:00:00"), Utc);
        let later = DateTime::<Utc>::from_naive_utc_and_offset(at("2031-01-01 00:00:00"), Utc);
        assert_eq!(capped_expiry(None, creator), creator);
        assert_eq!(capped_expiry(Some(later), creator), creator);
        assert_eq!(
            capped_expiry(Some(earlier), creator),
            Some(at("2029-06-01 00:00:00"))
        );
        assert_eq!(capped_expiry(None, None), None);
        assert_eq!(
            capped_expiry(Some(later), None),
            Some(at("2031-01-01 00:00:00"))
        );
    }
}
