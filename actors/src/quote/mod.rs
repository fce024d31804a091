//! Quotes (decisions §3): a price for sending an amount of fiat and
//! receiving a stablecoin on a network, held for a short time. Pricing is
//! pure ([`pricing`]); this module fetches the rates, prices, and stores
//! the quote. A quote is a fact, not an entity with a life: no actor.

pub mod decimal;
pub mod pricing;

use std::time::Duration;

use tern_schema::models::QuoteRow;
use tern_schema::money::{Currency, MinorUnits};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{MerchantId, QuoteId};
use tern_schema::{Db, Plan, PlanError, RowWrite, StoreError};

pub use decimal::{DecimalError, Rate};
pub use pricing::{NetworkFees, Price, PriceInput, Pricing, PricingError};

use crate::ports::{Asset, Network, RateError, RateSource};

/// A validated request for a quote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuoteRequest {
    pub merchant_id: MerchantId,
    pub request_id: String,
    pub send_currency: Currency,
    pub send_amount_minor: i64,
    pub receive_asset: Asset,
    pub receive_network: Network,
}

#[derive(Debug, thiserror::Error)]
pub enum QuoteError {
    /// The amount cannot be quoted in `currency` (bounds, fees, overflow).
    #[error("{error}")]
    Pricing {
        currency: Currency,
        error: PricingError,
    },
    /// The rate source has no rate for this pair (or for the gas currency
    /// to the asset, needed to price the network fee).
    #[error("no rate from {currency} to {asset}")]
    NotQuoted {
        currency: &'static str,
        asset: &'static str,
    },
    #[error(transparent)]
    Rates(#[from] RateError),
    /// The configured lifetime reaches past what a timestamp holds.
    #[error("the quote lifetime is out of range")]
    Lifetime,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Prices `request` with today's rates and stores the quote, valid for `ttl`.
pub async fn create(
    db: &Db,
    rates: &dyn RateSource,
    pricing: &Pricing,
    ttl: Duration,
    request: QuoteRequest,
) -> Result<QuoteRow, QuoteError> {
    let rate = rate_of(rates, request.send_currency, request.receive_asset).await?;
    let gas_currency = Currency::find(pricing::GAS_CURRENCY).ok_or(QuoteError::NotQuoted {
        currency: pricing::GAS_CURRENCY,
        asset: request.receive_asset.as_str(),
    })?;
    let gas_rate = rate_of(rates, gas_currency, request.receive_asset).await?;
    let input = PriceInput {
        currency: request.send_currency,
        send_minor: request.send_amount_minor,
        network: request.receive_network,
        rate,
        gas_rate,
    };
    let price = pricing::price(pricing, &input).map_err(|error| QuoteError::Pricing {
        currency: request.send_currency,
        error,
    })?;
    let created_at = utc_now();
    let expires_at = chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|ttl| created_at.checked_add_signed(ttl))
        .ok_or(QuoteError::Lifetime)?;
    let row = QuoteRow {
        id: QuoteId::generate(),
        merchant_id: request.merchant_id,
        send_currency: request.send_currency.code.to_owned(),
        send_amount_minor: MinorUnits::new(request.send_amount_minor),
        receive_asset: request.receive_asset,
        receive_network: request.receive_network,
        rate: input.rate.to_string(),
        platform_fee_minor: MinorUnits::new(price.platform_fee_minor),
        network_fee_minor: MinorUnits::new(price.network_fee_minor),
        receive_amount_minor: MinorUnits::new(price.receive_minor),
        request_id: request.request_id,
        created_at,
        expires_at,
    };
    // Group-committed: the quote is durable when this answers.
    let plan = Plan {
        rows: vec![RowWrite::NewQuote(row.clone())],
        ..Plan::default()
    };
    db.commit(plan).await.map_err(|error| match error {
        PlanError::Store(error) => QuoteError::Store(error),
        // A quote's plan holds no ledger write, timer or source to refuse.
        other => QuoteError::Store(StoreError::Unavailable(other.to_string())),
    })?;
    Ok(row)
}

async fn rate_of(
    rates: &dyn RateSource,
    currency: Currency,
    asset: Asset,
) -> Result<Rate, QuoteError> {
    rates
        .rate(currency, asset)
        .await?
        .ok_or(QuoteError::NotQuoted {
            currency: currency.code,
            asset: asset.as_str(),
        })
}
