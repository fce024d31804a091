//! The rate source as a configured table (decisions §3): sandbox defaults
//! near market, any pair overridable by configuration. Rates never change
//! while the process runs, so a quote's price depends only on its request.

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use async_trait::async_trait;
use tern_schema::money::{Currency, CurrencyKind};

use crate::ports::{Asset, RateError, RateSource};
use crate::quote::Rate;

/// currency, asset, rate as `units / 10^scale`: every supported fiat
/// currency to each stablecoin. The stablecoins are USD-pegged, so both
/// assets share each currency's rate.
pub const DEFAULT_RATES: [(&str, Asset, NonZeroU64, u32); 8] = [
    ("USD", Asset::Usdt, positive(1), 0),
    ("USD", Asset::Usdc, positive(1), 0),
    ("EUR", Asset::Usdt, positive(108), 2),
    ("EUR", Asset::Usdc, positive(108), 2),
    ("GBP", Asset::Usdt, positive(127), 2),
    ("GBP", Asset::Usdc, positive(127), 2),
    ("JPY", Asset::Usdt, positive(67), 4),
    ("JPY", Asset::Usdc, positive(67), 4),
];

/// A rate's units; zero fails to compile where it is used in a const.
#[allow(
    clippy::panic,
    reason = "called only to build the const DEFAULT_RATES: a zero rate is a compile error, never a run-time panic"
)]
const fn positive(units: u64) -> NonZeroU64 {
    match NonZeroU64::new(units) {
        Some(units) => units,
        None => panic!("a rate is positive"),
    }
}

/// Rates by (currency code, asset code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateTable {
    rates: BTreeMap<(&'static str, &'static str), Rate>,
}

impl Default for RateTable {
    fn default() -> Self {
        RateTable {
            rates: DEFAULT_RATES
                .into_iter()
                .map(|(currency, asset, units, scale)| {
                    ((currency, asset.as_str()), Rate::new(units, scale))
                })
                .collect(),
        }
    }
}

impl RateTable {
    pub fn get(&self, currency: Currency, asset: Asset) -> Option<Rate> {
        self.rates.get(&(currency.code, asset.as_str())).cloned()
    }

    pub fn set(&mut self, currency: Currency, asset: Asset, rate: Rate) {
        self.rates.insert((currency.code, asset.as_str()), rate);
    }

    /// `(currency, asset, rate)` in a stable order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &'static str, Rate)> + '_ {
        self.rates
            .iter()
            .map(|((currency, asset), rate)| (*currency, *asset, rate.clone()))
    }

    /// The defaults with `CUR/ASSET=RATE,...` applied over them (pairs left
    /// out keep their default); an empty spec is the defaults.
    pub fn with_overrides(spec: &str) -> Result<RateTable, String> {
        let mut table = RateTable::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (pair, value) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not CURRENCY/ASSET=RATE"))?;
            let (currency, asset) = pair
                .split_once('/')
                .ok_or_else(|| format!("`{pair}` is not CURRENCY/ASSET"))?;
            let currency = Currency::find(currency.trim())
                .filter(|c| c.kind == CurrencyKind::Fiat)
                .ok_or_else(|| {
                    let fiat: Vec<&str> = Currency::fiat().map(|c| c.code).collect();
                    format!("`{currency}` is not one of {}", fiat.join(", "))
                })?;
            let asset = Asset::parse(asset.trim())
                .ok_or_else(|| format!("`{asset}` is not USDT or USDC"))?;
            let rate = Rate::parse(value.trim()).map_err(|e| e.to_string())?;
            table.set(currency, asset, rate);
        }
        Ok(table)
    }
}

/// [`RateSource`] over a [`RateTable`].
pub struct StaticRates {
    table: RateTable,
}

impl StaticRates {
    pub fn new(table: RateTable) -> StaticRates {
        StaticRates { table }
    }
}

#[async_trait]
impl RateSource for StaticRates {
    async fn rate(&self, currency: Currency, asset: Asset) -> Result<Option<Rate>, RateError> {
        Ok(self.table.get(currency, asset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(code: &str) -> Currency {
        Currency::find(code).expect(code)
    }

    #[test]
    fn every_fiat_currency_has_a_rate_to_each_asset() {
        let table = RateTable::default();
        for fiat in Currency::fiat() {
            for asset in [Asset::Usdt, Asset::Usdc] {
                assert!(table.get(fiat, asset).is_some(), "{fiat} -> {asset:?}");
            }
        }
        assert_eq!(
            table
                .get(currency("USD"), Asset::Usdt)
                .map(|r| r.to_string()),
            Some("1".into())
        );
        assert_eq!(
            table
                .get(currency("EUR"), Asset::Usdc)
                .map(|r| r.to_string()),
            Some("1.08".into())
        );
    }

    #[test]
    fn overrides_replace_only_the_pairs_named() {
        let table = RateTable::with_overrides(" EUR/USDC=1.0921 , JPY/USDT=0.0066").expect("valid");
        assert_eq!(
            table
                .get(currency("EUR"), Asset::Usdc)
                .map(|r| r.to_string()),
            Some("1.0921".into())
        );
        assert_eq!(
            table
                .get(currency("EUR"), Asset::Usdt)
                .map(|r| r.to_string()),
            Some("1.08".into())
        );
        assert_eq!(
            table
                .get(currency("JPY"), Asset::Usdt)
                .map(|r| r.to_string()),
            Some("0.0066".into())
        );
        assert_eq!(RateTable::with_overrides(""), Ok(RateTable::default()));
    }

    #[test]
    fn bad_overrides_say_what_is_wrong() {
        for bad in [
            "EUR/USDC",
            "EURUSDC=1.08",
            "XXX/USDC=1",
            "USDT/USDC=1",
            "EUR/DAI=1",
            "EUR/USDC=0",
            "EUR/USDC=-1.08",
            "EUR/USDC=1.08e0",
            "EUR/USDC=1.0000000000001",
        ] {
            assert!(RateTable::with_overrides(bad).is_err(), "{bad}");
        }
    }

    #[actix_rt::test]
    async fn the_adapter_answers_from_its_table() {
        let source = StaticRates::new(RateTable::default());
        let rate = source.rate(currency("GBP"), Asset::Usdt).await;
        assert_eq!(
            rate.map(|r| r.map(|r| r.to_string())),
            Ok(Some("1.27".into()))
        );
    }
}
