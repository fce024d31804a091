//! Card push (Visa Direct style): push funds to a card, reverse, inquire.

use async_trait::async_trait;

use super::{ProviderError, RequestKeys};
use tern_schema::money::MinorUnits;

/// ISO 8583 action code of an approval.
pub const ACTION_CODE_APPROVED: &str = "00";
/// Issuer or switch inoperative: transient, retry under the same key.
/// Adapters report it as [`ProviderError::Transient`], never as a decline.
pub const ACTION_CODE_RETRY: &str = "91";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest {
    pub keys: RequestKeys,
    pub amount_minor: MinorUnits,
    pub currency: String,
    /// Destination card token (`tok_...`).
    pub destination: String,
    pub recipient_name: String,
}

/// The network references of an approved push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushApproval {
    /// 6 digits.
    pub stan: String,
    /// 12 digits.
    pub retrieval_reference_number: String,
    /// 15 digits; what a reversal names.
    pub transaction_identifier: String,
    /// 6 alphanumerics.
    pub approval_code: String,
    /// [`ACTION_CODE_APPROVED`].
    pub action_code: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    Approved(PushApproval),
    Declined { action_code: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReversalRequest {
    pub keys: RequestKeys,
    /// The 15-digit transaction identifier of the push being reversed.
    pub original_transaction_identifier: String,
    pub amount_minor: MinorUnits,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReversalOutcome {
    Approved {
        action_code: String,
        approval_code: String,
    },
    /// Accepted, finishing later; ask again with
    /// [`CardPush::reversal_inquiry`].
    Pending,
    Declined {
        action_code: String,
        reason: String,
    },
}

#[async_trait]
pub trait CardPush: Send + Sync {
    async fn push(&self, request: &PushRequest) -> Result<PushOutcome, ProviderError>;

    async fn reverse(&self, request: &ReversalRequest) -> Result<ReversalOutcome, ProviderError>;

    /// The outcome of the push made under `idempotency_key`; `None` when the
    /// provider never executed it.
    async fn inquiry(&self, idempotency_key: &str) -> Result<Option<PushOutcome>, ProviderError>;

    /// The current outcome of the reversal made under `idempotency_key`.
    async fn reversal_inquiry(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<ReversalOutcome>, ProviderError>;
}
