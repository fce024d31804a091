//! What a quote costs and delivers (decisions §3), as pure arithmetic on
//! minor units and exact rates: no I/O, no clock, rates arrive as inputs.
//!
//! - platform_fee = max(minimum fee, send_amount x fee bps), half-up to the
//!   send currency's exponent;
//! - network_fee = the network's gas estimate (in USD) converted to the send
//!   currency, half-up to its exponent;
//! - receive_amount = floor to 6 decimals of (send - fees) x rate.
//!
//! Every intermediate is an exact [`BigDecimal`], and each amount is rounded
//! once, by [`BigDecimal::with_scale_round`].

use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, RoundingMode};
use tern_schema::money::Currency;

use super::decimal::Rate;
use crate::ports::Network;

/// Decimals of a receive amount: the stablecoins' six.
pub const RECEIVE_SCALE: u32 = 6;
/// The currency the gas estimates are configured in.
pub const GAS_CURRENCY: &str = "USD";
/// A basis point is 10^-4.
const BASIS_POINT_SCALE: i64 = 4;
/// The largest fee rate that can still leave something to receive.
pub const FEE_BPS_MAX: u32 = 10_000;

/// Per-network gas estimates, in [`GAS_CURRENCY`] major units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkFees {
    pub tron: BigDecimal,
    pub ethereum: BigDecimal,
    pub polygon: BigDecimal,
    pub bsc: BigDecimal,
}

impl NetworkFees {
    pub fn of(&self, network: Network) -> &BigDecimal {
        match network {
            Network::Tron => &self.tron,
            Network::Ethereum => &self.ethereum,
            Network::Polygon => &self.polygon,
            Network::Bsc => &self.bsc,
        }
    }
}

impl Default for NetworkFees {
    /// decisions §3: tron 1.00, ethereum 2.50, polygon 0.05, bsc 0.10 USD.
    fn default() -> Self {
        NetworkFees {
            tron: decimal(100, 2),
            ethereum: decimal(250, 2),
            polygon: decimal(5, 2),
            bsc: decimal(10, 2),
        }
    }
}

/// The fee and bound policy. Amounts are major units of the send currency
/// (the same figures apply to every currency, as decisions §3 states them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pricing {
    /// Platform fee in basis points of the send amount, at most [`FEE_BPS_MAX`].
    pub fee_bps: u32,
    pub fee_min: BigDecimal,
    pub send_min: BigDecimal,
    pub send_max: BigDecimal,
    pub network_fees: NetworkFees,
}

impl Default for Pricing {
    /// decisions §3: 100 bps, at least 1.00; send 1.00 to 10,000.00.
    fn default() -> Self {
        Pricing {
            fee_bps: 100,
            fee_min: decimal(100, 2),
            send_min: decimal(100, 2),
            send_max: decimal(1_000_000, 2),
            network_fees: NetworkFees::default(),
        }
    }
}

/// `units / 10^scale`, normalised, so a default shows as `1`, not `1.00`.
fn decimal(units: u64, scale: i64) -> BigDecimal {
    BigDecimal::new(BigInt::from(units), scale).normalized()
}

/// One quote to price.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// `minor` minor units of a currency with `exponent` decimals, exactly.
fn major(minor: i128, exponent: u32) -> BigDecimal {
    BigDecimal::new(BigInt::from(minor), i64::from(exponent))
}

/// `value` in minor units of a currency with `exponent` decimals, rounded
/// by `mode`, or `None` past what int64 holds.
fn to_minor(value: &BigDecimal, exponent: u32, mode: RoundingMode) -> Option<i64> {
    let (units, _) = value
        .with_scale_round(i64::from(exponent), mode)
        .into_bigint_and_scale();
    i64::try_from(units).ok()
}

