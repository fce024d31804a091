//! The logged-in person: GET and PATCH /v1/auth/me (alias /v1/profile).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_schema::audit;
use tern_schema::models::UserRow;
use tern_schema::store::users;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{MerchantId, UserId};
use tern_schema::write_tx;
use utoipa::ToSchema;

use crate::auth::session::SessionUser;
use crate::auth::Scopes;
use crate::http::auth::user_event;
use crate::http::extract::JsonBody;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

#[derive(Debug, Serialize, ToSchema)]
pub struct MeResponse {
    #[schema(value_type = String, format = Uuid)]
    pub user_id: UserId,
    #[schema(value_type = String, format = Uuid)]
    pub merchant_id: MerchantId,
    /// The editable display name.
    pub name: String,
    /// Alias of `name`.
    pub preferred_name: String,
    /// Best-effort split of `name`: its first word.
    pub first_name: String,
    /// Best-effort split of `name`: the rest.
    pub last_name: String,
    pub email: String,
    pub email_verified: bool,
    /// Every scope on the user's own merchant.
    pub scopes: Vec<String>,
}

/// Every field is optional. `name` and `preferred_name` are one value;
/// `first_name` and `last_name` replace their part of it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MeUpdateRequest {
    #[schema(min_length = 1)]
    pub name: Option<String>,
    #[schema(min_length = 1)]
    pub preferred_name: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
}

/// The logged-in user.
#[utoipa::path(get, path = "/v1/auth/me", tag = "auth", security(("session" = [])),
    responses(
        (status = 200, body = MeResponse),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn me(human: SessionUser) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(view(&human.user)))
}

