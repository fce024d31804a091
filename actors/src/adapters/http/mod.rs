//! reqwest adapters for the provider ports. Each adapter is a base URL plus
//! timeouts; which provider answers (a real one, or the simulator on its own
//! listener) is only a matter of configuration.

pub mod acquirer;
pub mod card_push;
pub mod control;
pub mod custodian;
pub mod issuer;
pub mod push;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Client, Method, RequestBuilder, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::{Instrument, Span};

pub use acquirer::HttpCardAcquirer;
pub use card_push::HttpCardPush;
pub use control::SandboxControl;
pub use custodian::HttpCustodian;
pub use issuer::HttpCardIssuer;
pub use push::HttpPushGateway;

use super::health::ProviderHealth;
use crate::ports::ProviderError;
use crate::trace::{self, TARGET as TRACE_TARGET};

/// Time to establish a TCP connection; refusal or expiry here means the
/// request was never sent, so it is a transient error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time for a whole request; expiry here means the outcome is unknown.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Error bodies longer than this are cut before they reach error messages.
pub const ERROR_MESSAGE_CHARS_MAX: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum AdapterConfigError {
    #[error("invalid provider base URL `{url}`: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("building the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Where a provider lives and how long to wait for it.
#[derive(Debug, Clone)]
pub struct HttpProviderConfig {
    /// `http(s)://host:port` with an optional path prefix.
    pub base_url: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Where the adapter records each request's outcome; `None` records
    /// nothing.
    pub health: Option<Arc<ProviderHealth>>,
}

impl HttpProviderConfig {
    /// `base_url` with the default timeouts.
    pub fn new(base_url: impl Into<String>) -> HttpProviderConfig {
        HttpProviderConfig {
            base_url: base_url.into(),
            connect_timeout: CONNECT_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            health: None,
        }
    }

    /// The same provider, recording its outcomes in `health`.
    pub fn with_health(mut self, health: Arc<ProviderHealth>) -> HttpProviderConfig {
        self.health = Some(health);
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> HttpProviderConfig {
        self.request_timeout = timeout;
        self
    }
}

/// The shared client of every adapter: base URL, timeouts, error mapping.
#[derive(Debug, Clone)]
pub(crate) struct ProviderClient {
    /// Which provider port it serves (`acquirer`, `card_push`, ...): the
    /// metrics' provider label.
    name: &'static str,
    base: Url,
    client: Client,
    health: Option<Arc<ProviderHealth>>,
}

impl ProviderClient {
    pub(crate) fn new(
        name: &'static str,
        config: &HttpProviderConfig,
    ) -> Result<ProviderClient, AdapterConfigError> {
        let bad = |reason: &str| AdapterConfigError::BaseUrl {
            url: config.base_url.clone(),
            reason: reason.to_owned(),
        };
        let mut base = Url::parse(&config.base_url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        // Joining relative paths needs the prefix to end in a slash.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let client = Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .build()?;
        Ok(ProviderClient {
            name,
            base,
            client,
            health: config.health.clone(),
        })
    }

    fn url(&self, path: &str, key_query: Option<&str>) -> Result<Url, ProviderError> {
        let mut url = self
            .base
            .join(path.trim_start_matches('/'))
            .map_err(|e| permanent_local(format!("bad provider path {path}: {e}")))?;
        if let Some(key) = key_query {
            url.query_pairs_mut()
                .append_pair(wire::IDEMPOTENCY_KEY_QUERY, key);
        }
        Ok(url)
    }

    /// POSTs `body` under `idempotency_key` and decodes a 2xx answer.
    pub(crate) async fn execute<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &B,
    ) -> Result<T, ProviderError> {
        let started = Instant::now();
        let span = self.call_span("execute");
        let request = self
            .client
            .request(Method::POST, self.url(path, None)?)
            .header(wire::IDEMPOTENCY_KEY_HEADER, idempotency_key)
            .json(body);
        let outcome = async {
            match send(trace::with_context(request, &span)).await {
                Ok(response) => decode(response).await,
                Err(error) => Err(error),
            }
        }
        .instrument(span.clone())
        .await;
        self.observe("execute", started, &outcome, &span);
        outcome
    }

    /// A call's span in a trace; its context goes with the request.
    fn call_span(&self, operation: &'static str) -> Span {
        tracing::debug_span!(
            target: TRACE_TARGET,
            "provider.call",
            provider = self.name,
            operation,
            outcome = tracing::field::Empty,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
        )
    }

    /// Records a call's outcome: for the provider's health, as metrics by
    /// provider, operation and outcome, and on its span.
    fn observe<T>(
        &self,
        operation: &'static str,
        started: Instant,
        outcome: &Result<T, ProviderError>,
        span: &Span,
    ) {
        if let Some(health) = &self.health {
            health.observe(outcome);
        }
        super::failures::record(self.name, operation, outcome);
        let result = match outcome {
            Ok(_) => "ok",
            Err(ProviderError::Transient { .. }) => "transient",
            Err(ProviderError::Unknown { .. }) => "unknown",
            Err(ProviderError::Permanent { .. }) => "refused",
        };
        crate::metrics::provider_call(self.name, operation, result, started);
        span.record("outcome", result);
        if outcome.is_err() {
            span.record("otel.status_code", "ERROR");
        }
    }

    /// GETs the record stored under `idempotency_key`; `None` on 404.
    pub(crate) async fn lookup<T: DeserializeOwned>(
        &self,
        path: &str,
        idempotency_key: &str,
    ) -> Result<Option<T>, ProviderError> {
        let started = Instant::now();
        let span = self.call_span("lookup");
        let request = self.client.get(self.url(path, Some(idempotency_key))?);
        let outcome = async {
            match send(trace::with_context(request, &span)).await {
                Ok(response) if response.status() == StatusCode::NOT_FOUND => Ok(None),
                Ok(response) => decode(response).await.map(Some),
                Err(error) => Err(error),
            }
        }
        .instrument(span.clone())
        .await;
        self.observe("lookup", started, &outcome, &span);
        outcome
    }

    /// POSTs `body` to a request that is idempotent by nature (setting a
    /// status, signing a URL), so it carries no key.
    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ProviderError> {
        let started = Instant::now();
        let span = self.call_span("post");
        let request = self.client.post(self.url(path, None)?).json(body);
        let outcome = async {
            match send(trace::with_context(request, &span)).await {
                Ok(response) => decode(response).await,
                Err(error) => Err(error),
            }
        }
        .instrument(span.clone())
        .await;
        self.observe("post", started, &outcome, &span);
        outcome
    }

    /// GETs `path`; `None` on 404.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ProviderError> {
        let started = Instant::now();
        let span = self.call_span("get");
        let request = self.client.get(self.url(path, None)?);
        let outcome = async {
            match send(trace::with_context(request, &span)).await {
                Ok(response) if response.status() == StatusCode::NOT_FOUND => Ok(None),
                Ok(response) => decode(response).await.map(Some),
                Err(error) => Err(error),
            }
        }
        .instrument(span.clone())
        .await;
        self.observe("get", started, &outcome, &span);
        outcome
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn endpoint(&self, path: &str) -> Result<Url, ProviderError> {
        self.url(path, None)
    }
}

fn permanent_local(message: String) -> ProviderError {
    ProviderError::Permanent {
        status: 0,
        code: "client_error".into(),
        message,
    }
}

/// Sends and classifies failures that happen before a status arrives.
pub(crate) async fn send(request: RequestBuilder) -> Result<Response, ProviderError> {
    let response = request.send().await.map_err(classify_send_error)?;
    let status = response.status();
    if status.is_success() || status == StatusCode::NOT_FOUND {
        return Ok(response);
    }
    Err(status_error(response).await)
}

/// A connect failure never reached the provider; anything after that
/// (timeout, reset mid-response) may have executed.
fn classify_send_error(error: reqwest::Error) -> ProviderError {
    if error.is_connect() {
        ProviderError::Transient {
            reason: format!("connection failed: {error}"),
        }
    } else if error.is_builder() {
        permanent_local(error.to_string())
    } else {
        ProviderError::Unknown {
            timed_out: error.is_timeout(),
            reason: error.to_string(),
        }
    }
}

async fn status_error(response: Response) -> ProviderError {
    let status = response.status();
    // The body may be cut by a timeout too; it is only for the message.
    let body = response.text().await.unwrap_or_default();
    let (code, message) = match serde_json::from_str::<wire::ErrorBody>(&body) {
        Ok(parsed) => (parsed.error.code, parsed.error.message),
        Err(_) => (
            status.as_str().to_owned(),
            body.chars().take(ERROR_MESSAGE_CHARS_MAX).collect(),
        ),
    };
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        ProviderError::Transient {
            reason: format!("{status} {code}: {message}"),
        }
    } else if status == StatusCode::REQUEST_TIMEOUT {
        ProviderError::Unknown {
            timed_out: true,
            reason: format!("{status} {code}: {message}"),
        }
    } else {
        ProviderError::Permanent {
            status: status.as_u16(),
            code,
            message,
        }
    }
}

/// A 2xx whose body cannot be read or decoded may still mean the request
/// executed: unknown, so the caller inquires rather than resends.
async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ProviderError> {
    let status = response.status();
    if status == StatusCode::NOT_FOUND {
        return Err(ProviderError::Permanent {
            status: status.as_u16(),
            code: wire::CODE_NOT_FOUND.into(),
            message: "the provider has no such endpoint or record".into(),
        });
    }
    let bytes = response.bytes().await.map_err(|e| ProviderError::Unknown {
        timed_out: e.is_timeout(),
        reason: format!("reading the response: {e}"),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| undecodable(status, &e))
}

/// Names where the body broke, never what it held: serde's own message
/// quotes the offending value, which in an issuer's answer may be a PAN,
/// and this reason reaches logs and the provider health figures.
fn undecodable(status: StatusCode, error: &serde_json::Error) -> ProviderError {
    let kind = match error.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "unexpected fields or types",
        serde_json::error::Category::Eof => "cut short",
    };
    ProviderError::Unknown {
        timed_out: false,
        reason: format!(
            "undecodable {status} response ({kind} at line {} column {})",
            error.line(),
            error.column()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undecodable_answer_never_quotes_its_values() {
        let body = br#"{"pan": 4242424242424242, "cvv": "123"}"#;
        let error = serde_json::from_slice::<wire::CardSecrets>(body)
            .err()
            .map(|e| undecodable(StatusCode::OK, &e).to_string());
        let reason = error.unwrap_or_default();
        assert!(reason.contains("unexpected fields or types"), "{reason}");
        assert!(!reason.contains("4242"), "{reason}");
    }

    #[test]
    fn base_urls_are_checked_and_joined_under_their_prefix() {
        crate::adapters::install_crypto_provider();
        let client =
            ProviderClient::new("test", &HttpProviderConfig::new("http://127.0.0.1:9/prov"))
                .expect("valid");
        let url = client
            .url(wire::PATH_CHARGE_LOOKUP, Some("key &1"))
            .expect("url");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/prov/acquirer/charges/lookup?idempotency_key=key+%261"
        );
        assert!(ProviderClient::new("test", &HttpProviderConfig::new("ftp://x")).is_err());
        assert!(ProviderClient::new("test", &HttpProviderConfig::new("not a url")).is_err());
    }

    #[actix_rt::test]
    async fn connection_refused_is_transient() {
        crate::adapters::install_crypto_provider();
        // Bind then drop: the port is (almost certainly) closed now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let client = ProviderClient::new(
            "test",
            &HttpProviderConfig::new(format!("http://127.0.0.1:{port}")),
        )
        .expect("client");
        let err = client
            .lookup::<wire::Charge>(wire::PATH_CHARGE_LOOKUP, "k")
            .await
            .expect_err("refused");
        assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
    }
}
