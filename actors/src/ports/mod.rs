//! Provider ports: what the settlement actor and quoting need from the
//! outside world, as object-safe async traits (hold them as
//! `Arc<dyn CardAcquirer>` and so on). Adapters in [`crate::adapters`]
//! implement them; nothing here knows which provider, real or simulated, is
//! on the other side.
//!
//! Every money-moving request carries the provider idempotency key (derived
//! by the caller from the settlement key, identical on every retry) and the
//! settlement key, which travels as provider metadata so provider-side
//! records can be matched to settlements.

pub mod acquirer;
pub mod card_push;
pub mod custodian;
pub mod issuer;
pub mod mailer;
pub mod push;
pub mod rate_source;

pub use acquirer::{
    CardAcquirer, ChargeOutcome, ChargeRequest, RefundOutcome, RefundRequest,
    NEXT_ACTION_REDIRECT_TO_URL,
};
pub use card_push::{
    CardPush, PushApproval, PushOutcome, PushRequest, ReversalOutcome, ReversalRequest,
    ACTION_CODE_APPROVED, ACTION_CODE_RETRY,
};
pub use custodian::{Asset, Custodian, Network, PayoutOutcome, PayoutRequest};
pub use issuer::{
    CardIssuer, CardNetwork, CardSecrets, CardType, EmbedRequest, IssueRequest, IssuedCard,
    IssuerStatus, Wallet, WalletOutcome, WalletRequest,
};
pub use mailer::{Mail, MailError, Mailer};
pub use push::{message_key, Platform, PushGateway, PushMessage, PushReceipt};
pub use rate_source::{RateError, RateSource};

/// Why a provider call did not produce an outcome. The split is what the
/// settlement machine acts on: it decides whether a resend is safe and
/// whether the provider must be asked first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider did not execute the request, or said that repeating it
    /// under the same idempotency key is safe (connection refused, 5xx,
    /// 429, card-push action code 91). Retry with the same key after backoff.
    #[error("provider temporarily unavailable: {reason}")]
    Transient { reason: String },
    /// The request may have executed (timeout, connection dropped after the
    /// request was sent, unreadable success body). The caller must inquire
    /// under the same key before sending again.
    #[error("provider outcome unknown: {reason}")]
    Unknown { reason: String, timed_out: bool },
    /// The provider refused the request itself (bad request, idempotency key
    /// reused with different parameters, simulated permanent failure).
    /// Retrying the same request cannot help.
    #[error("provider rejected the request ({status} {code}): {message}")]
    Permanent {
        status: u16,
        code: String,
        message: String,
    },
}

impl ProviderError {
    /// True when a resend under the same key needs an inquiry first.
    pub fn needs_inquiry(&self) -> bool {
        matches!(self, ProviderError::Unknown { .. })
    }

    /// True when the caller may retry (after inquiry for `Unknown`).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, ProviderError::Permanent { .. })
    }
}

/// Fields every provider request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKeys {
    /// The provider idempotency key; the same on every retry of one effect.
    pub idempotency_key: String,
    /// The settlement this effect belongs to, sent as provider metadata.
    pub settlement_key: String,
}
