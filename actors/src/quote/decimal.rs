//! Exact decimals for what quotes are priced with: rates, fee minimums,
//! bounds and gas estimates, all [`BigDecimal`], never floats (decisions
//! §2), so a configured "1.08" is exactly 1.08. The arithmetic and rounding
//! are the crate's; what is Tern's own here is the form a configured
//! decimal may take ([`parse`]) and [`Rate`], a decimal known to be positive.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, Zero};

/// Most fractional digits a configured decimal may have. Twelve covers any
/// rate a fiat-to-stablecoin feed publishes.
pub const SCALE_MAX: u32 = 12;
/// Most significant digits in all; with [`SCALE_MAX`] it bounds a value
/// below 10^18, and bounds the work of pricing with it.
pub const DIGITS_MAX: usize = 18;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("`{0}` is not a plain decimal such as 1.08")]
    NotDecimal(String),
    #[error("`{0}` has more than {SCALE_MAX} decimal places")]
    TooManyDecimals(String),
    #[error("`{0}` has more than {DIGITS_MAX} digits")]
    TooLong(String),
    #[error("`{0}` must be greater than zero")]
    NotPositive(String),
}

/// Parses a plain non-negative decimal: digits with at most one point,
/// digits on both sides of it. Signs, exponents and separators are
/// refused, though [`BigDecimal`]'s own parser would take some of them.
/// The value comes back normalised (no trailing fractional zeros).
pub fn parse(text: &str) -> Result<BigDecimal, DecimalError> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return Err(DecimalError::NotDecimal(text.to_owned()));
    }
    let significant_fraction = fraction.trim_end_matches('0');
    let significant_whole = whole.trim_start_matches('0');
    if significant_fraction.len() > SCALE_MAX as usize {
        return Err(DecimalError::TooManyDecimals(text.to_owned()));
    }
    if significant_whole.len() + significant_fraction.len() > DIGITS_MAX {
        return Err(DecimalError::TooLong(text.to_owned()));
    }
    BigDecimal::from_str(text)
        .map(|value| value.normalized())
        .map_err(|_| DecimalError::NotDecimal(text.to_owned()))
}

/// A positive exact rate: how many units of an asset one major unit of a
/// currency buys. Never zero, so it can always divide; kept normalised, so
/// it displays in its shortest exact form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rate(BigDecimal);

impl Rate {
    /// `units / 10^scale`: positive by its type. A constant past what
    /// [`parse`] accepts is a programmer error: pricing's exactness relies
    /// on those bounds.
    pub fn new(units: NonZeroU64, scale: u32) -> Rate {
        assert!(
            scale <= SCALE_MAX && units.get() < 10u64.pow(DIGITS_MAX as u32),
            "a rate constant within {DIGITS_MAX} digits and {SCALE_MAX} decimals"
        );
        Rate(BigDecimal::new(BigInt::from(units.get()), i64::from(scale)).normalized())
    }

    /// A configured rate: a plain decimal ([`parse`]) greater than zero.
    pub fn parse(text: &str) -> Result<Rate, DecimalError> {
        let value = parse(text)?;
        if value.is_zero() {
            return Err(DecimalError::NotPositive(text.to_owned()));
        }
        Ok(Rate(value))
    }

    pub fn value(&self) -> &BigDecimal {
        &self.0
    }
}

