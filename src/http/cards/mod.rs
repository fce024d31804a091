//! Cards (interface "Cards", decisions §1 and §10). Session callers act for
//! themselves; machine callers (cards:read, cards:write) name a user of
//! their merchant. Every change goes to the card's actor; reads come from
//! the store. Another merchant's card, or another user's for a session, is
//! 404 like a missing one.

mod resolve;
pub mod secure;
pub mod view;
pub mod wallet;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use tern_actors::card::machine::Operation;
use tern_actors::card::{Answer, CardKind, Cards, CreateError, NewCard, Origin};
use tern_actors::runtime::Registry;
use tern_schema::models::{CardRow, UserRow};
use tern_schema::store::cards as store;
use tern_schema::store::users;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{CardId, UserId};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::http::extract::{request_id, JsonBody, OptionalJsonBody, Query};
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;
use resolve::resolve;
use view::{
    Balance, Card, CardArtList, CardEventList, CardList, Limits, LimitsPatch, TransactionList,
};

pub const DISPLAY_NAME_CHARS_MAX: usize = 64;
pub const CARDHOLDER_CHARS_MAX: usize = 128;
pub const KYC_REFERENCE_CHARS_MAX: usize = 128;
pub const REASON_CHARS_MAX: usize = 500;
pub const ACTIVITY_LIMIT_DEFAULT: i64 = 50;

