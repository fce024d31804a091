//! `Receiver`: an HTTPS endpoint that records outbound webhooks, for tests.
//!
//! It runs on its own thread with its own tokio runtime, so it answers even
//! while the test's current-thread runtime is busy, and a `stop` tears down
//! the listener and every open connection at once (a receiver "going down").
//! TLS uses a throwaway CA made here, so the code under test must trust
//! `ca_pem()`/`ca_file()` explicitly, as it would a private CA in production.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use reqwest::redirect::Policy;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use serde_json::json;
use tokio_rustls::TlsAcceptor;

/// One request as it arrived, with the status the receiver chose for it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    /// Path and query, e.g. `/hooks?x=1`.
    pub path: String,
    /// In arrival order; names are lower-case (HTTP/1 names are case-blind).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Chosen on arrival: with a `delay` the request is recorded before the
    /// answer goes out, so a test can act while a delivery is in flight.
    pub status: u16,
    pub at: Instant,
    pub at_utc: DateTime<Utc>,
}

impl Received {
    /// The first value of a header, by any-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let (_, value) = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        Some(value)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// What arrived, and what the next requests are answered with.
#[derive(Default)]
struct State {
    requests: Vec<Received>,
    status: u16,
    /// Statuses for the next requests, taken first to last.
    fail_next: VecDeque<u16>,
    delay: Duration,
    redirect: Option<String>,
}

type Shared = Mutex<State>;

pub struct Receiver {
    port: u16,
    shared: Arc<Shared>,
    acceptor: TlsAcceptor,
    ca_pem: String,
    ca_file: tempfile::NamedTempFile,
    /// The running generation: its shutdown signal and its thread.
    running: Mutex<Option<(tokio::sync::oneshot::Sender<()>, JoinHandle<()>)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not cascade into every later accessor.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Receiver {
    /// Starts on 127.0.0.1 with a free port.
    pub async fn start() -> Receiver {
        let (ca_pem, acceptor) = tls();
        let mut ca_file = tempfile::NamedTempFile::new().expect("CA file");
        std::io::Write::write_all(&mut ca_file, ca_pem.as_bytes()).expect("write CA file");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = listener.local_addr().expect("local address").port();
        let receiver = Receiver {
            port,
            shared: Arc::new(Mutex::new(State {
                status: 200,
                ..State::default()
            })),
            acceptor,
            ca_pem,
            ca_file,
            running: Mutex::new(None),
        };
        receiver.run(listener);
        receiver
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The same endpoint by name, to exercise DNS-name verification.
    pub fn url_localhost(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// A PEM file with the CA; it lives as long as the receiver.
    pub fn ca_file(&self) -> &std::path::Path {
        self.ca_file.path()
    }

    /// Every request so far, in arrival order (kept across stop/restart).
    pub fn requests(&self) -> Vec<Received> {
        lock(&self.shared).requests.clone()
    }

    /// Waits until at least `n` requests arrived or `timeout` passed, and
    /// answers what arrived either way (the caller asserts on the count).
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let requests = self.requests();
            if requests.len() >= n || Instant::now() >= deadline {
                return requests;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The status for all later requests; also ends a `redirect_to`.
    pub fn respond_with(&self, status: u16) {
        let mut state = lock(&self.shared);
        state.status = status;
        state.redirect = None;
    }

    /// The next `n` requests answer `status`, ahead of anything else.
    pub fn fail_next(&self, n: usize, status: u16) {
        lock(&self.shared).fail_next = std::iter::repeat_n(status, n).collect();
    }

    /// Holds every answer this long after the body was read.
    pub fn delay(&self, delay: Duration) {
        lock(&self.shared).delay = delay;
    }

    /// Answers 302 with this Location until `respond_with`.
    pub fn redirect_to(&self, url: &str) {
        lock(&self.shared).redirect = Some(url.to_owned());
    }

    /// Closes the port and every connection, in-flight ones included; when
    /// this returns, new connections are refused.
    pub fn stop(&self) {
        let running = lock(&self.running).take();
        if let Some((shutdown, thread)) = running {
            let _ = shutdown.send(());
            // Err only if the thread panicked; its port is closed either way.
            let _ = thread.join();
        }
    }

    /// Stops if running, then listens again on the same port.
    pub fn restart(&self) {
        self.stop();
        // std sets SO_REUSEADDR on Unix, so connections of the previous
        // generation lingering in TIME_WAIT do not block the rebind.
        let listener = TcpListener::bind(("127.0.0.1", self.port)).expect("rebind the same port");
        self.run(listener);
    }

    fn run(&self, listener: TcpListener) {
        listener.set_nonblocking(true).expect("non-blocking");
        let (shutdown, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (shared, acceptor) = (self.shared.clone(), self.acceptor.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("receiver runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            if let Ok((tcp, _)) = accepted {
                                tokio::spawn(serve(tcp, acceptor.clone(), shared.clone()));
                            }
                        }
                    }
                }
            });
            // Dropping the runtime drops the connection tasks with it.
        });
        *lock(&self.running) = Some((shutdown, thread));
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(tcp: tokio::net::TcpStream, tls: TlsAcceptor, shared: Arc<Shared>) {
    // A failed handshake (e.g. a client that does not trust the CA) just
    // ends the connection; the client sees the error.
    let Ok(stream) = tls.accept(tcp).await else {
        return;
    };
    let service = hyper::service::service_fn(move |request| answer(shared.clone(), request));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn answer(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        // The client went away mid-body: nothing arrived worth recording.
        Err(_) => return Ok(Response::new(Full::default())),
    };
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let headers = (parts.headers.iter())
        // `http` already keeps header names lower-case.
        .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    // Decided and recorded under one lock, so concurrent deliveries each
    // take their own `fail_next` slot and the log order is the answer order.
    let (status, redirect, delay) = {
        let mut state = lock(&shared);
        let (status, redirect) = match state.fail_next.pop_front() {
            Some(status) => (status, None),
            None => match state.redirect.clone() {
                Some(location) => (302, Some(location)),
                None => (state.status, None),
            },
        };
        state.requests.push(Received {
            method: parts.method.to_string(),
            path: path.to_owned(),
            headers,
            body,
            status,
            at: Instant::now(),
            at_utc: Utc::now(),
        });
        (status, redirect, state.delay)
    };
    tokio::time::sleep(delay).await;
    let mut response = Response::builder().status(status);
    if let Some(location) = redirect {
        response = response.header("location", location);
    }
    Ok(response
        .body(Full::new(Bytes::from_static(b"ok")))
        .unwrap_or_else(|_| Response::new(Full::default())))
}

/// A self-signed CA and a leaf for localhost and 127.0.0.1 signed by it;
/// answers the CA's PEM and an acceptor serving the leaf (plus the CA).
fn tls() -> (String, TlsAcceptor) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Tern test webhook CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA certificate");

