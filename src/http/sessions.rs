//! A person's sessions (decisions §9, extension): list them, revoke one, or
//! revoke every other. Sessions are named by their opaque id (`ses_...`),
//! never by their token or its digest.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_schema::audit;
use tern_schema::store::sessions::{self, SESSIONS_LISTED_MAX};
use tern_schema::types::{as_utc, utc_now};
use tern_schema::write_tx;
use utoipa::{IntoParams, ToSchema};

use crate::auth::session::{cleared_cookie, idle_cutoff, SessionUser};
use crate::http::auth::user_event;
use crate::http::extract::Query;
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    #[schema(example = "ses_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub id: String,
    pub created_at: DateTime<Utc>,
    /// Last use, recorded at most once a minute, so up to a minute old.
    pub last_seen_at: DateTime<Utc>,
    /// The absolute end of the session; it ends sooner when left idle.
    pub expires_at: DateTime<Utc>,
    /// Whether this is the session of the request.
    pub current: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    /// The live sessions, newest first (at most 100).
    pub data: Vec<SessionView>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RevokeOthersQuery {
    /// Must be `true`: revokes every session but the current one.
    pub others: Option<bool>,
}

/// List the person's live sessions.
#[utoipa::path(get, path = "/v1/auth/sessions", operation_id = "list_sessions", tag = "auth", security(("session" = [])),
    responses(
        (status = 200, body = SessionList),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    human: SessionUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let now = utc_now();
    let cutoff = idle_cutoff(&state.config, now);
    let mut pooled = state.db.get().await?;
    let rows = sessions::live_for_user(&mut pooled.tx(), &human.user.id, now, cutoff).await?;
    debug_assert!(rows.len() <= SESSIONS_LISTED_MAX as usize);
    let data = rows
        .into_iter()
        .map(|row| SessionView {
            current: row.id == human.session_id,
            id: row.id,
            created_at: as_utc(row.created_at),
            last_seen_at: as_utc(row.last_seen_at),
            expires_at: as_utc(row.expires_at),
        })
        .collect();
    Ok(HttpResponse::Ok().json(SessionList { data }))
}

/// Revoke one of the person's sessions.
///
/// Revoking the current session logs out (the cookie is cleared). Revoking
/// a session that already ended answers 204 too.
#[utoipa::path(delete, path = "/v1/auth/sessions/{id}", operation_id = "revoke_session", tag = "auth", security(("session" = [])),
    params(("id" = String, Path, description = "The session id from the listing")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled, or cross-site request refused", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this person", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn revoke(
    human: SessionUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let session_id = path.into_inner();
    let now = utc_now();
    let revoked: Result<bool, ApiError> = write_tx!(state.db, |tx| {
        let Some(row) = sessions::revoke_for_user(tx, &human.user.id, &session_id, now).await?
        else {
            return Ok(false);
        };
        if row.revoked_at.is_none() {
            let event = user_event(
                &human.user,
                "user.session_revoked",
                &human.request_id,
                json!({"session_id": row.id}),
            );
            audit::append(tx, event).await?;
        }
        Ok(true)
    });
    if !revoked? {
        return Err(ApiError::NotFound("no such session".into()));
    }
    let mut response = HttpResponse::NoContent();
    if session_id == human.session_id {
        response.cookie(cleared_cookie(&state.config));
    }
    Ok(response.finish())
}

/// Revoke every session of the person but the current one.
#[utoipa::path(delete, path = "/v1/auth/sessions", operation_id = "revoke_other_sessions", tag = "auth", security(("session" = [])),
    params(RevokeOthersQuery),
    responses(
        (status = 204, description = "Every other session revoked"),
        (status = 401, description = "No live session", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Account disabled, or cross-site request refused", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`others=true` missing", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn revoke_others(
    human: SessionUser,
    state: web::Data<AppState>,
    Query(query): Query<RevokeOthersQuery>,
) -> Result<HttpResponse, ApiError> {
    // Revoking the current session too is logout's job; asking for it by
    // omission would be too easy a mistake.
    if query.others != Some(true) {
        return Err(ApiError::field(
            "others",
            "must be true: only the other sessions can be revoked here",
        ));
    }
    let now = utc_now();
    let done: Result<(), ApiError> = write_tx!(state.db, |tx| {
        let revoked = sessions::revoke_others(tx, &human.user.id, &human.session_id, now).await?;
        let event = user_event(
            &human.user,
            "user.sessions_revoked",
            &human.request_id,
            json!({"kept_session_id": human.session_id, "sessions_revoked": revoked}),
        );
        audit::append(tx, event).await?;
        Ok(())
    });
    done?;
    Ok(HttpResponse::NoContent().finish())
}
