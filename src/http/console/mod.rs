//! The operator console at `/console` (decisions §12): server-rendered
//! HTML over what `/health/actors`, `tern status` and the webhook deliveries
//! already know, signed in with TERN_OPERATOR_TOKEN. Its one action, a
//! replay of a transfer's dead-lettered webhook events, goes through the
//! merchant's endpoint actor exactly as `POST /v1/webhooks/replay` does.
//!
//! Not in the OpenAPI document: these are pages for a person, not an API
//! (like `/docs` and `/problems/{slug}`).

pub mod auth;
pub mod error;
pub mod page;
pub mod view;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use actix_web::http::StatusCode;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use maud::Markup;
use serde::Deserialize;
use tern_actors::webhook::{EndpointCommand, EndpointReply};
use tern_schema::audit::AuditActor;
use tern_schema::store::transfers;
use tern_schema::vocabulary::{MerchantId, TransferId};

pub use error::ConsoleError;

use crate::auth::operator::Authenticated;
use crate::http::client_address::client_ip_key;
use crate::http::extract::request_id;
use crate::http::middleware::OwnBody;
use crate::state::AppState;

pub(crate) const STYLESHEET: &str = include_str!("assets/console.css");
/// Longest merchant or transfer id taken from a form; longer ones cannot
/// be Tern's.
const ID_LENGTH_MAX: usize = 64;
/// How long browsers keep the stylesheet: its URL carries the version.
const ASSET_MAX_AGE_S: u32 = 365 * 24 * 3_600;

/// Registers the console's routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/console", web::get().to(console))
        .route("/console/sign-in", web::post().to(sign_in))
        .route("/console/sign-out", web::post().to(sign_out))
        .route("/console/replay", web::post().to(replay))
        .route(page::STYLESHEET_PATH, web::get().to(stylesheet));
}