/// Change the display name.
#[utoipa::path(patch, path = "/v1/auth/me", tag = "auth", security(("session" = [])), request_body = MeUpdateRequest,
    responses(
        (status = 200, description = "The refreshed profile", body = MeResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled, or cross-site request refused", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Empty name", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn update_me(
    human: SessionUser,
    state: web::Data<AppState>,
    body: Result<JsonBody<MeUpdateRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(body) = body?;
    let name = updated_name(&human.user.name, &body)?;
    let mut user = human.user;
    if name != user.name {
        let now = utc_now();
        let event = user_event(
            &user,
            "user.profile_updated",
            &human.request_id,
            json!({"name": {"from": user.name, "to": name}}),
        );
        let stored: Result<(), ApiError> = write_tx!(state.db, |tx| {
            users::set_name(tx, &user.id, &name, now).await?;
            audit::append(tx, event).await?;
            Ok(())
        });
        stored?;
        user.name = name;
        user.updated_at = now;
    }
    Ok(HttpResponse::Ok().json(view(&user)))
}

/// The logged-in user (alias of GET /v1/auth/me).
#[utoipa::path(get, path = "/v1/profile", tag = "auth", operation_id = "get_profile", security(("session" = [])),
    responses(
        (status = 200, body = MeResponse),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn profile(human: SessionUser) -> Result<HttpResponse, ApiError> {
    me(human).await
}

/// Change the display name (alias of PATCH /v1/auth/me).
#[utoipa::path(patch, path = "/v1/profile", tag = "auth", operation_id = "update_profile", security(("session" = [])), request_body = MeUpdateRequest,
    responses(
        (status = 200, description = "The refreshed profile", body = MeResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled, or cross-site request refused", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Empty name", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn update_profile(
    human: SessionUser,
    state: web::Data<AppState>,
    body: Result<JsonBody<MeUpdateRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    update_me(human, state, body).await
}

/// The name after the update, or 422 naming the offending field.
fn updated_name(current: &str, body: &MeUpdateRequest) -> Result<String, ApiError> {
    let mut errors = FieldErrors::new();
    let mut check = |field: &str, value: &str| {
        validate::name(value)
            .map_err(|message| errors.insert(field.into(), message.into()))
            .ok()
    };
    let name = body.name.as_deref().and_then(|v| check("name", v));
    let preferred = body
        .preferred_name
        .as_deref()
        .and_then(|v| check("preferred_name", v));
    let (first, last) = split_name(current);
    let first = body
        .first_name
        .as_deref()
        .map(|v| check("first_name", v))
        .unwrap_or(Some(first.to_owned()));
    // An empty last name is allowed: it leaves only the first name.
    let last = match body.last_name.as_deref().map(str::trim) {
        Some("") => Some(String::new()),
        Some(v) => check("last_name", v),
        None => Some(last.to_owned()),
    };
    if let (Some(name), Some(preferred)) = (&name, &preferred) {
        if name != preferred {
            errors.insert(
                "preferred_name".into(),
                "is an alias of name; give one, or both equal".into(),
            );
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    if let Some(name) = name.or(preferred) {
        return Ok(name);
    }
    let joined = match (first.unwrap_or_default(), last.unwrap_or_default()) {
        (first, last) if last.is_empty() => first,
        (first, last) => format!("{first} {last}"),
    };
    validate::name(&joined).map_err(|message| ApiError::field("name", message))
}

/// First word, and the rest.
pub fn split_name(name: &str) -> (&str, &str) {
    let name = name.trim();
    match name.split_once(char::is_whitespace) {
        Some((first, rest)) => (first, rest.trim()),
        None => (name, ""),
    }
}

pub fn view(user: &UserRow) -> MeResponse {
    let (first, last) = split_name(&user.name);
    MeResponse {
        user_id: user.id.clone(),
        merchant_id: user.merchant_id.clone(),
        name: user.name.clone(),
        preferred_name: user.name.clone(),
        first_name: first.to_owned(),
        last_name: last.to_owned(),
        email: user.email.clone(),
        email_verified: user.email_verified_at.is_some(),
        scopes: Scopes::all().names(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(
        name: Option<&str>,
        preferred: Option<&str>,
        first: Option<&str>,
        last: Option<&str>,
    ) -> MeUpdateRequest {
        MeUpdateRequest {
            name: name.map(Into::into),
            preferred_name: preferred.map(Into::into),
            first_name: first.map(Into::into),
            last_name: last.map(Into::into),
        }
    }

    #[test]
    fn names_split_on_the_first_space() {
        assert_eq!(split_name("Ada Lovelace"), ("Ada", "Lovelace"));
        assert_eq!(split_name("Ada King Lovelace"), ("Ada", "King Lovelace"));
        assert_eq!(split_name("Cher"), ("Cher", ""));
        assert_eq!(split_name("  Ada   Lovelace "), ("Ada", "Lovelace"));
    }

    #[test]
    fn updates_resolve_to_one_name() {
        let table: &[(MeUpdateRequest, Result<&str, &str>)] = &[
            (
                update(Some("Grace Hopper"), None, None, None),
                Ok("Grace Hopper"),
            ),
            (update(None, Some("Grace"), None, None), Ok("Grace")),
            (
                update(Some("Grace"), Some("Grace"), None, None),
                Ok("Grace"),
            ),
            (
                update(None, None, Some("Augusta"), None),
                Ok("Augusta Lovelace"),
            ),
            (update(None, None, None, Some("Byron")), Ok("Ada Byron")),
            (
                update(None, None, Some("Augusta"), Some("King")),
                Ok("Augusta King"),
            ),
            (update(None, None, None, Some("")), Ok("Ada")),
            (update(None, None, None, None), Ok("Ada Lovelace")),
            (update(Some(" "), None, None, None), Err("name")),
            (update(None, Some(""), None, None), Err("preferred_name")),
            (
                update(Some("A"), Some("B"), None, None),
                Err("preferred_name"),
            ),
            (update(None, None, Some(""), None), Err("first_name")),
        ];
        for (body, expected) in table {
            let got = updated_name("Ada Lovelace", body);
            match (got, expected) {
                (Ok(name), Ok(want)) => assert_eq!(&name, want, "{body:?}"),
                (Err(ApiError::Validation(errors)), Err(field)) => {
                    assert!(errors.contains_key(*field), "{body:?}: {errors:?}")
                }
                (got, want) => panic!("{body:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
