//! Traces across process boundaries: the W3C trace context (`traceparent`,
//! `tracestate`) of the current span, sent on provider calls, webhook
//! deliveries and forwarded requests.
//!
//! Spans that exist only for traces use the target [`TARGET`] at debug
//! level: the log filter leaves them out, and with no trace exporter no
//! layer wants them, so each costs one disabled-callsite check.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::Injector;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::RequestBuilder;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use tern_schema::TRACE_TARGET as TARGET;

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Called once by the process that installed a trace exporter and the
/// W3C propagator.
pub fn set_exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether traces leave this process; without an exporter no trace
/// context is read or written.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// `span` (made with `parent: None`) as a child of `cause` in the trace,
/// without keeping `cause` open: a span's tracing parent stays open until
/// its children close, so work that outlives its cause (a follow-up, a
/// message to another actor) would stretch the cause's duration to its own.
pub fn continuing(span: tracing::Span, cause: &tracing::Span) -> tracing::Span {
    if exporting() && !span.is_disabled() {
        // Fails only when no trace layer records the span: nothing to link.
        let _ = span.set_parent(cause.context());
    }
    span
}

/// The current span, to continue later with [`continuing`]; none when no
/// trace is exported.
pub fn current() -> tracing::Span {
    if exporting() {
        tracing::Span::current()
    } else {
        tracing::Span::none()
    }
}

/// `span`'s trace context as headers, for a request sent on its behalf.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    if !exporting() {
        return;
    }
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// `request` carrying `span`'s trace context.
pub fn with_context(request: RequestBuilder, span: &tracing::Span) -> RequestBuilder {
    if !exporting() {
        return request;
    }
    let mut headers = HeaderMap::new();
    inject(span, &mut headers);
    request.headers(headers)
}

struct HeaderInjector<'h>(&'h mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}
