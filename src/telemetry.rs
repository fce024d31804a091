//! JSON log lines, each line of a request carrying its request_id through
//! the request span; and, when TERN_OTLP_ENDPOINT is set, traces exported
//! over OTLP/HTTP.
//!
//! Two layers with a filter each: the log layer keeps TERN_LOG's filter;
//! the trace layer takes Tern's spans at info and the spans recorded only
//! for traces (target `tern::trace`, debug). Without an endpoint there is
//! no trace layer, so those spans are disabled at their callsites.

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::level_filters::LevelFilter;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The trace exporter of this process; dropping it sends the spans still
/// buffered (at the end of `main`).
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.traces.take() {
            if let Err(error) = provider.shutdown() {
                eprintln!("tern: flushing traces failed: {error}");
            }
        }
    }
}

/// Installs the global subscriber once; later calls (tests) keep the first
/// and export nothing of their own.
pub fn init(filter: &str, otlp_traces_url: Option<&str>) -> Telemetry {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_span_events(FmtSpan::NONE)
        .with_target(true)
        .with_filter(filter);
    let traces = otlp_traces_url.and_then(|url| match trace_provider(url) {
        Ok(provider) => Some(provider),
        Err(error) => {
            eprintln!("tern: traces are not exported: {error}");
            None
        }
    });
    let trace_layer = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("tern"))
            .with_filter(
                Targets::new()
                    .with_target("tern", LevelFilter::INFO)
                    .with_target(tern_actors::trace::TARGET, LevelFilter::DEBUG),
            )
    });
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(trace_layer)
        .try_init()
        .is_ok();
    if installed && traces.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        tern_actors::trace::set_exporting();
    }
    Telemetry {
        traces: traces.filter(|_| installed),
    }
}

fn trace_provider(url: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()?;
    // The SDK reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (a node's
    // name, say); "tern" when neither names the service.
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("tern");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Makes `span` (a request's) continue the caller's trace when the request
/// carries a W3C `traceparent`. Nothing is read when traces are not
/// exported.
pub fn continue_trace(span: &tracing::Span, headers: &actix_web::http::header::HeaderMap) {
    if !tern_actors::trace::exporting() || !headers.contains_key("traceparent") {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    });
    // A malformed traceparent extracts as no parent: the span stays a root.
    let _ = span.set_parent(parent);
}

struct HeaderExtractor<'h>(&'h actix_web::http::header::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}