    let leaf_key = KeyPair::generate().expect("leaf key");
    let mut leaf_params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("leaf params");
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_cert = leaf_params
        .signed_by(&leaf_key, &ca)
        .expect("leaf certificate");

    let chain = vec![leaf_cert.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    // An explicit provider: the receiver must not depend on, or race with,
    // whichever process-wide default a test installs.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca.pem(), TlsAcceptor::from(Arc::new(config)))
}

/// Verifies a Standard Webhooks signature (`webhook-id`, `webhook-timestamp`,
/// `webhook-signature`, ±5 min tolerance) with the reference crate, not with
/// Tern's signer, and answers the JSON body. A `whsec_` secret is base64 after
/// the prefix; any other secret is used as its raw UTF-8 bytes.
pub fn verify(secret: &str, received: &Received) -> Result<serde_json::Value, String> {
    let webhook = if secret.starts_with("whsec_") {
        standardwebhooks::Webhook::new(secret)
    } else {
        // `new` would base64-decode a plain secret that happens to be base64.
        standardwebhooks::Webhook::from_bytes(secret.as_bytes().to_vec())
    }
    .map_err(|e| format!("secret: {e}"))?;
    let headers: HashMap<_, _> = received.headers.iter().cloned().collect();
    let headers = HeaderMap::try_from(&headers).map_err(|e| format!("headers: {e}"))?;
    webhook
        .verify(&received.body, &headers)
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&received.body).map_err(|e| format!("body: {e}"))
}

// Tests of the receiver itself.

/// Trusts only the receiver's CA; one connection per request, so a
/// stopped receiver shows as a refused connection, not a stale pool.
fn client(receiver: &Receiver) -> reqwest::Client {
    tern_actors::adapters::install_crypto_provider();
    let certs = reqwest::Certificate::from_pem_bundle(receiver.ca_pem().as_bytes())
        .expect("CA certificate");
    reqwest::Client::builder()
        .tls_certs_only(certs)
        .redirect(Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Signs by the spec's formula, by hand, so `verify` is checked against
/// the spec and not only against the crate it delegates to.
fn sign(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("key");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

async fn post(client: &reqwest::Client, url: &str) -> reqwest::Result<reqwest::Response> {
    client.post(url).body("{}").send().await
}

async fn status(client: &reqwest::Client, url: &str) -> u16 {
    let response = post(client, url).await.expect("request");
    response.status().as_u16()
}

#[actix_web::test]
async fn records_requests_by_ip_and_by_name() {
    let receiver = Receiver::start().await;
    let client = client(&receiver);
    assert_eq!(status(&client, &receiver.url("/hooks/a?x=1")).await, 200);
    assert_eq!(status(&client, &receiver.url_localhost("/b")).await, 200);

    let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!((&*first.method, &*first.path), ("POST", "/hooks/a?x=1"));
    assert_eq!(first.header("Content-Length"), Some("2"));
    assert_eq!(first.json(), json!({}));
    assert_eq!(first.status, 200);
    assert!((Utc::now() - first.at_utc).num_seconds() < 5);
    assert!(requests[1].at >= first.at);
    assert_eq!(requests[1].path, "/b");
    let file = std::fs::read_to_string(receiver.ca_file()).expect("CA file");
    assert_eq!(file, receiver.ca_pem());
    // Fewer than asked for: answers what arrived once the time is up.
    let short = Duration::from_millis(50);
    assert_eq!(receiver.wait_for(3, short).await.len(), 2);
}

#[actix_web::test]
async fn programmed_statuses_and_redirects_are_answered_and_recorded() {
    let receiver = Receiver::start().await;
    let client = client(&receiver);
    receiver.fail_next(2, 503);
    let url = receiver.url("/");
    for expected in [503, 503, 200] {
        assert_eq!(status(&client, &url).await, expected);
    }
    receiver.respond_with(410);
    assert_eq!(status(&client, &url).await, 410);

    let elsewhere = "https://elsewhere.invalid/hook";
    receiver.redirect_to(elsewhere);
    let response = post(&client, &url).await.expect("request");
    assert_eq!(response.status(), 302);
    assert_eq!(response.headers()["location"], elsewhere);
    let recorded: Vec<u16> = receiver.requests().iter().map(|r| r.status).collect();
    assert_eq!(recorded, [503, 503, 200, 410, 302]);
}

#[actix_web::test]
async fn going_down_mid_delivery_then_back_on_the_same_port() {
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_secs(30));
    let (client, url) = (client(&receiver), receiver.url("/hook"));
    let in_flight = actix_web::rt::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { post(&client, &url).await }
    });
    let requests = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 1, "recorded on arrival, before the answer");

