//! What a quote costs and delivers (decisions §3), as pure arithmetic on
//! minor units and exact rates: no I/O, no clock, rates arrive as inputs.
//!
//! - platform_fee = max(minimum fee, send_amount x fee bps), half-up to the
//!   send currency's exponent;
//! - network_fee = the network's gas estimate (in USD) converted to the send
//!   currency, half-up to its exponent;
//! - receive_amount = floor to 6 decimals of (send - fees) x rate.
//!
//! Every intermediate is an exact fraction of `i128`s, rounded once.

use tern_schema::money::Currency;

use super::decimal::{div_half_up, pow10, Decimal, Rate};
use crate::ports::Network;

/// Decimals of a receive amount: the stablecoins' six.
pub const RECEIVE_SCALE: u32 = 6;
/// The currency the gas estimates are configured in.
pub const GAS_CURRENCY: &str = "USD";
const BASIS_POINTS: i128 = 10_000;
/// The largest fee rate that can still leave something to receive.
pub const FEE_BPS_MAX: u32 = 10_000;

/// Per-network gas estimates, in [`GAS_CURRENCY`] major units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkFees {
    pub tron: Decimal,
    pub ethereum: Decimal,
    pub polygon: Decimal,
    pub bsc: Decimal,
}

impl NetworkFees {
    pub fn of(&self, network: Network) -> Decimal {
        match network {
            Network::Tron => self.tron,
            Network::Ethereum => self.ethereum,
            Network::Polygon => self.polygon,
            Network::Bsc => self.bsc,
        }
    }
}

impl Default for NetworkFees {
    /// decisions §3: tron 1.00, ethereum 2.50, polygon 0.05, bsc 0.10 USD.
    fn default() -> Self {
        NetworkFees {
            tron: Decimal::new(100, 2),
            ethereum: Decimal::new(250, 2),
            polygon: Decimal::new(5, 2),
            bsc: Decimal::new(10, 2),
        }
    }
}

/// The fee and bound policy. Amounts are major units of the send currency
/// (the same figures apply to every currency, as decisions §3 states them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pricing {
    /// Platform fee in basis points of the send amount, at most [`FEE_BPS_MAX`].
    pub fee_bps: u32,
    pub fee_min: Decimal,
    pub send_min: Decimal,
    pub send_max: Decimal,
    pub network_fees: NetworkFees,
}

impl Default for Pricing {
    /// decisions §3: 100 bps, at least 1.00; send 1.00 to 10,000.00.
    fn default() -> Self {
        Pricing {
            fee_bps: 100,
            fee_min: Decimal::new(100, 2),
            send_min: Decimal::new(100, 2),
            send_max: Decimal::new(1_000_000, 2),
            network_fees: NetworkFees::default(),
        }
    }
}

/// One quote to price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PriceInput {
    pub currency: Currency,
    pub send_minor: i64,
    pub network: Network,
    /// Send currency -> receive asset.
    pub rate: Rate,
    /// [`GAS_CURRENCY`] -> receive asset: converts the gas estimate.
    pub gas_rate: Rate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Price {
    pub platform_fee_minor: i64,
    pub network_fee_minor: i64,
    /// In units of 10^-[`RECEIVE_SCALE`] of the asset.
    pub receive_minor: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    #[error("the send amount is below the minimum")]
    BelowMinimum { minimum_minor: i64 },
    #[error("the send amount is above the maximum")]
    AboveMaximum { maximum_minor: i64 },
    /// The fees leave nothing, or less than the smallest asset unit.
    #[error("the send amount does not cover the fees")]
    NothingToReceive {
        platform_fee_minor: i64,
        network_fee_minor: i64,
    },
    /// An amount would not fit int64 minor units (decisions §2: 422).
    #[error("the amounts are too large to quote")]
    Overflow,
}

/// The send bounds in minor units of `currency`: the smallest and largest
/// whole amounts inside the configured range.
pub fn bounds(pricing: &Pricing, currency: Currency) -> (i64, i64) {
    let minimum = pricing
        .send_min
        .to_minor_ceil(currency.exponent)
        .unwrap_or(i64::MAX)
        .max(1);
    let maximum = pricing
        .send_max
        .to_minor_floor(currency.exponent)
        .unwrap_or(i64::MAX);
    (minimum, maximum)
}