pub const SCOPE_READ: &str = "cards:read";
pub const SCOPE_WRITE: &str = "cards:write";
/// Issues and replacements per merchant (each makes a card at the issuer).
pub const ISSUE_LIMIT: &str = "card_issue";

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCardRequest {
    /// SVC_VIRTUAL_USD (default), SVC_VIRTUAL_EUR, SVC_PREPAID or
    /// SVC_BUSINESS; `SVC_VIRTUAL` is a legacy name of the default.
    #[schema(example = "SVC_VIRTUAL_USD")]
    pub program_id: Option<String>,
    /// `virtual` (default) or `physical`.
    #[serde(rename = "type")]
    pub card_type: Option<String>,
    /// ISO 4217; default the program's currency, else USD.
    pub currency: Option<String>,
    pub display_name: Option<String>,
    pub kyc_reference: Option<String>,
    /// The card's user: API-key callers only (required for them).
    pub user_id: Option<String>,
    /// The name on the card: API-key callers only; default the user's name.
    pub cardholder: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateCardRequest {
    /// 1 to 64 characters; `null` removes it, leaving it out keeps it.
    #[serde(default, deserialize_with = "view::present")]
    #[schema(value_type = Option<String>)]
    pub display_name: Option<Option<String>>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceRequest {
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CardQuery {
    /// API-key callers: whose cards. Sessions see their own.
    pub user_id: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ActivityQuery {
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
}

/// The card actors, or 503 when no card issuer is configured.
pub(crate) fn registry(state: &AppState) -> Result<&Registry<CardKind>, ApiError> {
    state
        .cards
        .as_ref()
        .ok_or_else(|| ApiError::NotReady("no card issuer is configured".into()))
}

/// The card actors, asked through typed commands, or 503 when no card
/// issuer is configured.
pub(crate) fn cards(state: &AppState) -> Result<Cards<'_>, ApiError> {
    registry(state).map(Cards::new)
}

fn origin(caller: &Caller, req: &HttpRequest) -> Origin {
    Origin {
        actor: caller.actor(),
        request_id: request_id(req),
    }
}

fn check_user_id(value: &str) -> Result<(), ApiError> {
    uuid::Uuid::parse_str(value)
        .map(|_| ())
        .map_err(|_| ApiError::field("user_id", "must be a user id (UUID)"))
}

/// The user the caller acts for: a session's own (naming another is 403),
/// or the user a machine caller names, which must be of its merchant (404).
async fn acting_user(
    state: &AppState,
    caller: &Caller,
    named: Option<&str>,
    missing: ApiError,
) -> Result<UserRow, ApiError> {
    let user_id = match (caller.user_id(), named) {
        (Some(own), None) => own.clone(),
        (Some(own), Some(named)) if named == own.as_str() => own.clone(),
        (Some(_), Some(_)) => {
            return Err(ApiError::Forbidden(
                "a session acts for its own user; omit user_id".into(),
            ))
        }
        (None, None) => return Err(missing),
        (None, Some(named)) => {
            check_user_id(named)?;
            UserId::new(named)
        }
    };
    let mut pooled = state.db.get().await?;
    let mut tx = pooled.tx();
    users::find_in_merchant(&mut tx, &caller.merchant_id, &user_id)
        .await?
        .ok_or_else(|| ApiError::NotFound("no such user".into()))
}

/// The card when the caller may see it: of its merchant, and the session's
/// own user's.
async fn owned_card(
    state: &AppState,
    caller: &Caller,
    card_id: &CardId,
) -> Result<CardRow, ApiError> {
    let mut pooled = state.db.get().await?;
    let row = store::find_in_merchant(&mut pooled.tx(), &caller.merchant_id, card_id).await?;
    match row {
        Some(row) if caller.user_id().is_none_or(|own| *own == row.user_id) => Ok(row),
        _ => Err(ApiError::NotFound("no such card".into())),
    }
}

async fn render(state: &AppState, row: CardRow) -> Result<Card, ApiError> {
    let mut pooled = state.db.get().await?;
    let mut tx = pooled.tx();
    Ok(view::card(&mut tx, row).await?)
}

/// Renders the card a change to it answers.
async fn changed(state: &AppState, answer: Answer<CardRow>) -> Result<Card, ApiError> {
    render(state, answer??).await
}

/// The card designs cards may wear.
#[utoipa::path(get, path = "/v1/card-art", operation_id = "list_card_art", tag = "cards",
    responses((status = 200, body = CardArtList)))]
pub async fn card_art() -> HttpResponse {
    HttpResponse::Ok().json(view::card_art())
}

/// The user's cards, newest first.
#[utoipa::path(get, path = "/v1/cards", operation_id = "list_cards", tag = "cards", params(CardQuery),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, body = CardList),
        (status = 401, description = "No session, and no user_id from an API-key caller", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:read, or a session naming another user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A query parameter of the wrong type or out of range", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    query: Result<Query<CardQuery>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let Query(query) = query?;
    let user = acting_user(
        &state,
        &caller,
        query.user_id.as_deref(),
        ApiError::Unauthorized("no session: name the user with user_id"),
    )
    .await?;
    let mut pooled = state.db.get().await?;
    let tx = &mut pooled.tx();
    let rows = store::list_for_user(tx, &caller.merchant_id, &user.id).await?;
    let mut data = Vec::with_capacity(rows.len());
    for row in rows {
        data.push(view::card(tx, row).await?);
    }
    Ok(HttpResponse::Ok().json(CardList { data }))
}

pub(super) fn check_text(
    errors: &mut crate::http::problem::FieldErrors,
    field: &str,
    value: Option<&str>,
    max: usize,
) {
    if let Some(value) = value {
        let chars = value.trim().chars().count();
        if chars == 0 || chars > max || value.chars().any(char::is_control) {
            errors.insert(
                field.to_owned(),
                format!("must be 1 to {max} printable characters"),
            );
        }
    }
}

/// Issue a card through the card issuer and activate it.
#[utoipa::path(post, path = "/v1/cards", operation_id = "create_card", tag = "cards",
    request_body(content = Option<CreateCardRequest>, description = "Optional; every field has a default"),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 201, description = "Issued and active", body = Card),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such user for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The user has an active or frozen virtual card (code ACTIVE_CARD_ALREADY_EXISTS)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown program, type or currency; bad text; user_id or cardholder from a session, or user_id missing for an API key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many issues and replacements for this merchant; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; nothing was made", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<OptionalJsonBody<CreateCardRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    let request = body?.0.unwrap_or_default();
    let resolved = resolve(&request, &caller)?;
    state
        .limits
        .check(ISSUE_LIMIT, caller.merchant_id.as_str())?;
    let registry = registry(&state)?.clone();
    let user = acting_user(
        &state,
        &caller,
        request.user_id.as_deref(),
        ApiError::field("user_id", "is required for API-key callers"),
    )
    .await?;
    let new = NewCard {
        merchant_id: caller.merchant_id.clone(),
        user_id: user.id.clone(),
        program: resolved.program,
        card_type: resolved.card_type,
        currency: resolved.currency,
        display_name: resolved.display_name,
        cardholder: request
            .cardholder
            .as_deref()
            .map(str::trim)
            .unwrap_or(&user.name)
            .to_owned(),
        origin: origin(&caller, &req),
    };
    let issued = tern_actors::card::create(&registry, &new, utc_now())
        .await
        .map_err(|error| match error {
            CreateError::Refused(failure) => failure.into(),
            CreateError::Moved => ApiError::Overloaded {
                detail: "the card moved to another node; retry shortly".into(),
                retry_after_s: 1,
            },
            CreateError::Runtime(other) => other.into(),
        })?;
    let card = render(&state, issued).await?;
    tracing::info!(card_id = %card.id, merchant_id = %caller.merchant_id, "card issued");
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/v1/cards/{}", card.id)))
        .json(card))
}