    // Stopping breaks the open connection and refuses new ones.
    receiver.stop();
    let outcome = in_flight.await.expect("task");
    assert!(outcome.is_err(), "{outcome:?}");
    let error = post(&client, &url).await.expect_err("the port is closed");
    assert!(error.is_connect(), "{error:?}");

    receiver.restart();
    receiver.delay(Duration::ZERO);
    assert_eq!(receiver.url("/hook"), url, "the same port");
    assert_eq!(status(&client, &url).await, 200);
    assert_eq!(receiver.requests().len(), 2);
}

#[actix_web::test]
async fn verify_checks_standard_webhooks_signatures() {
    const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const PLAIN: &str = "a-plain-secret-of-32-characters!";
    let receiver = Receiver::start().await;
    let client = client(&receiver);
    let whsec_key = STANDARD.decode(&WHSEC[6..]).expect("base64");
    let body = r#"{"type":"payment.settled","data":{"id":"pay_1"}}"#;
    let timestamp = Utc::now().timestamp();
    for (id, key) in [("msg_1", whsec_key.as_slice()), ("msg_2", PLAIN.as_bytes())] {
        client
            .post(receiver.url("/hook"))
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", sign(key, id, timestamp, body))
            .body(body)
            .send()
            .await
            .expect("request");
    }
    let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
    let value = verify(WHSEC, &requests[0]).expect("whsec_ secret verifies");
    assert_eq!(value["data"]["id"], "pay_1");
    verify(PLAIN, &requests[1]).expect("a plain secret verifies as raw bytes");

    // Each secret fits only its own request; a changed body fails.
    assert!(verify(PLAIN, &requests[0]).is_err());
    assert!(verify(WHSEC, &requests[1]).is_err());
    let mut tampered = requests[0].clone();
    tampered.body = body.replace("pay_1", "pay_2").into_bytes();
    assert!(verify(WHSEC, &tampered).is_err());
    let mut unsigned = requests[0].clone();
    unsigned.headers.retain(|(n, _)| n != "webhook-signature");
    assert!(verify(WHSEC, &unsigned).is_err());
}
