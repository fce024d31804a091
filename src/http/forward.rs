//! Several nodes, one answer: a request that reaches a node not owning its
//! entity is forwarded to the owner over the signed node-to-node channel
//! (`crate::cluster`) and answered with the owner's status, headers and
//! body, under the same X-Request-ID.
//!
//! A handler finds out before it changes anything: its entity's registry
//! answers `Elsewhere` (see `tern_actors::runtime::Registry::placement`),
//! which becomes a 503 carrying [`ForwardTo`]. [`relay`] buffers the body of
//! every request that may write (bounded like every body), and replaces
//! that 503 with the owner's answer. A forwarded request is never forwarded
//! again: an owner that lost the entity meanwhile answers its 503, and the
//! client retries.

use std::net::IpAddr;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use futures_util::StreamExt;

use crate::cluster::{
    signed_header_values, ForwardRefused, Forwarded, Link, Wake, CLIENT_HEADER, FORWARDED_HEADER,
    WAKE_HEADER,
};
use crate::http::client_address::client_ip;
use crate::http::extract::BODY_BYTES_MAX;
use crate::http::middleware::{RequestId, REQUEST_ID_HEADER};
use crate::http::problem::ApiError;
use crate::state::AppState;

/// On a handler's 503: the advertised URL of the node that owns the
/// request's entity.
#[derive(Clone, Debug)]
pub struct ForwardTo(pub String);

/// On a response relayed from the owner: the edge sends it as it came.
#[derive(Clone, Copy, Debug)]
pub struct Relayed;

/// On a request another node forwarded, once its signature verified: the
/// client's address as that node saw it.
#[derive(Clone, Copy, Debug)]
pub struct ForwardedBy {
    pub client: Option<IpAddr>,
}

/// Headers that describe one connection, not the message: never relayed.
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "upgrade"
            | "trailer"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "content-length"
            | "host"
            | "expect"
    ) || name == FORWARDED_HEADER
        || name == CLIENT_HEADER
}

pub async fn relay(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let link = req
        .app_data::<web::Data<AppState>>()
        .and_then(|state| state.cluster.clone());
    let inbound = req
        .headers()
        .get(FORWARDED_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let Some(link) = link.filter(|_| writes || inbound.is_some()) else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    let Some(body) = buffer(&mut req).await else {
        // Over the bound: the handler answers 413 and nothing is forwarded.
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone())
        .unwrap_or_default();
    let method = req.method().as_str().to_owned();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if let Some(header) = inbound {
        let client = req
            .headers()
            .get(CLIENT_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<IpAddr>().ok());
        let own_url = req
            .app_data::<web::Data<AppState>>()
            .and_then(|state| state.config.cluster.advertise_url.clone())
            .unwrap_or_default();
        let signed = Forwarded {
            to: &own_url,
            method: &method,
            path_and_query: &path_and_query,
            request_id: &request_id,
            client,
            headers: signed_header_values(req.headers()),
            body: &body,
        };
        match link.verify_forwarded(&header, &signed) {
            Ok(()) => {}
            Err(ForwardRefused::Invalid) => {
                return Ok(req.error_response(ApiError::Unauthorized(
                    "the forwarding signature is not valid",
                )));
            }
            Err(ForwardRefused::Busy) => {
                tracing::warn!("a forwarded request refused for now: signed before this process started, or too many to remember");
                return Ok(req.error_response(ApiError::Overloaded {
                    detail: "this node takes no more forwarded requests for a moment".into(),
                    retry_after_s: 1,
                }));
            }
        }
        req.extensions_mut().insert(ForwardedBy { client });
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    }
    let client = client_ip(req.request());
    let headers = req.headers().clone();
    let own_url = req
        .app_data::<web::Data<AppState>>()
        .and_then(|state| state.config.cluster.advertise_url.clone());
    let response = next.call(req).await?.map_into_boxed_body();
    let Some(ForwardTo(owner)) = response.response().extensions().get::<ForwardTo>().cloned()
    else {
        return Ok(response);
    };
    // A stale view naming this node itself: the 503 stands, retried later.
    if own_url.as_deref() == Some(owner.as_str()) {
        return Ok(response);
    }
    let request = Forwarded {
        to: &owner,
        method: &method,
        path_and_query: &path_and_query,
        request_id: &request_id,
        client,
        headers: signed_header_values(&headers),
        body: &body,
    };
    match forward(&link, &owner, &request, &headers).await {
        Ok(relayed) => {
            let (request, _) = response.into_parts();
            Ok(ServiceResponse::new(request, relayed))
        }
        // Never reached the owner: nothing happened there, retry.
        Err(Unsent(error)) => {
            tracing::warn!(%owner, %error, "could not reach the owning node");
            Ok(response)
        }
        // Sent, and no answer: the owner may have acted. A 503 would invite
        // a retry of something not idempotent; the client must look first.
        Err(Unanswered(error)) => {
            tracing::warn!(%owner, %error, "the owning node did not answer a forwarded request");
            let (request, _) = response.into_parts();
            let error = ApiError::BadGateway(
                "another node serves this resource and did not answer: the outcome is unknown"
                    .into(),
            );
            Ok(ServiceResponse::from_err(error, request).map_into_boxed_body())
        }
    }
}

/// A body put back for the handler as a stream.
type BodyStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<web::Bytes, actix_web::error::PayloadError>>>,
>;

/// The request's body, read whole and put back for the handler; `None`
/// (with the body left as it was) when it declares more than the bound.
async fn buffer(req: &mut ServiceRequest) -> Option<web::Bytes> {
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > BODY_BYTES_MAX) {
        return None;
    }
    let mut payload = req.take_payload();
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => {
                // A broken body: the handler reads what came, then the
                // same error, and nothing is forwarded.
                let read = body.freeze();
                let rest = futures_util::stream::iter([Ok(read), Err(error)]);
                let rest: BodyStream = Box::pin(rest);
                req.set_payload(Payload::from(rest));
                return None;
            }
        };
        body.extend_from_slice(&chunk);
        if body.len() > BODY_BYTES_MAX {
            // Undeclared and too long: the handler sees what was read and
            // the rest, and answers 413.
            let read = body.freeze();
            let rest = futures_util::stream::once(async move { Ok(read) }).chain(payload);
            let rest: BodyStream = Box::pin(rest);
            req.set_payload(Payload::from(rest));
            return None;
        }
    }
    let body = body.freeze();
    req.set_payload(Payload::from(body.clone()));
    Some(body)
}