/// A card of the caller.
#[utoipa::path(get, path = "/v1/cards/{id}", operation_id = "get_card", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, body = Card),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let row = owned_card(&state, &caller, &path).await?;
    Ok(HttpResponse::Ok().json(render(&state, row).await?))
}

/// Rename a card.
#[utoipa::path(patch, path = "/v1/cards/{id}", operation_id = "update_card", tag = "cards",
    params(("id" = String, Path)), request_body = UpdateCardRequest,
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, body = Card),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The card is closed (code CARD_CLOSED)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn update(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<JsonBody<UpdateCardRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    let row = owned_card(&state, &caller, &path).await?;
    let JsonBody(request) = body?;
    let mut errors = crate::http::problem::FieldErrors::new();
    check_text(
        &mut errors,
        "display_name",
        request.display_name.as_ref().and_then(Option::as_deref),
        DISPLAY_NAME_CHARS_MAX,
    );
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let display_name = request
        .display_name
        .map(|name| name.map(|name| name.trim().to_owned()));
    let answer = cards(&state)?
        .update(
            &row.id,
            display_name,
            Default::default(),
            origin(&caller, &req),
        )
        .await;
    Ok(HttpResponse::Ok().json(changed(&state, answer).await?))
}

async fn status_change(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    card_id: &CardId,
    operation: Operation,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    let row = owned_card(&state, &caller, card_id).await?;
    let answer = cards(&state)?
        .change(&row.id, operation, origin(&caller, &req))
        .await;
    Ok(HttpResponse::Ok().json(changed(&state, answer).await?))
}

/// Freeze a card: authorizations are declined until it is unfrozen.
#[utoipa::path(post, path = "/v1/cards/{id}/freeze", operation_id = "freeze_card", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "Frozen", body = Card),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_ALREADY_FROZEN, CARD_BLOCKED or CARD_CLOSED", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; the card is as it was. When only the issuer's answer was lost, Tern finishes the change itself once the issuer confirms it", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn freeze(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    status_change(req, caller, state, &path, Operation::Freeze).await
}

/// Unfreeze a frozen card.
#[utoipa::path(post, path = "/v1/cards/{id}/unfreeze", operation_id = "unfreeze_card", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "Active", body = Card),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_NOT_FROZEN or CARD_CLOSED", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; the card is as it was. When only the issuer's answer was lost, Tern finishes the change itself once the issuer confirms it", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn unfreeze(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    status_change(req, caller, state, &path, Operation::Unfreeze).await
}

