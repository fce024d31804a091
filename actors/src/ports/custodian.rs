//! The custodian: on-chain stablecoin payouts and their status by key.

use async_trait::async_trait;

use super::{ProviderError, RequestKeys};
use tern_schema::money::MinorUnits;

pub use tern_schema::vocabulary::{Asset, Network};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutRequest {
    pub keys: RequestKeys,
    pub network: Network,
    pub wallet: String,
    pub asset: Asset,
    /// Six decimals: 1 USDT is 1_000_000.
    pub amount_minor: MinorUnits,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayoutOutcome {
    Confirmed {
        payout_id: String,
        tx_hash: String,
    },
    /// Broadcast, not yet confirmed; ask again with [`Custodian::payout_status`].
    Pending {
        payout_id: String,
    },
    Rejected {
        reason: String,
    },
}

#[async_trait]
pub trait Custodian: Send + Sync {
    async fn payout(&self, request: &PayoutRequest) -> Result<PayoutOutcome, ProviderError>;

    /// The current outcome of the payout made under `idempotency_key` on
    /// `network`; `None` when the custodian never executed it.
    async fn payout_status(
        &self,
        network: Network,
        idempotency_key: &str,
    ) -> Result<Option<PayoutOutcome>, ProviderError>;
}
