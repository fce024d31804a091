//! The request middleware: request ids, one tracing span per request,
//! panics turned into a 500 problem, and every error response finished as a
//! problem document (see `problem.rs`).

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, ALLOW, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, ResponseError};
use futures_util::FutureExt;
use tracing::Instrument;

use crate::auth::operator::Authenticated;
use crate::config::Environment;
use crate::http::problem::{ApiError, Problem, PROBLEM_CONTENT_TYPE};
use crate::state::AppState;

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// Time spent in Tern for this request, in milliseconds (`app;dur=0.412`).
pub const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");
/// Longest client-sent X-Request-ID that is echoed; longer ones are replaced.
pub const REQUEST_ID_LENGTH_MAX: usize = 128;

/// On a response whose body is final as its handler wrote it (the operator
/// console's HTML pages, errors included): the edge sends it as it is
/// instead of a problem document.
#[derive(Clone, Copy, Debug)]
pub struct OwnBody;

/// The request's correlation id, in the request extensions.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// A client's X-Request-ID when it is sane (1 to 128 visible ASCII
/// characters), so that it cannot forge log lines or bloat records.
pub fn sane_request_id(value: Option<&HeaderValue>) -> Option<String> {
    let text = value?.to_str().ok()?;
    let visible = text.bytes().all(|b| b.is_ascii_graphic());
    (visible && !text.is_empty() && text.len() <= REQUEST_ID_LENGTH_MAX).then(|| text.to_owned())
}

/// The problem for a request whose path or query names a NUL character
/// (`%00`): no resource has such a name, and no query value holds one.
fn nul_problem(path: &str, query: &str) -> Option<Problem> {
    let names_nul = |text: &str| text.contains("%00");
    if names_nul(path) {
        return Some(ApiError::NotFound("no such resource".into()).problem());
    }
    names_nul(query)
        .then(|| ApiError::field("query", "must not contain the NUL character (%00)").problem())
}

pub async fn edge(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let request_id = sane_request_id(req.headers().get(REQUEST_ID_HEADER))
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let path = req.path().to_owned();
    let client = crate::http::client_address::client_ip(req.request())
        .map(|ip| ip.to_string())
        .unwrap_or_default();
    // PostgreSQL cannot store a NUL in text and no id or field of Tern's
    // holds one: refuse it here, before any handler carries it to a query.
    if let Some(problem) = nul_problem(req.path(), req.query_string()) {
        let public_url = state
            .as_ref()
            .map(|state| state.config.public_url.clone())
            .unwrap_or_default();
        return Err(RenderedProblem::new(problem, &public_url, &path, &request_id).into());
    }
    let span = tracing::info_span!("request", request_id = %request_id, method = %req.method(), path = %path, client = %client);
    crate::telemetry::continue_trace(&span, req.headers());
    let started = Instant::now();

    // The handler runs to its end on a task of its own, even when the
    // client goes away: dropping it midway would drop a database future
    // whose blocking half still holds its connection (SQLite answers the
    // next user of that connection with a panic) and cut a unit of work in
    // two. A panic inside is caught there and answered as a 500.
    let handler = async move { next.call(req).await };
    let outcome = actix_web::rt::spawn(
        AssertUnwindSafe(handler)
            .catch_unwind()
            .instrument(span.clone()),
    )
    .await
    .unwrap_or_else(|_| Err(Box::new("the handler's task was cancelled")));
    // The request was moved into the call (routing needs it unshared), so a
    // failure past this point answers a problem rendered without it.
    let public_url = state
        .as_ref()
        .map(|state| state.config.public_url.clone())
        .unwrap_or_default();
    let mut response = match outcome {
        Ok(Ok(response)) => response.map_into_boxed_body(),
        Ok(Err(error)) => {
            let problem = Problem::for_status(error.as_response_error().status_code());
            return Err(RenderedProblem::new(problem, &public_url, &path, &request_id).into());
        }
        Err(_) => {
            span.in_scope(|| tracing::error!(status = 500, "handler panicked"));
            let problem = ApiError::Internal("handler panicked".into()).problem();
            return Err(RenderedProblem::new(problem, &public_url, &path, &request_id).into());
        }
    };

    // Errors, and the rare success answered with a problem document (a 202
    // reversal-pending), are rendered here with the request's details.
    let carries_problem = response.response().extensions().get::<Problem>().is_some();
    // The owning node rendered a relayed answer already, with this id; a
    // console page is its own answer.
    let relayed = {
        let extensions = response.response().extensions();
        extensions.contains::<crate::http::forward::Relayed>() || extensions.contains::<OwnBody>()
    };
    if (response.status().as_u16() >= 400 || carries_problem) && !relayed {
        response = finish_problem(
            response,
            state.as_ref().map(|data| data.get_ref()),
            &path,
            &request_id,
        );
    }
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let status = response.status().as_u16();
    let latency_us = started.elapsed().as_micros() as u64;
    // Server-Timing lets a client (and `tern bench`) tell time spent in
    // Tern from time spent on the network and in its own queue. In
    // production a stranger gets none: time taken is an oracle (which
    // emails exist, which branch a check took).
    let production = state
        .as_ref()
        .is_some_and(|data| data.config.environment == Environment::Production);
    let authenticated = response.request().extensions().contains::<Authenticated>();
    let timing = format!("app;dur={:.3}", latency_us as f64 / 1_000.0);
    if let (Ok(value), true) = (HeaderValue::from_str(&timing), authenticated || !production) {
        response.headers_mut().insert(SERVER_TIMING, value);
    }
    span.in_scope(|| tracing::info!(status, latency_us, "request completed"));
    Ok(response)
}