/// Close a card for good. Closing a closed card answers it unchanged.
#[utoipa::path(post, path = "/v1/cards/{id}/close", operation_id = "close_card", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "Closed", body = Card),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; the card is as it was. When only the issuer's answer was lost, Tern finishes the change itself once the issuer confirms it", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn close(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    status_change(req, caller, state, &path, Operation::Close).await
}

/// Replace a card: the old one is blocked and a new one issued in its
/// place, with the same program, currency, name and limits.
#[utoipa::path(post, path = "/v1/cards/{id}/replace", operation_id = "replace_card", tag = "cards",
    params(("id" = String, Path)),
    request_body(content = Option<ReplaceRequest>, description = "Optional reason"),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "The new card; the old one is blocked", body = Card),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_CLOSED, or another live card exists (ACTIVE_CARD_ALREADY_EXISTS)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing, mistyped or unknown fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many issues and replacements for this merchant; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The issuer failed; the old card is as it was", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn replace(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<OptionalJsonBody<ReplaceRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    let row = owned_card(&state, &caller, &path).await?;
    let request = body?.0.unwrap_or_default();
    // A replacement is an issue: the issuer makes a card.
    state
        .limits
        .check(ISSUE_LIMIT, caller.merchant_id.as_str())?;
    let mut errors = crate::http::problem::FieldErrors::new();
    check_text(
        &mut errors,
        "reason",
        request.reason.as_deref(),
        REASON_CHARS_MAX,
    );
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let answer = cards(&state)?
        .replace(&row.id, request.reason, origin(&caller, &req))
        .await;
    Ok(HttpResponse::Ok().json(changed(&state, answer).await?))
}

/// The card's spend limits and channel switches.
#[utoipa::path(get, path = "/v1/cards/{id}/limits", operation_id = "get_card_limits", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),(status = 200, body = Limits), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn limits(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let row = owned_card(&state, &caller, &path).await?;
    Ok(HttpResponse::Ok().json(Limits::from(row.limits)))
}

/// Change limits: fields left out keep their value.
#[utoipa::path(patch, path = "/v1/cards/{id}/limits", operation_id = "update_card_limits", tag = "cards",
    params(("id" = String, Path)), request_body = LimitsPatch,
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope cards:write, or merchant suspended or disabled (merchant-inactive)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, body = Limits),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "CARD_CLOSED", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An amount outside 0 to 10^12, or the values the merchant set out of order (per_transaction <= daily <= monthly); program defaults never fail", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn update_limits(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    body: Result<JsonBody<LimitsPatch>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_WRITE)?;
    caller.require_active()?;
    let row = owned_card(&state, &caller, &path).await?;
    let JsonBody(patch) = body?;
    let answer = cards(&state)?
        .update(&row.id, None, patch.into(), origin(&caller, &req))
        .await;
    let card = changed(&state, answer).await?;
    Ok(HttpResponse::Ok().json(card.limits))
}

/// The balance the card spends from (its merchant's funding account in the
/// card's currency) and this card's holds.
#[utoipa::path(get, path = "/v1/cards/{id}/balance", operation_id = "get_card_balance", tag = "cards",
    params(("id" = String, Path)),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),(status = 200, body = Balance), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn balance(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let row = owned_card(&state, &caller, &path).await?;
    let balances = view::balances_at_once(&state.db, &row).await?;
    Ok(HttpResponse::Ok().json(Balance {
        card_id: row.id,
        currency: row.currency,
        balance_minor: balances.balance_minor,
        available_minor: balances.available_minor,
        hold_minor: balances.hold_minor,
        pending_minor: balances.pending_minor,
    }))
}

fn activity_limit(query: &ActivityQuery) -> Result<i64, ApiError> {
    match query.limit {
        None => Ok(ACTIVITY_LIMIT_DEFAULT),
        Some(limit) if (1..=store::TRANSACTIONS_LISTED_MAX).contains(&limit) => Ok(limit),
        Some(_) => Err(ApiError::field("limit", "must be an integer from 1 to 200")),
    }
}

