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
/// and export nothing of their own. `service` names the process in traces.
pub fn init(filter: &str, otlp_traces_url: Option<&str>, service: &str) -> Telemetry {
    // The trace-only spans never reach the logs, whatever TERN_LOG says.
    let log_filter = || {
        EnvFilter::try_new(format!("{filter},{}=off", tern_actors::trace::TARGET))
            .unwrap_or_else(|_| EnvFilter::new("info"))
    };
    let Some(url) = otlp_traces_url else {
        // No trace layer at all: one global filter, as if traces did not
        // exist, so their callsites stay disabled for good.
        let _ = tracing_subscriber::fmt()
            .json()
            .with_env_filter(log_filter())
            .with_current_span(true)
            .with_span_list(false)
            .with_span_events(FmtSpan::NONE)
            .with_target(true)
            .try_init();
        return Telemetry { traces: None };
    };
    let logs = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_span_events(FmtSpan::NONE)
        .with_target(true)
        .with_filter(log_filter());
    let provider = match trace_provider(url, service) {
        Ok(provider) => provider,
        Err(error) => {
            eprintln!("tern: traces are not exported: {error}");
            return init(filter, None, service);
        }
    };
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("tern"))
        .with_filter(
            Targets::new()
                .with_target("tern", LevelFilter::INFO)
                .with_target(tern_actors::trace::TARGET, LevelFilter::DEBUG),
        );
    if tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init()
        .is_err()
    {
        return Telemetry { traces: None };
    }
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    tern_actors::trace::set_exporting();
    Telemetry {
        traces: Some(provider),
    }
}

fn trace_provider(url: &str, service: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()?;
    // The SDK reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (a node's
    // name, say); `service` when neither names the service.
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES")
            .is_ok_and(|attributes| attributes.contains("service.name="));
    if !named {
        resource = resource.with_service_name(service.to_owned());
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        // A committed batch links every write it carried.
        .with_max_links_per_span(tern_schema::commit::BATCH_UNITS_MAX as u32)
        .with_resource(resource.build())
        .build())
}

/// Makes `span` (a request's) continue the caller's trace when the request
/// carries a W3C `traceparent`; its sampled flag is the caller's to set, as
/// the W3C model has it. Nothing is read when traces are not exported.
pub fn continue_trace(span: &tracing::Span, headers: &actix_web::http::header::HeaderMap) {
    if !tern_actors::trace::exporting() || !headers.contains_key(TRACEPARENT) {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    });
    // A malformed traceparent extracts as no parent: the span stays a root.
    let _ = span.set_parent(parent);
}

/// Shows the propagator a request's `traceparent` only: a caller's
/// `tracestate` (up to 32 entries of 512 bytes) would be copied into every
/// span of the trace and sent on to providers and webhook receivers.
struct HeaderExtractor<'h>(&'h actix_web::http::header::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        if key != TRACEPARENT {
            return None;
        }
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}

const TRACEPARENT: &str = "traceparent";