/// Why a forward failed: before the owner could act, or after.
enum Failed {
    Unsent(String),
    Unanswered(String),
}
use Failed::{Unanswered, Unsent};

async fn forward(
    link: &Link,
    owner: &str,
    request: &Forwarded<'_>,
    headers: &actix_web::http::header::HeaderMap,
) -> Result<HttpResponse, Failed> {
    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|e| Unsent(e.to_string()))?;
    let mut outbound = link
        .client
        .request(method, format!("{owner}{}", request.path_and_query))
        .header(FORWARDED_HEADER, link.sign_forwarded(request))
        .header(REQUEST_ID_HEADER.as_str(), request.request_id)
        .body(request.body.to_vec());
    if let Some(client) = request.client {
        outbound = outbound.header(CLIENT_HEADER, client.to_string());
    }
    // Exporting traces, the owner continues this node's span, not the
    // client's.
    let own_trace = tern_actors::trace::exporting();
    for (name, value) in headers {
        let name = name.as_str();
        if hop_by_hop(name)
            || name == REQUEST_ID_HEADER.as_str()
            || (own_trace && matches!(name, "traceparent" | "tracestate"))
        {
            continue;
        }
        outbound = outbound.header(name, value.as_bytes());
    }
    let outbound = tern_actors::trace::with_context(outbound, &tracing::Span::current());
    let answered = outbound.send().await.map_err(|e| {
        if e.is_connect() || e.is_builder() {
            Unsent(e.to_string())
        } else {
            Unanswered(e.to_string())
        }
    })?;
    let status =
        StatusCode::from_u16(answered.status().as_u16()).map_err(|e| Unanswered(e.to_string()))?;
    let mut relayed = HttpResponse::build(status);
    for (name, value) in answered.headers() {
        if hop_by_hop(name.as_str()) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            relayed.append_header((name, value));
        }
    }
    let body = answered
        .bytes()
        .await
        .map_err(|e| Unanswered(e.to_string()))?;
    let mut relayed = relayed.body(body);
    relayed.extensions_mut().insert(Relayed);
    Ok(relayed)
}

/// `POST /internal/cluster/wake`: another node asks this one to look at an
/// entity it owns again (events wait for a merchant's endpoint). Signed
/// with the cluster secret; 404 on a node without one.
pub async fn wake(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let Some(link) = &state.cluster else {
        return Err(ApiError::NotFound("no such route".into()));
    };
    let signed = req
        .headers()
        .get(WAKE_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|header| link.verify_wake(header, &body));
    if !signed {
        return Err(ApiError::Unauthorized("the cluster signature is not valid"));
    }
    let wake: Wake = serde_json::from_slice(&body)
        .map_err(|error| ApiError::MalformedJson(error.to_string()))?;
    state.runtime.wake(&wake.kind, &wake.id)?;
    Ok(HttpResponse::Accepted().finish())
}
