//! The card acquirer: charges (with 3DS), refunds, lookup by key.

use async_trait::async_trait;

use super::{ProviderError, RequestKeys};
use tern_schema::money::MinorUnits;

/// The only next-action type the acquirer reports for a 3DS challenge.
pub const NEXT_ACTION_REDIRECT_TO_URL: &str = "redirect_to_url";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRequest {
    pub keys: RequestKeys,
    pub amount_minor: MinorUnits,
    /// ISO 4217, upper case.
    pub currency: String,
    /// Payment-method token (`pm_card_visa`, ...).
    pub payment_method: String,
    /// Off-session charges cannot be challenged: a card that needs 3DS
    /// declines with `authentication_required`.
    pub off_session: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeOutcome {
    Succeeded {
        charge_id: String,
    },
    /// The payer must finish a challenge; the final outcome arrives later by
    /// webhook (`payment.succeeded` / `payment.failed`) or by lookup.
    RequiresAction {
        charge_id: String,
        client_secret: String,
        /// [`NEXT_ACTION_REDIRECT_TO_URL`].
        next_action_type: String,
        /// Where the payer completes the challenge.
        redirect_url: Option<String>,
    },
    Declined {
        code: String,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    pub keys: RequestKeys,
    pub charge_id: String,
    pub amount_minor: MinorUnits,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundOutcome {
    Succeeded {
        refund_id: String,
    },
    /// Completes later: `refund.succeeded` / `refund.failed` webhook, or lookup.
    Pending {
        refund_id: String,
    },
    Declined {
        code: String,
        reason: String,
    },
}

#[async_trait]
pub trait CardAcquirer: Send + Sync {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeOutcome, ProviderError>;

    async fn refund(&self, request: &RefundRequest) -> Result<RefundOutcome, ProviderError>;

    /// The current outcome of the charge made under `idempotency_key`;
    /// `None` when the provider never executed it.
    async fn lookup_charge(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<ChargeOutcome>, ProviderError>;

    /// The current outcome of the refund made under `idempotency_key`.
    async fn lookup_refund(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<RefundOutcome>, ProviderError>;
}