/// Card activity from the provider's webhooks, newest first.
#[utoipa::path(get, path = "/v1/cards/{id}/events", operation_id = "list_card_events", tag = "cards",
    params(("id" = String, Path), ActivityQuery),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 200, body = CardEventList),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A query parameter of the wrong type or out of range", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn events(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    query: Result<Query<ActivityQuery>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let row = owned_card(&state, &caller, &path).await?;
    let limit = activity_limit(&query?.0)?;
    let mut pooled = state.db.get().await?;
    let rows = store::transactions(&mut pooled.tx(), &row.id, limit).await?;
    Ok(HttpResponse::Ok().json(CardEventList {
        data: rows.iter().map(view::event).collect(),
    }))
}

/// Authorizations, clearings and refunds of the card, newest first. A
/// reversed or expired hold shows as its authorization's status (and in
/// the card's events).
#[utoipa::path(get, path = "/v1/cards/{id}/transactions", operation_id = "list_card_transactions", tag = "cards",
    params(("id" = String, Path), ActivityQuery),
    security(("session" = []), ("bearer" = []), ("api_key" = [])),
    responses(
        (status = 403, description = "Missing scope (cards:read to read, cards:write to change)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired credential", body = Problem, content_type = "application/problem+json"),
        (status = 200, body = TransactionList),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A query parameter of the wrong type or out of range", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No card issuer is configured, or the card's actor is overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn transactions(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<CardId>,
    query: Result<Query<ActivityQuery>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.require(SCOPE_READ)?;
    let row = owned_card(&state, &caller, &path).await?;
    let limit = activity_limit(&query?.0)?;
    let mut pooled = state.db.get().await?;
    let rows = store::transactions_of_kinds(
        &mut pooled.tx(),
        &row.id,
        &store::LISTED_TRANSACTION_KINDS,
        limit,
    )
    .await?;
    Ok(HttpResponse::Ok().json(TransactionList {
        data: rows.into_iter().map(view::transaction).collect(),
    }))
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/v1/card-art").route(web::get().to(card_art)))
        .service(
            web::resource("/v1/cards")
                .route(web::get().to(list))
                .route(web::post().to(create)),
        )
        .service(
            web::resource("/v1/cards/{id}")
                .route(web::get().to(get))
                .route(web::patch().to(update)),
        )
        .service(web::resource("/v1/cards/{id}/balance").route(web::get().to(balance)))
        .service(web::resource("/v1/cards/{id}/close").route(web::post().to(close)))
        .service(web::resource("/v1/cards/{id}/events").route(web::get().to(events)))
        .service(web::resource("/v1/cards/{id}/freeze").route(web::post().to(freeze)))
        .service(web::resource("/v1/cards/{id}/unfreeze").route(web::post().to(unfreeze)))
        .service(
            web::resource("/v1/cards/{id}/limits")
                .route(web::get().to(limits))
                .route(web::patch().to(update_limits)),
        )
        .service(web::resource("/v1/cards/{id}/replace").route(web::post().to(replace)))
        .service(
            web::resource("/v1/cards/{id}/secure-details").route(web::post().to(secure::reveal)),
        )
        .service(web::resource("/v1/cards/{id}/transactions").route(web::get().to(transactions)))
        // One resource per wallet, so an unknown wallet is an unknown path (404).
        .service(
            web::resource("/v1/cards/{id}/wallet/apple_pay")
                .route(web::post().to(wallet::provision_apple_pay)),
        )
        .service(
            web::resource("/v1/cards/{id}/wallet/google_pay")
                .route(web::post().to(wallet::provision_google_pay)),
        )
        .service(
            web::resource("/v1/cards/{id}/wallet/status").route(web::get().to(wallet::status)),
        );
}