/// The send bounds in minor units of `currency`: the smallest and largest
/// whole amounts inside the configured range.
pub fn bounds(pricing: &Pricing, currency: Currency) -> (i64, i64) {
    let minimum = to_minor(&pricing.send_min, currency.exponent, RoundingMode::Ceiling)
        .unwrap_or(i64::MAX)
        .max(1);
    let maximum =
        to_minor(&pricing.send_max, currency.exponent, RoundingMode::Floor).unwrap_or(i64::MAX);
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
    let received = major(net_minor, input.currency.exponent) * input.rate.value();
    // Floor: the payer is never promised a fraction of a unit not delivered.
    let receive_minor =
        to_minor(&received, RECEIVE_SCALE, RoundingMode::Floor).ok_or(PricingError::Overflow)?;
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
    let exponent = input.currency.exponent;
    let proportional = major(i128::from(input.send_minor), exponent)
        * BigDecimal::new(BigInt::from(pricing.fee_bps), BASIS_POINT_SCALE);
    let fee = proportional.max(pricing.fee_min.clone());
    to_minor(&fee, exponent, RoundingMode::HalfUp).ok_or(PricingError::Overflow)
}

/// gas x (gas currency -> asset) / (send currency -> asset): the stablecoins
/// are the bridge between the gas currency and the send currency, so one
/// table of currency -> asset rates prices everything.
///
/// The one division in pricing. `BigDecimal` divides to its default
/// precision, 100 significant digits, which is exact here: with every
/// operand within what [`super::decimal::parse`] accepts (at most 18 digits
/// and 12 decimals, as every configured rate and default is), a quotient
/// that terminates does so within 78 significant digits, and one that does
/// not lies at least 10^-(43 + exponent) from every half-up boundary, much
/// further than rounding at the 100th digit moves any fee that fits int64.
/// So the fee is the exact fraction rounded once; a test pins the precision.
fn network_fee(pricing: &Pricing, input: &PriceInput) -> Result<i64, PricingError> {
    let gas = pricing.network_fees.of(input.network);
    let fee = gas * input.gas_rate.value() / input.rate.value();
    to_minor(&fee, input.currency.exponent, RoundingMode::HalfUp).ok_or(PricingError::Overflow)
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

    /// Edges where exact decimals and a decimal crate could part ways:
    /// halves, long floors, the largest bound, rates with 12 decimals.
    #[test]
    fn rounding_edges() {
        use Network::{Ethereum, Polygon, Tron};
        type Row<'a> = (&'a str, &'a str, Network, &'a str, (i64, i64, i64));
        let cases: [Row<'_>; 9] = [
            // Exactly half a cent rounds up, where half-even would go to
            // 2.50: 1% of 250.50 is 2.505 -> 2.51.
            ("USD", "250.50", Tron, "1", (251, 100, 246_990_000)),
            // 0.05 / 2 = 0.025 exactly: up to 0.03.
            ("EUR", "100.00", Polygon, "2", (100, 3, 197_940_000)),
            // 0.05 / 0.004 = 12.5 yen exactly: up to 13.
            ("JPY", "10000", Polygon, "0.004", (100, 13, 39_548_000)),
            // Either side of that half by 10^-12 of the rate:
            // 0.05 / 2.000000000001 = 0.02499999999998... -> 0.02;
            // 0.05 / 1.999999999999 = 0.02500000000001... -> 0.03, and
            // 98.97 x 1.999999999999 = 197.939999999901... floors.
            (
                "EUR",
                "100.00",
                Polygon,
                "2.000000000001",
                (100, 2, 197_960_000),
            ),
            (
                "EUR",
                "100.00",
                Polygon,
                "1.999999999999",
                (100, 3, 197_939_999),
            ),
            // The largest JPY amount at a 12-decimal rate: 2.50 / rate =
            // 374.99999998... -> 375 yen; 9,525 x rate = 63.500000003175
            // floors to 63.500000.
            (
                "JPY",
                "10000",
                Ethereum,
                "0.006666666667",
                (100, 375, 63_500_000),
            ),
            // 98.19 x 1.234567890123 = 121.222221131177... floors.
            (
                "USD",
                "100.00",
                Tron,
                "1.234567890123",
                (100, 81, 121_222_221),
            ),
            // 1.00 / 0.333333333333 = 3.000000000003 -> 3.00; the receive
            // amount 9,896.99 x 0.333333333333 = 3,298.99666666337... floors.
            (
                "USD",
                "9999.99",
                Tron,
                "0.333333333333",
                (10_000, 300, 3_298_996_666),
            ),
            // 18 digits, 12 of them decimals: 2.50 / 999,999.99... rounds
            // to no fee at all; 9,900.00 x rate = 9,899,999,999.9999999999901.
            (
                "USD",
                "10000.00",
                Ethereum,
                "999999.999999999999",
                (10_000, 0, 9_899_999_999_999_999),
            ),
        ];
        for (code, send, network, rate_text, (platform, network_fee, receive)) in cases {
            let got = price(&Pricing::default(), &input(code, send, network, rate_text));
            assert_eq!(
                got,
                ok(platform, network_fee, receive),
                "{code} {send} {network:?} at {rate_text}"
            );
        }
    }

    /// The cases the hand-written conversions were tested with, on the
    /// one helper that now rounds every amount.
    #[test]
    fn conversions_to_minor_units_round_as_named() {
        use RoundingMode::{Ceiling, Floor, HalfUp};
        let d = |text: &str| crate::quote::decimal::parse(text).expect(text);
        assert_eq!(to_minor(&d("1.00"), 2, HalfUp), Some(100));
        assert_eq!(to_minor(&d("1.00"), 0, HalfUp), Some(1));
        assert_eq!(to_minor(&d("1.50"), 0, HalfUp), Some(2));
        assert_eq!(to_minor(&d("2.50"), 0, HalfUp), Some(3));
        assert_eq!(to_minor(&d("1.49"), 0, HalfUp), Some(1));
        assert_eq!(to_minor(&d("0.5"), 0, HalfUp), Some(1));
        assert_eq!(to_minor(&d("0.4"), 0, HalfUp), Some(0));
        assert_eq!(to_minor(&d("0.004"), 2, HalfUp), Some(0));
        assert_eq!(to_minor(&d("0.005"), 2, HalfUp), Some(1));
        assert_eq!(to_minor(&d("0.004999999999"), 2, HalfUp), Some(0));
        assert_eq!(to_minor(&d("0"), 2, HalfUp), Some(0));
        assert_eq!(to_minor(&d("1.01"), 0, Ceiling), Some(2));
        assert_eq!(to_minor(&d("2"), 0, Ceiling), Some(2));
        assert_eq!(to_minor(&d("0.000000000001"), 0, Ceiling), Some(1));
        assert_eq!(to_minor(&d("1.99"), 0, Floor), Some(1));
        assert_eq!(to_minor(&d("0.999999999999"), 0, Floor), Some(0));
        assert_eq!(to_minor(&d("10000"), 2, Floor), Some(1_000_000));
        assert_eq!(to_minor(&d("10000.00"), 2, Floor), Some(1_000_000));
        assert_eq!(to_minor(&d("999999999999999999"), 2, Floor), None);
        assert_eq!(
            to_minor(&major(i128::from(i64::MAX), 2), 2, Floor),
            Some(i64::MAX)
        );
        assert_eq!(
            to_minor(&major(i128::from(i64::MAX) + 1, 2), 2, Floor),
            None
        );
    }

    #[test]
    fn division_keeps_enough_digits_to_round_exactly() {
        // network_fee relies on BigDecimal dividing to at least 78
        // significant digits (its default is 100, overridable only by
        // RUST_BIGDECIMAL_DEFAULT_PRECISION at build time).
        assert!(bigdecimal::Context::default().precision().get() >= 78);
        // A quotient that terminates though 1 / rate does not:
        // 0.05 x 0.3 / 0.6 = 0.025 exactly, half-up to 0.03.
        let mut priced = input("EUR", "100.00", Network::Polygon, "0.6");
        priced.gas_rate = rate("0.3");
        assert_eq!(price(&Pricing::default(), &priced), ok(100, 3, 59_382_000));
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
                tron: BigDecimal::from(0),
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
            send_max: BigDecimal::from(999_999_999_999_999_999_u64),
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
