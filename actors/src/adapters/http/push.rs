//! [`PushGateway`] over HTTP: one POST per message under its idempotency key.

use async_trait::async_trait;

use super::wire;
use super::{AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::{ProviderError, PushGateway, PushMessage, PushReceipt};

#[derive(Debug, Clone)]
pub struct HttpPushGateway {
    client: ProviderClient,
}

impl HttpPushGateway {
    pub fn new(config: &HttpProviderConfig) -> Result<HttpPushGateway, AdapterConfigError> {
        Ok(HttpPushGateway {
            client: ProviderClient::new("push", config)?,
        })
    }
}

#[async_trait]
impl PushGateway for HttpPushGateway {
    // Title, body and token stay out of the span: they are the user's.
    #[tracing::instrument(skip_all, fields(key = %message.idempotency_key, platform = message.platform.as_str()))]
    async fn send(&self, message: &PushMessage) -> Result<PushReceipt, ProviderError> {
        let body = wire::PushMessageRequest {
            platform: message.platform.as_str().to_owned(),
            token: message.token.clone(),
            user_id: message.user_id.to_string(),
            title: message.title.clone(),
            body: message.body.clone(),
            data: message.data.clone(),
        };
        let accepted: wire::PushMessageAccepted = self
            .client
            .execute(wire::PATH_PUSH_MESSAGES, &message.idempotency_key, &body)
            .await?;
        Ok(PushReceipt {
            message_id: accepted.id,
        })
    }
}
