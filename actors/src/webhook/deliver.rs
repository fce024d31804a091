//! One attempt to deliver one event: a signed POST with a 15 s timeout,
//! redirects not followed, through the SSRF guard.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE, USER_AGENT};
use reqwest::{redirect, Client};
use tern_schema::models::WebhookEventRow;
use tracing::Instrument;

use super::guard::{self, GuardedResolver};
use super::machine::Outcome;
use super::signing;

/// Success is a 2xx within this (decisions §8).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest receiver error text kept with an attempt.
const ERROR_TEXT_MAX: usize = 300;

/// How webhooks leave the process.
#[derive(Clone, Debug, Default)]
pub struct DeliveryConfig {
    /// TERN_WEBHOOK_ALLOW_PRIVATE: deliver to internal addresses too.
    pub allow_private: bool,
    /// TERN_WEBHOOK_CA_FILE: an extra root trusted for TLS.
    pub ca_file: Option<PathBuf>,
    /// None: [`DELIVERY_TIMEOUT`].
    pub timeout: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum DeliveryConfigError {
    #[error("reading TERN_WEBHOOK_CA_FILE {path}: {source}")]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("TERN_WEBHOOK_CA_FILE {path} holds no usable PEM certificate: {reason}")]
    CaPem { path: PathBuf, reason: String },
    #[error("building the webhook HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// What an attempt produced, for the event's record.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub at: DateTime<Utc>,
    pub outcome: Outcome,
    pub duration: Duration,
}

/// The shared webhook client: one connection pool for every endpoint.
pub struct Deliverer {
    client: Client,
    allow_private: bool,
}

impl Deliverer {
    pub fn new(config: &DeliveryConfig) -> Result<Deliverer, DeliveryConfigError> {
        let mut builder = Client::builder()
            .timeout(config.timeout.unwrap_or(DELIVERY_TIMEOUT))
            .connect_timeout(config.timeout.unwrap_or(DELIVERY_TIMEOUT))
            .redirect(redirect::Policy::none())
            // Through a proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) the proxy
            // resolves the name and connects, so the guard would never see
            // the address: deliveries always connect themselves.
            .no_proxy()
            .dns_resolver(GuardedResolver {
                allow_private: config.allow_private,
            });
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path).map_err(|source| DeliveryConfigError::CaFile {
                path: path.clone(),
                source,
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|error| {
                DeliveryConfigError::CaPem {
                    path: path.clone(),
                    reason: error.to_string(),
                }
            })?;
            if certs.is_empty() {
                return Err(DeliveryConfigError::CaPem {
                    path: path.clone(),
                    reason: "no certificate found".into(),
                });
            }
            builder = builder.tls_certs_merge(certs);
        }
        Ok(Deliverer {
            client: builder.build()?,
            allow_private: config.allow_private,
        })
    }

    /// Posts the event to `url`, signed with `secret`, and says how it went.
    pub async fn attempt(&self, url: &str, secret: &str, event: &WebhookEventRow) -> Attempt {
        let at = Utc::now();
        let started = Instant::now();
        let span = tracing::debug_span!(
            target: crate::trace::TARGET,
            "webhook.deliver",
            event_type = %event.event_type,
            otel.kind = "client",
        );
        let outcome = self
            .post(url, secret, event, at, &span)
            .instrument(span.clone())
            .await;
        Attempt {
            at,
            outcome,
            duration: started.elapsed(),
        }
    }

    async fn post(
        &self,
        url: &str,
        secret: &str,
        event: &WebhookEventRow,
        at: DateTime<Utc>,
        span: &tracing::Span,
    ) -> Outcome {
        let failed = |error: String| Outcome::Failed { error };
        let parsed = match url::Url::parse(url) {
            Ok(parsed) => parsed,
            Err(error) => return failed(format!("bad endpoint URL: {error}")),
        };
        if let Some(host) = parsed.host() {
            if let Err(refused) = guard::check_host(&host, self.allow_private) {
                tracing::warn!(detail = %refused.detail(), "webhook target refused");
                return failed(refused.to_string());
            }
        }
        let Some(key) = signing::signing_key(secret) else {
            return failed("the endpoint's whsec_ secret is not base64".into());
        };
        let timestamp = at.timestamp();
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(USER_AGENT, HeaderValue::from_static("Tern-Webhooks/1"));
        let signature =
            signing::signature(&key, event.id.as_str(), timestamp, event.payload.as_bytes());
        for (name, value) in [
            ("webhook-id", event.id.as_str()),
            ("webhook-timestamp", &timestamp.to_string()),
            ("webhook-signature", &signature),
            ("x-request-id", &event.request_id),
        ] {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        }
        crate::trace::inject(span, &mut headers);
        let sent = self
            .client
            .post(parsed)
            .headers(headers)
            .body(event.payload.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Outcome::Accepted {
                status: response.status().as_u16(),
            },
            Ok(response) => Outcome::Rejected {
                status: response.status().as_u16(),
            },
            Err(error) => failed(describe(&error)),
        }
    }
}

/// A transport error as an operator reads it: the guard's refusal when it
/// was one, else the error and its causes.
fn describe(error: &reqwest::Error) -> String {
    if let Some(refused) = guard::refused_in(error) {
        return refused;
    }
    let kind = if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    let mut text = format!("{kind}: {error}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.chars().take(ERROR_TEXT_MAX).collect()
}
