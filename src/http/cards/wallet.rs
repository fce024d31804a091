//! Mobile-wallet provisioning (decisions §1, §10): a token for Apple Pay or
//! Google Pay is asked of the issuer through the card's actor and answered
//! `requested`; the issuer's signed `wallet_token.updated` webhook later
//! makes it `active` (or `failed`), and the card's `wallet_status` follows.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tern_actors::ports::Wallet;
use tern_schema::models::CardWalletTokenRow;
use tern_schema::store::cards as store;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{CardId, WalletTokenId};
use utoipa::ToSchema;

use super::{cards, check_text, origin, owned_card, SCOPE_READ, SCOPE_WRITE};
use crate::auth::Caller;
use crate::http::extract::OptionalJsonBody;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;

/// Longest `device_id`: wallet device ids are short opaque strings.
pub const DEVICE_ID_CHARS_MAX: usize = 128;
/// Wallet provisionings per merchant (each calls the issuer).
pub const PROVISION_LIMIT: &str = "wallet_provision";

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WalletProvisionRequest {
    /// The wallet's id of the device the token is for; 1 to 128 characters.
    pub device_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletProvisionResponse {
    #[schema(value_type = String, example = "wtk_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub token_id: WalletTokenId,
    /// `requested` until the issuer reports the wallet's verdict.
    #[schema(example = "requested")]
    pub status: String,
    /// `apple_pay` or `google_pay`.
    #[schema(example = "apple_pay")]
    pub wallet: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletToken {
    #[schema(value_type = String)]
    pub token_id: WalletTokenId,
    #[schema(example = "apple_pay")]
    pub wallet: String,
    /// requested, provisioning, active, suspended, removed or failed.
    #[schema(example = "active")]
    pub status: String,
    pub device_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletStatus {
    #[schema(value_type = String)]
    pub card_id: CardId,
    /// The card's wallet status: `active` when any token is, otherwise the
    /// newest token's status, `none` without tokens.
    #[schema(example = "active")]
    pub status: String,
    /// Oldest first.
    pub tokens: Vec<WalletToken>,
}

fn token(row: CardWalletTokenRow) -> WalletToken {
    WalletToken {
        token_id: row.id,
        wallet: row.wallet.as_str().to_owned(),
        status: row.status.as_str().to_owned(),
        device_id: row.device_id,
        created_at: as_utc(row.created_at),
    }
}

async fn provision(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    card_id: &CardId,
    body: Result<OptionalJsonBody<WalletProvisionRequest>, ApiError>,
    wallet: Wallet,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    let request = body?.0.unwrap_or_default();
    let mut errors = FieldErrors::new();
    check_text(
        &mut errors,
        "device_id",
        request.device_id.as_deref(),
        DEVICE_ID_CHARS_MAX,
    );
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let card = owned_card(&state, &caller, card_id).await?;
    // Per merchant: each provisioning calls the issuer.
    state
        .limits
        .check(PROVISION_LIMIT, caller.merchant_id.as_str())?;
    let row = cards(&state)?
        .provision_wallet(
            &card.id,
            wallet,
            request.device_id.map(|id| id.trim().to_owned()),
            WalletTokenId::generate(),
            origin(&caller, &req),
        )
        .await??;
    tracing::info!(card_id = %card.id, token_id = %row.id, wallet = wallet.as_str(), "wallet token requested");
    Ok(HttpResponse::Ok().json(WalletProvisionResponse {
        token_id: row.id,
        status: row.status.as_str().to_owned(),
        wallet: row.wallet.as_str().to_owned(),
        created_at: as_utc(row.created_at),
    }))
}

/// Provision the card into Apple Pay.
#[utoipa::path(post, path = "/v1/cards/{id}/wallet/apple_pay", operation_id = "provision_apple_pay", tag = "cards",
    params(("id" = String, Path)),
    request_body(content = Option<WalletProvisionRequest>, description = "Optional device_id"),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "Requested; the issuer's webhook makes it active or failed", body = WalletProvisionResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_CLOSED, CARD_BLOCKED, CARD_NOT_ISSUED or WALLET_TOKEN_LIMIT_REACHED", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many provisionings for this merchant; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown field, or a device_id that is not 1 to 128 printable characters", body = Problem, content_type = "application/problem+json"),
        (status = 501, description = "The issuer cannot provision this wallet; nothing was stored", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; no token was stored. When only the issuer's answer was lost, Tern stores the token the issuer made", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn provision_apple_pay(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<OptionalJsonBody<WalletProvisionRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    provision(req, caller, state, &path, body, Wallet::ApplePay).await
}

/// Provision the card into Google Pay.
#[utoipa::path(post, path = "/v1/cards/{id}/wallet/google_pay", operation_id = "provision_google_pay", tag = "cards",
    params(("id" = String, Path)),
    request_body(content = Option<WalletProvisionRequest>, description = "Optional device_id"),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "Requested; the issuer's webhook makes it active or failed", body = WalletProvisionResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_CLOSED, CARD_BLOCKED, CARD_NOT_ISSUED or WALLET_TOKEN_LIMIT_REACHED", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many provisionings for this merchant; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown field, or a device_id that is not 1 to 128 printable characters", body = Problem, content_type = "application/problem+json"),
        (status = 501, description = "The issuer cannot provision this wallet; nothing was stored", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; no token was stored. When only the issuer's answer was lost, Tern stores the token the issuer made", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn provision_google_pay(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<OptionalJsonBody<WalletProvisionRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    provision(req, caller, state, &path, body, Wallet::GooglePay).await
}

/// The card's wallet status and its tokens.
#[utoipa::path(get, path = "/v1/cards/{id}/wallet/status", operation_id = "get_card_wallet_status", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, body = WalletStatus),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn status(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let card = owned_card(&state, &caller, &path).await?;
    let mut pooled = state.db.get().await?;
    let rows = store::wallet_tokens(&mut pooled.tx(), &card.id).await?;
    // From the tokens just read rather than the card row read before them:
    // a token update committing in between would otherwise show both states.
    Ok(HttpResponse::Ok().json(WalletStatus {
        card_id: card.id,
        status: tern_actors::card::wallet_status_of(&rows)
            .as_str()
            .to_owned(),
        tokens: rows.into_iter().map(token).collect(),
    }))
}
