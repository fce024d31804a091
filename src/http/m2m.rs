//! Merchant self-service registration (machine-to-machine plane).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::ledger;
use tern_schema::models::{ApiKeyRow, MerchantRow};
use tern_schema::store::{api_keys, merchants};
use tern_schema::types::{utc_now, MerchantStatus};
use tern_schema::vocabulary::MerchantId;
use tern_schema::{write_tx, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::api_key;
use crate::auth::Scopes;
use crate::http::api_keys::key_created;
use crate::http::client_address::client_ip_key;
use crate::http::extract::{request_id, JsonBody};
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    #[schema(min_length = 1, example = "Acme Payments")]
    pub organization_name: String,
    /// Where the welcome email goes; not kept as a credential.
    #[schema(format = "email", example = "ops@acme.example")]
    pub email: String,
    /// Overrides the default scopes (every scope) of the issued key.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RegisterResponse {
    pub merchant_id: Uuid,
    /// Non-secret id of the issued key, used in audit logs.
    pub api_key_id: Uuid,
    /// The key in full, `svc_<prefix>_<secret>`: shown this once, never again.
    #[schema(example = "svc_3f9a1c2b7d4e_9c1d...")]
    pub api_key: String,
    /// Non-secret lookup handle, safe to display.
    pub api_key_prefix: String,
    /// The key's effective scopes.
    pub scopes: Vec<String>,
}

/// Register a merchant and issue its first API key.
///
/// Provisions an active merchant and a key with every scope unless `scopes`
/// narrows them. The key is in the response once and cannot be recovered.
#[utoipa::path(post, path = "/v1/auth/m2m/register", tag = "auth-m2m", request_body = RegisterRequest,
    responses(
        (status = 201, description = "Merchant and key created", body = RegisterResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Empty organization name, invalid email or unknown scopes", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Per-IP limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Internal error", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Self-service registration disabled", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn register(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Result<JsonBody<RegisterRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    if !state.config.self_service_registration {
        return Err(ApiError::RegistrationDisabled);
    }
    let ip = client_ip_key(&req);
    state.limits.check("m2m_register", &ip)?;
    let JsonBody(body) = body?;
    let (organization_name, scopes) = validate_registration(&body)?;

    let now = utc_now();
    let merchant_id = Uuid::new_v4();
    let api_key_id = Uuid::new_v4();
    let key = api_key::generate();
    let merchant = MerchantRow {
        id: MerchantId::new(merchant_id.to_string()),
        organization_name,
        status: MerchantStatus::Active,
        created_at: now,
        updated_at: now,
    };
    let key_row = ApiKeyRow {
        id: api_key_id.to_string(),
        merchant_id: merchant.id.clone(),
        prefix: key.prefix.clone(),
        secret_sha256: key.secret_sha256,
        name: Some("default".to_owned()),
        scopes: scopes.to_stored(),
        created_at: now,
        last_used_at: None,
        expires_at: None,
        revoked_at: None,
    };
    let request_id = request_id(&req);
    let stored: Result<(), ApiError> = write_tx!(state.db, |tx| {
        open_merchant(tx, &merchant, AuditActor::System, &request_id).await?;
        api_keys::insert(tx, &key_row).await?;
        audit::append(tx, key_created(&key_row, AuditActor::System, &request_id)).await?;
        Ok(())
    });
    stored?;
    tracing::info!(merchant_id = %merchant_id, api_key_id = %api_key_id, "merchant registered");
    Ok(HttpResponse::Created().json(RegisterResponse {
        merchant_id,
        api_key_id,
        api_key: key.plaintext,
        api_key_prefix: key.prefix,
        scopes: scopes.names(),
    }))
}

/// Creates a merchant with its funding accounts and audit chain, and
/// records the registration on that chain; inside the caller's transaction.
pub async fn open_merchant(
    tx: &mut Tx<'_>,
    merchant: &MerchantRow,
    actor: AuditActor,
    request_id: &str,
) -> Result<(), ApiError> {
    merchants::insert(tx, merchant).await?;
    ledger::open_funding_accounts(tx, &merchant.id).await?;
    audit::open_chain(tx, &merchant.id).await?;
    let registered = AuditRecord {
        merchant_id: merchant.id.clone(),
        actor,
        action: "merchant.registered",
        resource_type: "merchant",
        resource_id: merchant.id.to_string(),
        request_id: request_id.to_owned(),
        data: json!({"organization_name": merchant.organization_name, "status": merchant.status}),
    };
    audit::append(tx, registered).await?;
    Ok(())
}

fn validate_registration(body: &RegisterRequest) -> Result<(String, Scopes), ApiError> {
    let mut errors = FieldErrors::new();
    let name = validate::name(&body.organization_name)
        .map_err(|message| errors.insert("organization_name".into(), message.into()))
        .ok();
    if let Err(message) = validate::email(&body.email) {
        errors.insert("email".into(), message.into());
    }
    let scopes = match body.scopes.as_deref() {
        None => Some(Scopes::all()),
        Some(requested) => validate::scopes(requested)
            .map_err(|m| errors.insert("scopes".into(), m))
            .ok(),
    };
    match (name, scopes) {
        (Some(name), Some(scopes)) if errors.is_empty() => Ok((name, scopes)),
        _ => Err(ApiError::Validation(errors)),
    }
}
