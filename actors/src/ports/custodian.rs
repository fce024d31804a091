//! The custodian: on-chain stablecoin payouts and their status by key.

use async_trait::async_trait;

use super::{ProviderError, RequestKeys};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Network {
    Tron,
    Ethereum,
    Polygon,
    Bsc,
}

impl Network {
    pub const ALL: [Network; 4] = [
        Network::Tron,
        Network::Ethereum,
        Network::Polygon,
        Network::Bsc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Network::Tron => "tron",
            Network::Ethereum => "ethereum",
            Network::Polygon => "polygon",
            Network::Bsc => "bsc",
        }
    }

    pub fn parse(value: &str) -> Option<Network> {
        Network::ALL.into_iter().find(|n| n.as_str() == value)
    }

    /// Tron addresses are base58check `T...`; the others are EVM `0x` + hex.
    pub fn is_evm(self) -> bool {
        !matches!(self, Network::Tron)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Asset {
    Usdt,
    Usdc,
}

impl Asset {
    pub fn as_str(self) -> &'static str {
        match self {
            Asset::Usdt => "USDT",
            Asset::Usdc => "USDC",
        }
    }

    pub fn parse(value: &str) -> Option<Asset> {
        match value {
            "USDT" => Some(Asset::Usdt),
            "USDC" => Some(Asset::Usdc),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutRequest {
    pub keys: RequestKeys,
    pub network: Network,
    pub wallet: String,
    pub asset: Asset,
    /// Six decimals: 1 USDT is 1_000_000.
    pub amount_minor: i64,
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
