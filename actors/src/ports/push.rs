//! The push gateway: one notification to one device. A message carries an
//! idempotency key derived from its dispatch and device, the same on every
//! retry, so a resend after a timeout or a restart never notifies twice.

use async_trait::async_trait;
use tern_schema::vocabulary::{DeviceId, DispatchId, UserId};

use super::ProviderError;

pub use tern_schema::vocabulary::Platform;

/// The idempotency key of a dispatch's message to one device.
pub fn message_key(dispatch_id: &DispatchId, device_id: &DeviceId) -> String {
    format!("push_{dispatch_id}_{device_id}")
}

#[derive(Debug, Clone, PartialEq)]
pub struct PushMessage {
    /// See [`message_key`].
    pub idempotency_key: String,
    pub platform: Platform,
    pub token: String,
    /// The user the device belongs to; providers (and the simulator's
    /// faults) may match on it.
    pub user_id: UserId,
    pub title: String,
    pub body: String,
    /// A JSON object passed to the app, or `None`.
    pub data: Option<serde_json::Value>,
}

/// The gateway accepted the message for delivery to the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReceipt {
    pub message_id: String,
}

#[async_trait]
pub trait PushGateway: Send + Sync {
    async fn send(&self, message: &PushMessage) -> Result<PushReceipt, ProviderError>;
}
