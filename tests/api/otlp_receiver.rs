//! `OtlpReceiver`: an OTLP/HTTP endpoint (`POST /v1/traces`, protobuf) that
//! keeps every span exported to it, decoded with the OpenTelemetry project's
//! own message definitions, for the trace tests.
//!
//! It runs on its own thread with its own tokio runtime, so exporters are
//! answered whatever the test's runtime is doing.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

/// One exported span; ids in lower-case hex, as in `traceparent`.
#[derive(Clone, Debug)]
pub struct ExportedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a trace's root.
    pub parent_span_id: String,
    /// (trace id, span id) of each linked span.
    pub links: Vec<(String, String)>,
    pub attributes: Vec<(String, String)>,
}

impl ExportedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

pub struct OtlpReceiver {
    port: u16,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    running: Option<(tokio::sync::oneshot::Sender<()>, JoinHandle<()>)>,
}

impl OtlpReceiver {
    pub fn start() -> OtlpReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let (shutdown, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let stream = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                    };
                    let kept = kept.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            answer(request, kept.clone())
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        OtlpReceiver {
            port,
            spans,
            running: Some((shutdown, thread)),
        }
    }

    /// The endpoint as TERN_OTLP_ENDPOINT takes it (Tern adds `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn spans(&self) -> Vec<ExportedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The spans once `done` holds of them, or as they are after `max`
    /// (the caller's assertions then say what is missing).
    pub async fn wait_until(
        &self,
        max: Duration,
        done: impl Fn(&[ExportedSpan]) -> bool,
    ) -> Vec<ExportedSpan> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if done(&spans) || started.elapsed() >= max {
                return spans;
            }
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        if let Some((shutdown, thread)) = self.running.take() {
            let _ = shutdown.send(());
            let _ = thread.join();
        }
    }
}

async fn answer(
    request: Request<Incoming>,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: u16| {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        response.headers_mut().insert(
            "content-type",
            "application/x-protobuf".parse().expect("value"),
        );
        Ok(response)
    };
    if request.uri().path() != "/v1/traces" {
        return reply(404);
    }
    let Ok(body) = request.into_body().collect().await else {
        return reply(400);
    };
    let Ok(export) = ExportTraceServiceRequest::decode(body.to_bytes()) else {
        return reply(400);
    };
    let decoded = export
        .resource_spans
        .into_iter()
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans)
        .map(|span| ExportedSpan {
            name: span.name,
            trace_id: hex::encode(span.trace_id),
            span_id: hex::encode(span.span_id),
            parent_span_id: hex::encode(span.parent_span_id),
            links: span
                .links
                .into_iter()
                .map(|link| (hex::encode(link.trace_id), hex::encode(link.span_id)))
                .collect(),
            attributes: span
                .attributes
                .into_iter()
                .map(|kv| {
                    let value = match kv.value.and_then(|v| v.value) {
                        Some(AnyValue::StringValue(s)) => s,
                        Some(AnyValue::IntValue(i)) => i.to_string(),
                        Some(AnyValue::BoolValue(b)) => b.to_string(),
                        Some(AnyValue::DoubleValue(d)) => d.to_string(),
                        other => format!("{other:?}"),
                    };
                    (kv.key, value)
                })
                .collect(),
        });
    spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(decoded);
    reply(200)
}
