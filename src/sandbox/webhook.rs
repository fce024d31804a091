//! Signed webhooks from the simulator to Tern. Delivery runs in the
//! background with a few retries and never holds up the request that caused
//! it; a delivery that keeps failing is logged and dropped. The one
//! exception is [`Sender::send_now`]: card-network events the control API
//! plays, whose answer (an authorization decision) is the point.

use std::time::Duration;

use serde_json::{json, Value};
use tern_actors::adapters::{sign_payload, SANDBOX_SIGNATURE_HEADER};

use super::SandboxConfig;

/// Path of Tern's inbound webhook for the sandbox provider.
pub const WEBHOOK_PATH: &str = "/v1/webhooks/sandbox";
/// One delivery attempt's time limit.
pub const WEBHOOK_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Tern's answer to an event sent at once is read up to this size; a
/// decision is a few dozen bytes.
pub const ANSWER_BYTES_MAX: usize = 64 * 1024;

/// Tern's answer to an event sent at once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub status: u16,
    /// Tern's JSON, or its text as a JSON string; `null` when empty.
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendNowError {
    #[error("the simulator has no callback URL to reach Tern")]
    NoCallback,
    #[error("Tern could not be reached: {0}")]
    Failed(String),
}

pub(crate) struct Sender {
    client: reqwest::Client,
    url: Option<String>,
    secret: String,
    retry_schedule: Vec<Duration>,
}

impl Sender {
    pub(crate) fn new(config: &SandboxConfig) -> Result<Sender, reqwest::Error> {
        Ok(Sender {
            client: reqwest::Client::builder()
                .timeout(WEBHOOK_ATTEMPT_TIMEOUT)
                .build()?,
            url: config
                .callback_base_url
                .as_ref()
                .map(|base| format!("{}{WEBHOOK_PATH}", base.trim_end_matches('/'))),
            secret: config.webhook_secret.clone(),
            retry_schedule: config.webhook_retry_schedule.clone(),
        })
    }

    /// Queues `{"id", "type", "data"}` for delivery; `id` is the same on
    /// every attempt so Tern can deduplicate.
    pub(crate) fn send(&self, id: String, kind: &'static str, data: Value) {
        let Some(url) = self.url.clone() else {
            tracing::info!(event_id = %id, kind, "sandbox webhook dropped: no callback URL");
            return;
        };
        let body = json!({"id": id, "type": kind, "data": data}).to_string();
        let client = self.client.clone();
        let secret = self.secret.clone();
        let schedule = self.retry_schedule.clone();
        actix_web::rt::spawn(async move {
            deliver(client, url, secret, schedule, id, kind, body).await;
        });
    }

    /// Sends `{"id", "type", "data"}` once, signed, and waits for Tern's
    /// answer. No retry: the caller (a person playing a card swipe) sees the
    /// failure and decides.
    pub(crate) async fn send_now(
        &self,
        id: &str,
        kind: &'static str,
        data: Value,
    ) -> Result<Answer, SendNowError> {
        let Some(url) = &self.url else {
            return Err(SendNowError::NoCallback);
        };
        let body = json!({"id": id, "type": kind, "data": data}).to_string();
        let signature = sign_payload(
            self.secret.as_bytes(),
            chrono::Utc::now().timestamp(),
            body.as_bytes(),
        );
        let failed = |e: reqwest::Error| SendNowError::Failed(e.to_string());
        let mut response = self
            .client
            .post(url)
            .header(SANDBOX_SIGNATURE_HEADER, signature)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(failed)?;
        let status = response.status().as_u16();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if bytes.len() + chunk.len() > ANSWER_BYTES_MAX {
                return Err(SendNowError::Failed(format!(
                    "the answer exceeds {ANSWER_BYTES_MAX} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        tracing::info!(event_id = %id, kind, status, "sandbox event answered");
        Ok(Answer { status, body })
    }
}

async fn deliver(
    client: reqwest::Client,
    url: String,
    secret: String,
    schedule: Vec<Duration>,
    id: String,
    kind: &'static str,
    body: String,
) {
    let waits = std::iter::once(Duration::ZERO).chain(schedule);
    for (attempt, wait) in waits.enumerate() {
        actix_web::rt::time::sleep(wait).await;
        // Signed per attempt: the timestamp must be fresh for the receiver.
        let signature = sign_payload(
            secret.as_bytes(),
            chrono::Utc::now().timestamp(),
            body.as_bytes(),
        );
        let sent = client
            .post(&url)
            .header(SANDBOX_SIGNATURE_HEADER, signature)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                tracing::info!(event_id = %id, kind, attempt, "sandbox webhook delivered");
                return;
            }
            Ok(response) => {
                tracing::warn!(event_id = %id, kind, attempt, status = %response.status(), "sandbox webhook refused")
            }
            Err(error) => {
                tracing::warn!(event_id = %id, kind, attempt, %error, "sandbox webhook failed")
            }
        }
    }
    tracing::error!(event_id = %id, kind, "sandbox webhook dropped after its retries");
}
