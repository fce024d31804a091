//! Money as int64 minor units, parsed exactly from decimal strings and
//! printed canonically (decisions §2). Never through floating point.

use std::fmt;

use diesel::backend::Backend;
use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::serialize::{self, Output, ToSql};
use diesel::sql_types::BigInt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CurrencyKind {
    Fiat,
    /// An on-chain stablecoin.
    Asset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Currency {
    pub code: &'static str,
    /// Digits after the decimal point; minor units per major unit = 10^exponent.
    pub exponent: u32,
    pub kind: CurrencyKind,
}

/// Every currency and asset Tern moves.
pub const CURRENCIES: [Currency; 6] = [
    Currency {
        code: "USD",
        exponent: 2,
        kind: CurrencyKind::Fiat,
    },
    Currency {
        code: "EUR",
        exponent: 2,
        kind: CurrencyKind::Fiat,
    },
    Currency {
        code: "GBP",
        exponent: 2,
        kind: CurrencyKind::Fiat,
    },
    Currency {
        code: "JPY",
        exponent: 0,
        kind: CurrencyKind::Fiat,
    },
    Currency {
        code: "USDT",
        exponent: 6,
        kind: CurrencyKind::Asset,
    },
    Currency {
        code: "USDC",
        exponent: 6,
        kind: CurrencyKind::Asset,
    },
];

impl Currency {
    pub fn find(code: &str) -> Option<Currency> {
        CURRENCIES
            .into_iter()
            .find(|currency| currency.code == code)
    }

    pub fn fiat() -> impl Iterator<Item = Currency> {
        CURRENCIES
            .into_iter()
            .filter(|currency| currency.kind == CurrencyKind::Fiat)
    }

    /// Minor units of an exact decimal string in this currency.
    pub fn parse(self, text: &str) -> Result<i64, AmountError> {
        parse_minor(text, self.exponent)
    }

    /// The canonical decimal string: exactly `exponent` fractional digits.
    pub fn format(self, minor: i64) -> String {
        format_minor(minor, self.exponent)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("must be a decimal string such as \"10.00\"")]
    NotDecimal,
    #[error("has more than {0} decimal places")]
    TooManyDecimals(u32),
    #[error("must be greater than zero")]
    NotPositive,
    #[error("is too large")]
    Overflow,
}

/// Parses a plain positive decimal (`12`, `12.5`, `0.05`): digits, at most
/// one point with digits on both sides. Signs, exponents, spaces and
/// separators are refused, as are more fractional digits than the exponent.
pub fn parse_minor(text: &str, exponent: u32) -> Result<i64, AmountError> {
    if text.strip_prefix('-').is_some_and(|unsigned| {
        !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    }) {
        return Err(AmountError::NotPositive);
    }
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (text, ""),
    };
    let digits_only = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits_only(whole)
        || !digits_only(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return Err(AmountError::NotDecimal);
    }
    let significant_fraction = fraction.trim_end_matches('0');
    if significant_fraction.len() > exponent as usize {
        return Err(AmountError::TooManyDecimals(exponent));
    }
    if fraction.len() > exponent as usize + 18 {
        return Err(AmountError::TooManyDecimals(exponent));
    }
    let scale = 10i64.checked_pow(exponent).ok_or(AmountError::Overflow)?;
    let whole_value = whole.trim_start_matches('0');
    let whole_minor = if whole_value.is_empty() {
        0
    } else {
        whole_value
            .parse::<i64>()
            .map_err(|_| AmountError::Overflow)?
            .checked_mul(scale)
            .ok_or(AmountError::Overflow)?
    };
    let mut fraction_minor: i64 = 0;
    for position in 0..exponent as usize {
        let digit = significant_fraction
            .as_bytes()
            .get(position)
            .map_or(0, |b| i64::from(b - b'0'));
        fraction_minor = fraction_minor * 10 + digit;
    }
    let minor = whole_minor
        .checked_add(fraction_minor)
        .ok_or(AmountError::Overflow)?;
    if minor == 0 {
        return Err(AmountError::NotPositive);
    }
    Ok(minor)
}