/// An HTML page the edge sends as it is.
pub(crate) fn html(status: StatusCode, markup: Markup) -> HttpResponse {
    let mut response = HttpResponse::build(status)
        .insert_header((CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((CACHE_CONTROL, "no-store"))
        .insert_header(("content-security-policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(markup.into_string());
    response.extensions_mut().insert(OwnBody);
    response
}

fn see_other(location: &str) -> HttpResponse {
    let mut response = HttpResponse::SeeOther()
        .insert_header((LOCATION, location))
        .insert_header((CACHE_CONTROL, "no-store"))
        .finish();
    response.extensions_mut().insert(OwnBody);
    response
}

/// The operator token, or the console is off.
fn token(state: &AppState) -> Result<&str, ConsoleError> {
    state
        .config
        .operator_token
        .as_deref()
        .ok_or(ConsoleError::Off)
}

/// What the page says after a replay, carried in the redirect's query as
/// parts (never as free text), so a link cannot make the console say
/// something else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    Replayed { count: usize, transfer_id: String },
    NoEndpoint { transfer_id: String },
    NotFound { transfer_id: String },
}

#[derive(Deserialize)]
struct NoticeQuery {
    notice: Option<String>,
    count: Option<usize>,
    transfer: Option<String>,
}

impl Notice {
    pub fn text(&self) -> String {
        match self {
            Notice::Replayed { count, transfer_id } => {
                let events = if *count == 1 { "event" } else { "events" };
                format!("replayed {count} {events} of transfer {transfer_id}")
            }
            Notice::NoEndpoint { transfer_id } => format!(
                "nothing replayed for transfer {transfer_id}: its merchant has no webhook endpoint"
            ),
            Notice::NotFound { transfer_id } => {
                format!("nothing replayed: no transfer {transfer_id} of that merchant")
            }
        }
    }

    fn query(&self) -> String {
        let (notice, count, transfer_id) = match self {
            Notice::Replayed { count, transfer_id } => ("replayed", *count, transfer_id),
            Notice::NoEndpoint { transfer_id } => ("no_endpoint", 0, transfer_id),
            Notice::NotFound { transfer_id } => ("not_found", 0, transfer_id),
        };
        form_urlencoded::Serializer::new(String::new())
            .append_pair("notice", notice)
            .append_pair("count", &count.to_string())
            .append_pair("transfer", transfer_id)
            .finish()
    }

    fn parse(query: &str) -> Option<Notice> {
        let query: NoticeQuery = serde_urlencoded::from_str(query).ok()?;
        let transfer_id = query.transfer.filter(|id| valid_id(id))?;
        match query.notice.as_deref()? {
            "replayed" => Some(Notice::Replayed {
                count: query.count?,
                transfer_id,
            }),
            "no_endpoint" => Some(Notice::NoEndpoint { transfer_id }),
            "not_found" => Some(Notice::NotFound { transfer_id }),
            _ => None,
        }
    }
}

/// Ids as Tern makes them: short, of letters, digits, `_` and `-`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_LENGTH_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// GET /console: the sign-in form, or the console.
async fn console(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ConsoleError> {
    let token = token(&state)?;
    let Some(operator) = auth::operator(&req, token, true) else {
        if req
            .headers()
            .contains_key(actix_web::http::header::AUTHORIZATION)
        {
            // A wrong bearer is a guess like a wrong sign-in.
            count_guess(&req, &state)?;
            return Err(ConsoleError::Unauthorized);
        }
        return Ok(html(StatusCode::OK, page::sign_in(None)));
    };
    req.extensions_mut().insert(Authenticated);
    let view = view::gather(&state).await;
    let notice = Notice::parse(req.query_string());
    Ok(html(
        StatusCode::OK,
        page::console(&view, &operator.csrf(), notice.as_ref()),
    ))
}

/// A guess at the operator token (a sign-in, a bearer): bounded per
/// address like login, in buckets of its own.
fn count_guess(req: &HttpRequest, state: &AppState) -> Result<(), ConsoleError> {
    state
        .limits
        .check("login", &format!("console {}", client_ip_key(req)))?;
    Ok(())
}

#[derive(Default, Deserialize)]
struct SignInForm {
    token: Option<String>,
}

/// POST /console/sign-in: the operator token, compared in constant time;
/// right, a cookie that does not hold it; wrong, the form again (401).
async fn sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let token = token(&state)?;
    auth::check_origin(&req, &state.config)?;
    count_guess(&req, &state)?;
    let form: SignInForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let presented = form.token.unwrap_or_default();
    if !auth::token_matches(presented.trim(), token) {
        tracing::warn!("console: sign-in with a wrong operator token");
        return Ok(html(
            StatusCode::UNAUTHORIZED,
            page::sign_in(Some("That is not the operator token.")),
        ));
    }
    tracing::info!("console: an operator signed in");
    let mut response = see_other("/console");
    response
        .add_cookie(&auth::sign_in_cookie(&state.config, token))
        .map_err(|error| ConsoleError::Internal(error.to_string()))?;
    Ok(response)
}

#[derive(Default, Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

/// POST /console/sign-out: forgets the cookie.
async fn sign_out(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let token = token(&state)?;
    let operator = signed_in(&req, &state, token)?;
    let form: CsrfForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    operator.check_csrf(form.csrf.as_deref())?;
    let mut response = see_other("/console");
    response
        .add_cookie(&auth::cleared_cookie(&state.config))
        .map_err(|error| ConsoleError::Internal(error.to_string()))?;
    Ok(response)
}

/// A state-changing request's operator: a console cookie (no bearer, no
/// forms without one) from this site.
fn signed_in(
    req: &HttpRequest,
    state: &AppState,
    token: &str,
) -> Result<auth::Operator, ConsoleError> {
    let operator = auth::operator(req, token, false)
        .ok_or(ConsoleError::Forbidden("sign in to the console first"))?;
    auth::check_origin(req, &state.config)?;
    req.extensions_mut().insert(Authenticated);
    Ok(operator)
}

#[derive(Default, Deserialize)]
struct ReplayForm {
    csrf: Option<String>,
    merchant_id: Option<String>,
    transfer_id: Option<String>,
}

/// POST /console/replay: re-arms a transfer's delivered and dead-lettered
/// events through the merchant's endpoint actor (the path of `POST
/// /v1/webhooks/replay`), then back to the console with what happened.
#[tracing::instrument(skip_all, fields(merchant_id = tracing::field::Empty, transfer_id = tracing::field::Empty))]
async fn replay(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let token = token(&state)?;
    let operator = signed_in(&req, &state, token)?;
    let form: ReplayForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    operator.check_csrf(form.csrf.as_deref())?;
    let (Some(merchant_id), Some(transfer_id)) = (form.merchant_id, form.transfer_id) else {
        return Err(ConsoleError::BadRequest(
            "the form names no merchant or transfer",
        ));
    };
    if !valid_id(&merchant_id) || !valid_id(&transfer_id) {
        return Err(ConsoleError::BadRequest("the form's ids are not Tern's"));
    }
    let merchant_id = MerchantId::new(merchant_id);
    tracing::Span::current().record("merchant_id", merchant_id.as_str());
    tracing::Span::current().record("transfer_id", transfer_id.as_str());
    let owned = match TransferId::from_text(&transfer_id) {
        Some(id) => {
            let mut pooled = state.db.get().await?;
            let found = transfers::find(&mut pooled.tx(), &id).await?;
            found.filter(|row| row.merchant_id == merchant_id)
        }
        None => None,
    };
    let Some(owned) = owned else {
        return Ok(see_other(&format!(
            "/console?{}",
            Notice::NotFound { transfer_id }.query()
        )));
    };
    let command = EndpointCommand::Replay {
        transfer_id: owned.id,
        actor: AuditActor::Console,
        request_id: request_id(&req),
    };
    let notice = match state.webhooks.call(merchant_id.as_str(), command).await? {
        EndpointReply::Requeued(count) => Notice::Replayed { count, transfer_id },
        EndpointReply::NoEndpoint => Notice::NoEndpoint { transfer_id },
        other => {
            return Err(ConsoleError::Internal(format!(
                "unexpected replay reply {other:?}"
            )))
        }
    };
    tracing::info!(notice = %notice.text(), "console: replay");
    Ok(see_other(&format!("/console?{}", notice.query())))
}

/// The stylesheet, embedded in the binary; cached for long, since its URL
/// changes with each version.
async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "text/css; charset=utf-8"))
        .insert_header((
            CACHE_CONTROL,
            format!("public, max-age={ASSET_MAX_AGE_S}, immutable"),
        ))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(STYLESHEET)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_travels_as_parts_and_nothing_else_reads_as_one() {
        for notice in [
            Notice::Replayed {
                count: 5,
                transfer_id: "tr_0192".into(),
            },
            Notice::NoEndpoint {
                transfer_id: "tr_1".into(),
            },
            Notice::NotFound {
                transfer_id: "tr_2".into(),
            },
        ] {
            assert_eq!(Notice::parse(&notice.query()), Some(notice));
        }
        assert_eq!(
            Notice::Replayed {
                count: 1,
                transfer_id: "tr_x".into()
            }
            .text(),
            "replayed 1 event of transfer tr_x"
        );
        for query in [
            "",
            "notice=replayed&transfer=tr_1",
            "notice=other&transfer=tr_1",
            "notice=no_endpoint&transfer=%3Cscript%3E",
            "flash=anything",
        ] {
            assert_eq!(Notice::parse(query), None, "{query}");
        }
    }
}
