//! The bench's webhook receiver: HTTPS over HTTP/1.1 keep-alive on its own
//! thread and its own current-thread tokio runtime, so it never competes
//! with the load generator's runtime for a turn. Each request is verified,
//! recorded and answered 204 at once, as a healthy merchant would.

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use sha2::Sha256;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::tls::Files;

/// The bench's phases; each delivery is filed under the one current when it
/// arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Deliveries of the transfers' own status changes.
    Transfers = 0,
    /// Re-deliveries after `POST /v1/webhooks/replay`.
    Replay = 1,
}

const PHASES: usize = 2;
/// The pause after a failed accept.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

/// One delivery as it arrived.
#[derive(Clone, Debug)]
pub struct Record {
    pub phase: Phase,
    pub at: Instant,
    pub at_utc: DateTime<Utc>,
    /// `webhook-id`.
    pub id: String,
    /// `type`, `data.id` and `created_at` of the body; empty or `None` when
    /// the body is not an event.
    pub event_type: String,
    pub transfer_id: String,
    pub created_at: Option<DateTime<Utc>>,
    /// Whether `webhook-signature` holds a valid signature by the secret.
    pub signed: bool,
}

/// The fields of an event body the bench reads; serde skips the rest
/// without building it.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    event_type: String,
    created_at: DateTime<Utc>,
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    id: String,
}

#[derive(Default)]
struct Log {
    records: Vec<Record>,
    /// The webhook-ids seen per phase, for the completion check.
    seen: [HashSet<String>; PHASES],
}

struct Shared {
    key: Vec<u8>,
    phase: AtomicUsize,
    connections: AtomicU64,
    handshake_failures: AtomicU64,
    log: Mutex<Log>,
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        // A panic elsewhere must not stop the receiver from answering.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct Receiver {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listens on `bind` with the folder's certificate and verifies with
    /// `key` (the HMAC key the endpoint's secret stands for).
    pub fn start(bind: &str, files: &Files, key: Vec<u8>) -> anyhow::Result<Receiver> {
        let acceptor = acceptor(files)?;
        let listener = std::net::TcpListener::bind(bind)
            .with_context(|| format!("binding the receiver on {bind}"))?;
        let address = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the receiver's runtime")?;
        let shared = Arc::new(Shared {
            key,
            phase: AtomicUsize::new(Phase::Transfers as usize),
            connections: AtomicU64::new(0),
            handshake_failures: AtomicU64::new(0),
            log: Mutex::new(Log::default()),
        });
        let (shutdown, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let accepting = shared.clone();
        let thread = std::thread::Builder::new()
            .name("bench-receiver".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => match accepted {
                                Ok((tcp, _)) => {
                                    accepting.connections.fetch_add(1, Ordering::Relaxed);
                                    tokio::spawn(serve(tcp, acceptor.clone(), accepting.clone()));
                                }
                                // Out of descriptors, most likely: retrying at
                                // once would spin on the same error.
                                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
                            }
                        }
                    }
                });
                // Dropping the runtime drops the connection tasks with it.
            })
            .context("starting the receiver's thread")?;
        Ok(Receiver {
            address,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Files later deliveries under `phase`.
    pub fn begin(&self, phase: Phase) {
        self.shared.phase.store(phase as usize, Ordering::SeqCst);
    }

    /// Distinct webhook-ids received in `phase` so far.
    pub fn unique(&self, phase: Phase) -> usize {
        self.shared.log().seen[phase as usize].len()
    }

    /// Every delivery of `phase`, in arrival order.
    pub fn records(&self, phase: Phase) -> Vec<Record> {
        let mut records: Vec<Record> = (self.shared.log().records.iter())
            .filter(|record| record.phase == phase)
            .cloned()
            .collect();
        // Times are taken before the log's lock; order by them.
        records.sort_by_key(|record| record.at);
        records
    }

    /// Connections accepted so far (a keep-alive client needs few).
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Connections whose TLS handshake failed: a server that does not trust
    /// the CA shows here.
    pub fn handshake_failures(&self) -> u64 {
        self.shared.handshake_failures.load(Ordering::Relaxed)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            // Err only if the thread panicked; it is gone either way.
            let _ = thread.join();
        }
    }
}

fn acceptor(files: &Files) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .with_context(|| format!("reading {}", files.cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", files.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading {}", files.key.display()))?;
    // An explicit provider: the receiver must not depend on whichever
    // process-wide default is installed.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the receiver's certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn serve(tcp: tokio::net::TcpStream, tls: TlsAcceptor, shared: Arc<Shared>) {
    // Small answers must leave at once, not wait for Nagle's timer.
    let _ = tcp.set_nodelay(true);
    let Ok(stream) = tls.accept(tcp).await else {
        shared.handshake_failures.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let service = hyper::service::service_fn(move |request| answer(shared.clone(), request));
    // HTTP/1.1 with keep-alive (hyper's default), as the deliverer pools.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn answer(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    if let Ok(collected) = body.collect().await {
        record(&shared, &parts.headers, &collected.to_bytes());
    }
    // The client going away mid-body leaves nothing worth recording.
    let mut response = Response::new(Full::default());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

fn record(shared: &Shared, headers: &HeaderMap, body: &[u8]) {
    // The body is in: this is the arrival, before the receiver's own work.
    let (at, at_utc) = (Instant::now(), Utc::now());
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    };
    let id = header("webhook-id");
    let signed = verify(
        &shared.key,
        id,
        header("webhook-timestamp"),
        header("webhook-signature"),
        body,
    );
    let event = serde_json::from_slice::<Event>(body).ok();
    let (event_type, transfer_id, created_at) = match event {
        Some(event) => (event.event_type, event.data.id, Some(event.created_at)),
        None => (String::new(), String::new(), None),
    };
    let mut log = shared.log();
    let phase = match shared.phase.load(Ordering::SeqCst) {
        0 => Phase::Transfers,
        _ => Phase::Replay,
    };
    log.seen[phase as usize].insert(id.to_owned());
    log.records.push(Record {
        phase,
        at,
        at_utc,
        id: id.to_owned(),
        event_type,
        transfer_id,
        created_at,
        signed,
    });
}

/// Standard Webhooks: `signature` holds, space-separated, at least one
/// `v1,<base64>` that is the HMAC-SHA256 of `{id}.{timestamp}.{body}`.
/// Checked here with the bench's own code, not the server's signer, so a
/// signer bug cannot hide.
pub fn verify(key: &[u8], id: &str, timestamp: &str, signature: &str, body: &[u8]) -> bool {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return false;
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    (signature.split(' '))
        .filter_map(|candidate| candidate.strip_prefix("v1,"))
        .filter_map(|encoded| STANDARD.decode(encoded).ok())
        .any(|decoded| mac.clone().verify_slice(&decoded).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_the_standard_webhooks_example() {
        // The specification's example: secret, id, timestamp, body, signature.
        let key = STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .expect("base64");
        let (id, ts, body) = (
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            br#"{"test": 2432232314}"#,
        );
        let good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert!(verify(&key, id, ts, good, body));
        assert!(verify(&key, id, ts, &format!("v1,bm9wZQ== {good}"), body));
        assert!(!verify(&key, id, "1614265331", good, body));
        assert!(!verify(&key, id, ts, good, br#"{"test": 2432232315}"#));
        assert!(!verify(b"another key", id, ts, good, body));
        assert!(!verify(&key, id, ts, "", body));
    }
}