pub fn price(pricing: &Pricing, input: &PriceInput) -> Result<Price, PricingError> {
    let (minimum_minor, maximum_minor) = bounds(pricing, input.currency);
    if input.send_minor < minimum_minor {
        return Err(PricingError::BelowMinimum { minimum_minor });
    }
    if input.send_minor > maximum_minor {
        return Err(PricingError::AboveMaximum { maximum_minor });
    }
    let platform_fee_minor = platform_fee(pricing, input)?;
    let network_fee_minor = network_fee(pricing, input)?;
    let nothing = PricingError::NothingToReceive {
        platform_fee_minor,
        network_fee_minor,
    };
    let net_minor = i128::from(input.send_minor)
        - i128::from(platform_fee_minor)
        - i128::from(network_fee_minor);
    if net_minor <= 0 {
        return Err(nothing);
    }
    let rate = input.rate.value();
    let numerator = net_minor
        .checked_mul(i128::from(rate.units()))
        .and_then(|n| n.checked_mul(pow10(RECEIVE_SCALE)?))
        .ok_or(PricingError::Overflow)?;
    let denominator = pow10(input.currency.exponent)
        .and_then(|d| d.checked_mul(pow10(rate.scale())?))
        .ok_or(PricingError::Overflow)?;
    // Floor: the payer is never promised a fraction of a unit not delivered.
    let receive_minor =
        i64::try_from(numerator / denominator).map_err(|_| PricingError::Overflow)?;
    if receive_minor <= 0 {
        return Err(nothing);
    }
    Ok(Price {
        platform_fee_minor,
        network_fee_minor,
        receive_minor,
    })
}

fn platform_fee(pricing: &Pricing, input: &PriceInput) -> Result<i64, PricingError> {
    let proportional = i128::from(input.send_minor)
        .checked_mul(i128::from(pricing.fee_bps))
        .and_then(|n| div_half_up(n, BASIS_POINTS))
        .ok_or(PricingError::Overflow)?;
    let minimum = pricing
        .fee_min
        .to_minor_half_up(input.currency.exponent)
        .ok_or(PricingError::Overflow)?;
    // Rounding is monotonic, so rounding each side and then taking the
    // larger equals rounding the larger.
    let fee = proportional.max(i128::from(minimum));
    i64::try_from(fee).map_err(|_| PricingError::Overflow)
}