pub fn format_minor(minor: i64, exponent: u32) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let magnitude = minor.unsigned_abs();
    if exponent == 0 {
        return format!("{sign}{magnitude}");
    }
    let scale = 10u64.pow(exponent);
    format!(
        "{sign}{}.{:0width$}",
        magnitude / scale,
        magnitude % scale,
        width = exponent as usize
    )
}

/// An amount in minor units of some currency (cents, or millionths of an
/// asset), as stored (BIGINT on both backends) and as serialized (the same
/// integer). Arithmetic is checked only: an overflow is a `None` the caller
/// answers for, never a wrapped or saturated amount, and there is no
/// conversion to or from floating point.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    AsExpression,
    FromSqlRow,
)]
#[serde(transparent)]
#[diesel(sql_type = BigInt)]
pub struct MinorUnits(i64);

impl MinorUnits {
    pub const ZERO: MinorUnits = MinorUnits(0);

    pub const fn new(minor: i64) -> MinorUnits {
        MinorUnits(minor)
    }

    pub const fn get(self) -> i64 {
        self.0
    }

    pub fn checked_add(self, other: MinorUnits) -> Option<MinorUnits> {
        self.0.checked_add(other.0).map(MinorUnits)
    }

    pub fn checked_sub(self, other: MinorUnits) -> Option<MinorUnits> {
        self.0.checked_sub(other.0).map(MinorUnits)
    }

    /// For running totals that a limit compares against, where the
    /// largest amount already exceeds any limit (spend windows).
    pub fn saturating_add(self, other: MinorUnits) -> MinorUnits {
        MinorUnits(self.0.saturating_add(other.0))
    }

    pub fn saturating_sub(self, other: MinorUnits) -> MinorUnits {
        MinorUnits(self.0.saturating_sub(other.0))
    }

    pub fn checked_neg(self) -> Option<MinorUnits> {
        self.0.checked_neg().map(MinorUnits)
    }

    /// The sum of `amounts`, or `None` if it overflows at any step.
    pub fn checked_sum(amounts: impl IntoIterator<Item = MinorUnits>) -> Option<MinorUnits> {
        amounts
            .into_iter()
            .try_fold(MinorUnits::ZERO, MinorUnits::checked_add)
    }

    pub const fn is_positive(self) -> bool {
        self.0 > 0
    }

    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }
}

/// Widening, for sums that must not overflow (the ledger's checks).
impl From<MinorUnits> for i128 {
    fn from(amount: MinorUnits) -> i128 {
        i128::from(amount.0)
    }
}

impl fmt::Display for MinorUnits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl<DB> ToSql<BigInt, DB> for MinorUnits
where
    DB: Backend,
    i64: ToSql<BigInt, DB>,
{
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
        <i64 as ToSql<BigInt, DB>>::to_sql(&self.0, out)
    }
}