/// A finished problem document, answered as an error when no request is at
/// hand to build a response with.
#[derive(Debug)]
struct RenderedProblem {
    status: StatusCode,
    body: Vec<u8>,
    request_id: String,
}

impl RenderedProblem {
    fn new(problem: Problem, public_url: &str, path: &str, request_id: &str) -> RenderedProblem {
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        RenderedProblem {
            status,
            body: problem.render(public_url, path, request_id),
            request_id: request_id.to_owned(),
        }
    }
}

impl std::fmt::Display for RenderedProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "problem {}", self.status)
    }
}

impl ResponseError for RenderedProblem {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> actix_web::HttpResponse {
        actix_web::HttpResponse::build(self.status)
            .insert_header((CONTENT_TYPE, PROBLEM_CONTENT_TYPE))
            .insert_header((REQUEST_ID_HEADER, self.request_id.clone()))
            .body(self.body.clone())
    }
}

/// Gives an error response its problem body: the one an [`ApiError`] left in
/// the extensions, or a generic one for errors actix-web produced itself.
fn finish_problem(
    response: ServiceResponse<BoxBody>,
    state: Option<&AppState>,
    path: &str,
    request_id: &str,
) -> ServiceResponse<BoxBody> {
    let status = response.status();
    let stored = response.response().extensions().get::<Problem>().cloned();
    let already_problem = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(PROBLEM_CONTENT_TYPE));
    if stored.is_none() && already_problem {
        return response;
    }
    let problem = stored.unwrap_or_else(|| Problem::for_status(status));
    let public_url = state
        .map(|state| state.config.public_url.as_str())
        .unwrap_or("");
    let body = problem.render(public_url, path, request_id);

    let needs_allow =
        status == StatusCode::METHOD_NOT_ALLOWED && !response.headers().contains_key(ALLOW);
    let allow = needs_allow
        .then(|| state.and_then(|state| state.docs.allowed_methods(path)))
        .flatten();
    let (request, http_response) = response.into_parts();
    let mut http_response = http_response.set_body(BoxBody::new(body));
    http_response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_CONTENT_TYPE));
    if let Some(methods) = allow {
        if let Ok(value) = HeaderValue::from_str(&methods.join(", ")) {
            http_response.headers_mut().insert(ALLOW, value);
        }
    }
    ServiceResponse::new(request, http_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sane_request_ids_are_echoed() {
        let id = |text: &str| sane_request_id(HeaderValue::from_str(text).ok().as_ref());
        assert_eq!(id("abc-123"), Some("abc-123".into()));
        assert_eq!(id(&"a".repeat(128)).map(|s| s.len()), Some(128));
        assert_eq!(id(&"a".repeat(129)), None);
        assert_eq!(id("has space"), None);
        assert_eq!(id(""), None);
        assert_eq!(sane_request_id(None), None);
    }
}