impl fmt::Display for Rate {
    /// The shortest exact form in plain digits: `1`, `1.08`, `0.0067`,
    /// `10000`, never `1E+4` or `1E-12` as `BigDecimal`'s own Display may.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_plain_string(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(units: u64) -> NonZeroU64 {
        NonZeroU64::new(units).expect("a positive test constant")
    }

    #[test]
    fn parsing_table() {
        // (text, Ok((units, scale)) or refused)
        type Parsed = Result<(u64, u32), ()>;
        let cases: [(&str, Parsed); 16] = [
            ("1", Ok((1, 0))),
            ("1.0", Ok((1, 0))),
            ("1.08", Ok((108, 2))),
            ("1.080", Ok((108, 2))),
            ("0.0067", Ok((67, 4))),
            ("007.5", Ok((75, 1))),
            ("0", Ok((0, 0))),
            ("0.000000000001", Ok((1, 12))),
            ("0.0000000000001", Err(())),
            ("1234567890123456789", Err(())),
            ("-1", Err(())),
            ("+1", Err(())),
            ("1e3", Err(())),
            ("1.", Err(())),
            (".5", Err(())),
            ("1,000", Err(())),
        ];
        for (text, expected) in cases {
            // The representation too: normalised, as the old type kept it.
            let parsed = parse(text).map(|value| value.as_bigint_and_exponent());
            let expected = expected.map(|(units, scale)| (BigInt::from(units), i64::from(scale)));
            assert_eq!(parsed.map_err(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn refusals_say_why() {
        let refused = |text: &str| parse(text).map_err(|e| e.to_string()).err();
        for (text, message) in [
            ("1e3", "`1e3` is not a plain decimal such as 1.08"),
            ("1E3", "`1E3` is not a plain decimal such as 1.08"),
            ("-1.08", "`-1.08` is not a plain decimal such as 1.08"),
            ("+1", "`+1` is not a plain decimal such as 1.08"),
            ("", "`` is not a plain decimal such as 1.08"),
            (".5", "`.5` is not a plain decimal such as 1.08"),
            ("1.", "`1.` is not a plain decimal such as 1.08"),
            ("1.2.3", "`1.2.3` is not a plain decimal such as 1.08"),
            (" 1", "` 1` is not a plain decimal such as 1.08"),
            ("NaN", "`NaN` is not a plain decimal such as 1.08"),
            ("inf", "`inf` is not a plain decimal such as 1.08"),
            (
                "1.0000000000001",
                "`1.0000000000001` has more than 12 decimal places",
            ),
            (
                "1234567890123456789",
                "`1234567890123456789` has more than 18 digits",
            ),
        ] {
            assert_eq!(refused(text).as_deref(), Some(message), "{text}");
        }
        // Zeros that carry nothing do not count against the limits.
        assert!(parse("0001.000000000000000").is_ok());
        assert!(parse("123456789012345678").is_ok());
        assert!(parse("123456.123456789012").is_ok());
        assert!(parse("1234567.123456789012").is_err());
    }

    #[test]
    fn rates_display_the_shortest_exact_form_in_plain_digits() {
        for (text, shown) in [
            ("1.0", "1"),
            ("1", "1"),
            ("1.08", "1.08"),
            ("1.080", "1.08"),
            ("0.0067", "0.0067"),
            ("10000.00", "10000"),
            ("10000", "10000"),
            ("100000000000000000", "100000000000000000"),
            ("0.05", "0.05"),
            ("0.000000000001", "0.000000000001"),
            ("0.000001", "0.000001"),
            ("123456.123456789012", "123456.123456789012"),
            ("1.0866667", "1.0866667"),
        ] {
            assert_eq!(Rate::parse(text).expect(text).to_string(), shown);
        }
        assert_eq!(Rate::new(units(10_000), 0).to_string(), "10000");
        assert_eq!(Rate::new(units(1_000_000), 2).to_string(), "10000");
        assert_eq!(Rate::new(units(1), 12).to_string(), "0.000000000001");
    }

    #[test]
    fn rates_are_positive() {
        assert_eq!(
            Rate::parse("0").map_err(|e| e.to_string()),
            Err("`0` must be greater than zero".into())
        );
        assert!(Rate::parse("0.000").is_err());
        assert!(Rate::parse("-1").is_err());
        assert_eq!(
            Rate::parse("1.08").map(|r| r.to_string()).ok(),
            Some("1.08".into())
        );
        assert_eq!(
            Rate::new(units(108), 2),
            Rate::parse("1.080").expect("rate")
        );
    }
}