impl<DB> FromSql<BigInt, DB> for MinorUnits
where
    DB: Backend,
    i64: FromSql<BigInt, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
        <i64 as FromSql<BigInt, DB>>::from_sql(bytes).map(MinorUnits)
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd() -> Currency {
        Currency::find("USD").expect("usd")
    }

    #[test]
    fn exact_parsing_table() {
        let cases: [(&str, u32, Result<i64, AmountError>); 24] = [
            ("10", 2, Ok(1_000)),
            ("10.5", 2, Ok(1_050)),
            ("10.50", 2, Ok(1_050)),
            ("10.500", 2, Ok(1_050)),
            ("0.01", 2, Ok(1)),
            ("007.25", 2, Ok(725)),
            ("9.081245", 6, Ok(9_081_245)),
            ("1500", 0, Ok(1_500)),
            ("10.001", 2, Err(AmountError::TooManyDecimals(2))),
            ("1.5", 0, Err(AmountError::TooManyDecimals(0))),
            ("0", 2, Err(AmountError::NotPositive)),
            ("0.00", 2, Err(AmountError::NotPositive)),
            ("-1.00", 2, Err(AmountError::NotPositive)),
            ("1e3", 2, Err(AmountError::NotDecimal)),
            ("1E3", 2, Err(AmountError::NotDecimal)),
            ("+1", 2, Err(AmountError::NotDecimal)),
            ("1.", 2, Err(AmountError::NotDecimal)),
            (".5", 2, Err(AmountError::NotDecimal)),
            ("1,000.00", 2, Err(AmountError::NotDecimal)),
            (" 1", 2, Err(AmountError::NotDecimal)),
            ("", 2, Err(AmountError::NotDecimal)),
            ("NaN", 2, Err(AmountError::NotDecimal)),
            ("92233720368547758.08", 2, Err(AmountError::Overflow)),
            ("99999999999999999999999", 2, Err(AmountError::Overflow)),
        ];
        for (text, exponent, expected) in cases {
            assert_eq!(
                parse_minor(text, exponent),
                expected,
                "{text} with exponent {exponent}"
            );
        }
        assert_eq!(parse_minor("92233720368547758.07", 2), Ok(i64::MAX));
    }

    #[test]
    fn canonical_formatting() {
        assert_eq!(usd().format(1_000), "10.00");
        assert_eq!(usd().format(5), "0.05");
        assert_eq!(usd().format(-1_050), "-10.50");
        assert_eq!(
            Currency::find("USDT").expect("usdt").format(9_081_245),
            "9.081245"
        );
        assert_eq!(Currency::find("JPY").expect("jpy").format(1_500), "1500");
    }

    #[test]
    fn formatting_round_trips_through_parsing() {
        for currency in CURRENCIES {
            for minor in [1, 7, 99, 100, 12_345, 1_000_000, i64::MAX] {
                assert_eq!(
                    currency.parse(&currency.format(minor)),
                    Ok(minor),
                    "{currency} {minor}"
                );
            }
        }
    }

    #[test]
    fn minor_units_check_their_arithmetic() -> Result<(), serde_json::Error> {
        let ten = MinorUnits::new(10);
        assert_eq!(
            ten.checked_add(MinorUnits::new(5)),
            Some(MinorUnits::new(15))
        );
        assert_eq!(
            ten.checked_sub(MinorUnits::new(15)),
            Some(MinorUnits::new(-5))
        );
        assert_eq!(
            MinorUnits::new(i64::MAX).checked_add(MinorUnits::new(1)),
            None
        );
        assert_eq!(
            MinorUnits::new(i64::MIN).checked_sub(MinorUnits::new(1)),
            None
        );
        assert_eq!(MinorUnits::new(i64::MIN).checked_neg(), None);
        assert_eq!(
            MinorUnits::checked_sum([ten, ten, MinorUnits::new(-5)]),
            Some(MinorUnits::new(15))
        );
        assert_eq!(
            MinorUnits::checked_sum([MinorUnits::new(i64::MAX), ten]),
            None
        );
        assert!(ten.is_positive() && !MinorUnits::ZERO.is_positive());
        assert_eq!(serde_json::to_string(&ten)?, "10");
        assert_eq!(
            serde_json::from_str::<MinorUnits>("-7")?,
            MinorUnits::new(-7)
        );
        assert!(serde_json::from_str::<MinorUnits>("1.5").is_err());
        assert_eq!(ten.to_string(), "10");
        Ok(())
    }

    #[test]
    fn fiat_currencies_are_the_four_of_the_decisions() {
        let codes: Vec<&str> = Currency::fiat().map(|c| c.code).collect();
        assert_eq!(codes, ["USD", "EUR", "GBP", "JPY"]);
    }
}