/// gas x (gas currency -> asset) / (send currency -> asset): the stablecoins
/// are the bridge between the gas currency and the send currency, so one
/// table of currency -> asset rates prices everything.
fn network_fee(pricing: &Pricing, input: &PriceInput) -> Result<i64, PricingError> {
    let gas = pricing.network_fees.of(input.network);
    let (gas_rate, rate) = (input.gas_rate.value(), input.rate.value());
    let numerator = i128::from(gas.units())
        .checked_mul(i128::from(gas_rate.units()))
        .and_then(|n| n.checked_mul(pow10(rate.scale())?))
        .and_then(|n| n.checked_mul(pow10(input.currency.exponent)?))
        .ok_or(PricingError::Overflow)?;
    let denominator = pow10(gas.scale())
        .and_then(|d| d.checked_mul(pow10(gas_rate.scale())?))
        .and_then(|d| d.checked_mul(i128::from(rate.units())))
        .ok_or(PricingError::Overflow)?;
    let fee = div_half_up(numerator, denominator).ok_or(PricingError::Overflow)?;
    i64::try_from(fee).map_err(|_| PricingError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(code: &str) -> Currency {
        Currency::find(code).expect(code)
    }

    fn rate(text: &str) -> Rate {
        Rate::parse(text).expect(text)
    }

    fn input(code: &str, send: &str, network: Network, rate_text: &str) -> PriceInput {
        let currency = currency(code);
        PriceInput {
            currency,
            send_minor: currency.parse(send).expect(send),
            network,
            rate: rate(rate_text),
            gas_rate: rate("1"),
        }
    }

    fn ok(
        platform_fee_minor: i64,
        network_fee_minor: i64,
        receive_minor: i64,
    ) -> Result<Price, PricingError> {
        Ok(Price {
            platform_fee_minor,
            network_fee_minor,
            receive_minor,
        })
    }

    fn nothing(platform_fee_minor: i64, network_fee_minor: i64) -> Result<Price, PricingError> {
        Err(PricingError::NothingToReceive {
            platform_fee_minor,
            network_fee_minor,
        })
    }

    fn below(minimum_minor: i64) -> Result<Price, PricingError> {
        Err(PricingError::BelowMinimum { minimum_minor })
    }

    fn above(maximum_minor: i64) -> Result<Price, PricingError> {
        Err(PricingError::AboveMaximum { maximum_minor })
    }

    /// (currency, send, network, rate, expected) with the default policy
    /// and a gas rate of 1 (USD -> asset).
    #[test]
    fn pricing_table() {
        use Network::{Bsc, Ethereum, Polygon, Tron};
        type Row<'a> = (
            &'a str,
            &'a str,
            Network,
            &'a str,
            Result<Price, PricingError>,
        );
        let cases: [Row<'_>; 22] = [
            // 1% of 100.00 is exactly the 1.00 minimum; tron gas 1.00.
            ("USD", "100.00", Tron, "1", ok(100, 100, 98_000_000)),
            // The minimum fee wins below 100.00; ethereum gas 2.50.
            ("USD", "50.00", Ethereum, "1", ok(100, 250, 46_500_000)),
            // 1.505 rounds half-up to 1.51; polygon gas 0.05.
            ("USD", "150.50", Polygon, "1", ok(151, 5, 148_940_000)),
            // 1.5049 rounds down to 1.50; bsc gas 0.10.
            ("USD", "150.49", Bsc, "1", ok(150, 10, 148_890_000)),
            // 10,000.00 is inside the bounds: 1% is 100.00.
            ("USD", "10000.00", Tron, "1", ok(10_000, 100, 9_899_000_000)),
            // EUR: each network's USD gas converted at 1 / 1.08, half-up:
            // 2.50 -> 2.3148 -> 2.31; 1.00 -> 0.9259 -> 0.93;
            // 0.05 -> 0.0463 -> 0.05; 0.10 -> 0.0926 -> 0.09.
            ("EUR", "100.00", Ethereum, "1.08", ok(100, 231, 104_425_200)),
            ("EUR", "100.00", Tron, "1.08", ok(100, 93, 105_915_600)),
            ("EUR", "20.00", Polygon, "1.08", ok(100, 5, 20_466_000)),
            ("EUR", "20.00", Bsc, "1.08", ok(100, 9, 20_422_800)),
            // GBP 12.34 at 1.27: 0.10 / 1.27 = 0.0787 -> 0.08.
            ("GBP", "12.34", Bsc, "1.27", ok(100, 8, 14_300_200)),
            // JPY has no decimals: the 1.00 minimum is 1 yen, 1% of 10,000
            // is 100; 0.05 USD / 0.0067 = 7.46 -> 7 yen.
            ("JPY", "10000", Polygon, "0.0067", ok(100, 7, 66_283_100)),
            // The receive amount is floored: 8.08 x 1.0866667 = 8.780266936.
            ("EUR", "10.00", Tron, "1.0866667", ok(100, 92, 8_780_266)),
            // Fees equal or exceed the amount: nothing to receive.
            ("USD", "2.00", Tron, "1", nothing(100, 100)),
            ("USD", "1.00", Ethereum, "1", nothing(100, 250)),
            ("JPY", "150", Tron, "0.0067", nothing(2, 149)),
            // One cent left over still buys 0.01 of the asset.
            ("USD", "2.01", Tron, "1", ok(100, 100, 10_000)),
            // Bounds: 1.00 to 10,000.00 of the send currency.
            ("USD", "0.99", Tron, "1", below(100)),
            ("USD", "10000.01", Tron, "1", above(1_000_000)),
            ("JPY", "10001", Tron, "0.0067", above(10_000)),
            ("EUR", "0.50", Polygon, "1.08", below(100)),
            // The smallest amount inside the bounds is 1.00: fees exceed it.
            ("JPY", "1", Polygon, "0.0067", nothing(1, 7)),
            ("GBP", "1.00", Polygon, "1.27", nothing(100, 4)),
        ];
        for (code, send, network, rate_text, expected) in cases {
            let got = price(&Pricing::default(), &input(code, send, network, rate_text));
            assert_eq!(got, expected, "{code} {send} {network:?} at {rate_text}");
        }
    }

    #[test]
    fn the_gas_rate_converts_the_estimate_through_the_asset() {
        // USD -> asset 0.9990, EUR -> asset 1.08: 2.50 USD is
        // 2.50 x 0.999 / 1.08 = 2.3125 EUR, half-up to 2.31.
        let mut priced = input("EUR", "100.00", Network::Ethereum, "1.08");
        priced.gas_rate = rate("0.9990");
        assert_eq!(
            price(&Pricing::default(), &priced).map(|p| p.network_fee_minor),
            Ok(231)
        );
        // 0.10 USD x 1.0854 / 1.08 = 0.1005 EUR, half-up to 0.10.
        let mut priced = input("EUR", "100.00", Network::Bsc, "1.08");
        priced.gas_rate = rate("1.0854");
        assert_eq!(
            price(&Pricing::default(), &priced).map(|p| p.network_fee_minor),
            Ok(10)
        );
    }

    #[test]
    fn a_receive_amount_that_floors_to_zero_is_refused() {
        let pricing = Pricing {
            network_fees: NetworkFees {
                tron: Decimal::ZERO,
                ..NetworkFees::default()
            },
            ..Pricing::default()
        };
        let mut priced = input("JPY", "2", Network::Tron, "0.000000000001");
        priced.gas_rate = rate("1");
        assert_eq!(price(&pricing, &priced), nothing(1, 0));
    }

    #[test]
    fn amounts_past_int64_are_an_overflow_not_a_wrap() {
        let pricing = Pricing {
            send_max: Decimal::new(999_999_999_999_999_999, 0),
            ..Pricing::default()
        };
        let priced = input("USD", "92233720368547758.07", Network::Tron, "1");
        assert_eq!(price(&pricing, &priced), Err(PricingError::Overflow));
    }

    #[test]
    fn the_defaults_are_the_decisions() {
        let pricing = Pricing::default();
        assert_eq!(pricing.fee_bps, 100);
        assert_eq!(pricing.fee_min.to_string(), "1");
        assert_eq!(bounds(&pricing, currency("USD")), (100, 1_000_000));
        assert_eq!(bounds(&pricing, currency("JPY")), (1, 10_000));
        let fees: Vec<String> = Network::ALL
            .into_iter()
            .map(|n| pricing.network_fees.of(n).to_string())
            .collect();
        assert_eq!(fees, ["1", "2.5", "0.05", "0.1"]);
    }
}
