//! The rate source: how many units of a stablecoin one unit of a fiat
//! currency buys. A configured table by default
//! ([`crate::adapters::static_rates`]); a live price feed is another adapter
//! behind the same trait.

use async_trait::async_trait;
use tern_schema::money::Currency;

use super::Asset;
use crate::quote::Rate;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// The source could not answer now (a feed down or stale); asking again
    /// later may work.
    #[error("rate source unavailable: {reason}")]
    Unavailable { reason: String },
}

#[async_trait]
pub trait RateSource: Send + Sync {
    /// `currency` -> `asset`, or `None` when the source does not quote the pair.
    async fn rate(&self, currency: Currency, asset: Asset) -> Result<Option<Rate>, RateError>;
}
