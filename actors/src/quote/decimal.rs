//! Exact decimals for what quotes are priced with: rates, fee minimums,
//! bounds and gas estimates. `units / 10^scale` in integers, never floats
//! (decisions §2), so a configured "1.08" is exactly 1.08.

use std::fmt;

/// Most fractional digits a configured decimal may have. Twelve covers any
/// rate a fiat-to-stablecoin feed publishes and keeps every product of the
/// pricing arithmetic inside `i128`.
pub const SCALE_MAX: u32 = 12;
/// Most digits in all; with [`SCALE_MAX`] it bounds a value below 10^18.
pub const DIGITS_MAX: usize = 18;

/// A non-negative exact decimal, kept normalised (no trailing fractional
/// zeros), so equal values compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    units: u64,
    scale: u32,
}

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

impl Decimal {
    pub const ZERO: Decimal = Decimal { units: 0, scale: 0 };

    /// `units / 10^scale`, normalised. A scale over [`SCALE_MAX`] is a
    /// programmer error in a constant, caught at compile time there.
    pub const fn new(units: u64, scale: u32) -> Decimal {
        assert!(scale <= SCALE_MAX, "scale over SCALE_MAX");
        let (mut units, mut scale) = (units, scale);
        while scale > 0 && units % 10 == 0 {
            units /= 10;
            scale -= 1;
        }
        Decimal { units, scale }
    }

    /// Parses digits with at most one point, digits on both sides of it.
    /// Signs, exponents and separators are refused.
    pub fn parse(text: &str) -> Result<Decimal, DecimalError> {
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !digits(whole)
            || !digits(fraction)
            || (text.contains('.') && fraction.is_empty())
        {
            return Err(DecimalError::NotDecimal(text.to_owned()));
        }
        let fraction = fraction.trim_end_matches('0');
        let whole = whole.trim_start_matches('0');
        if fraction.len() > SCALE_MAX as usize {
            return Err(DecimalError::TooManyDecimals(text.to_owned()));
        }
        if whole.len() + fraction.len() > DIGITS_MAX {
            return Err(DecimalError::TooLong(text.to_owned()));
        }
        let joined = format!("{whole}{fraction}");
        let units = if joined.is_empty() {
            0
        } else {
            joined
                .parse::<u64>()
                .map_err(|_| DecimalError::TooLong(text.to_owned()))?
        };
        // The length checks above keep the scale within SCALE_MAX.
        Ok(Decimal::new(units, fraction.len() as u32))
    }

    pub fn units(self) -> u64 {
        self.units
    }

    pub fn scale(self) -> u32 {
        self.scale
    }

    pub fn is_zero(self) -> bool {
        self.units == 0
    }

    /// The value in minor units of a currency with `exponent` decimals,
    /// rounded up: the smallest amount that is at least this value.
    pub fn to_minor_ceil(self, exponent: u32) -> Option<i64> {
        let (numerator, denominator) = self.over(exponent)?;
        i64::try_from(div_ceil(numerator, denominator)).ok()
    }

    /// The value in minor units, rounded down: the largest amount that is at
    /// most this value.
    pub fn to_minor_floor(self, exponent: u32) -> Option<i64> {
        let (numerator, denominator) = self.over(exponent)?;
        i64::try_from(numerator / denominator).ok()
    }

    /// The value in minor units, rounded half-up.
    pub fn to_minor_half_up(self, exponent: u32) -> Option<i64> {
        let (numerator, denominator) = self.over(exponent)?;
        i64::try_from(div_half_up(numerator, denominator)?).ok()
    }

    /// `value * 10^exponent` as a fraction.
    fn over(self, exponent: u32) -> Option<(i128, i128)> {
        let numerator = i128::from(self.units).checked_mul(pow10(exponent)?)?;
        Some((numerator, pow10(self.scale)?))
    }
}

impl fmt::Display for Decimal {
    /// The shortest exact form: `1`, `1.08`, `0.0067`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scale == 0 {
            return write!(f, "{}", self.units);
        }
        let scale = 10u64.pow(self.scale);
        write!(
            f,
            "{}.{:0width$}",
            self.units / scale,
            self.units % scale,
            width = self.scale as usize
        )
    }
}

/// A positive exact rate: how many units of an asset one major unit of a
/// currency buys. Never zero, so it can always divide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate(Decimal);

impl Rate {
    /// A rate constant; zero fails to compile where it is used in a const.
    pub const fn new(units: u64, scale: u32) -> Rate {
        assert!(units > 0, "a rate is positive");
        Rate(Decimal::new(units, scale))
    }

    pub fn parse(text: &str) -> Result<Rate, DecimalError> {
        let value = Decimal::parse(text)?;
        if value.is_zero() {
            return Err(DecimalError::NotPositive(text.to_owned()));
        }
        Ok(Rate(value))
    }

    pub fn value(self) -> Decimal {
        self.0
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// 10^exponent, or `None` past what i128 holds.
pub(crate) fn pow10(exponent: u32) -> Option<i128> {
    10i128.checked_pow(exponent)
}

/// Non-negative numerator, positive denominator.
pub(crate) fn div_ceil(numerator: i128, denominator: i128) -> i128 {
    numerator / denominator + i128::from(numerator % denominator != 0)
}

/// Non-negative numerator, positive denominator: halves round away from zero.
pub(crate) fn div_half_up(numerator: i128, denominator: i128) -> Option<i128> {
    let twice = numerator.checked_mul(2)?.checked_add(denominator)?;
    Some(twice / denominator.checked_mul(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let parsed = Decimal::parse(text).map(|d| (d.units(), d.scale()));
            assert_eq!(parsed.map_err(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn displays_the_shortest_exact_form() {
        for (text, shown) in [
            ("1.0", "1"),
            ("1.08", "1.08"),
            ("0.0067", "0.0067"),
            ("10000.00", "10000"),
            ("0.05", "0.05"),
        ] {
            assert_eq!(Decimal::parse(text).expect(text).to_string(), shown);
        }
    }

    #[test]
    fn conversions_to_minor_units_round_as_named() {
        let d = |text: &str| Decimal::parse(text).expect(text);
        assert_eq!(d("1.00").to_minor_half_up(2), Some(100));
        assert_eq!(d("1.00").to_minor_half_up(0), Some(1));
        assert_eq!(d("1.50").to_minor_half_up(0), Some(2));
        assert_eq!(d("1.49").to_minor_half_up(0), Some(1));
        assert_eq!(d("1.01").to_minor_ceil(0), Some(2));
        assert_eq!(d("1.99").to_minor_floor(0), Some(1));
        assert_eq!(d("10000.00").to_minor_floor(2), Some(1_000_000));
        assert_eq!(d("999999999999999999").to_minor_floor(2), None);
    }

    #[test]
    fn rates_are_positive() {
        assert!(Rate::parse("0").is_err());
        assert!(Rate::parse("0.000").is_err());
        assert_eq!(
            Rate::parse("1.08").map(|r| r.to_string()).ok(),
            Some("1.08".into())
        );
        assert_eq!(Rate::new(108, 2), Rate::parse("1.080").expect("rate"));
    }

    #[test]
    fn half_up_rounds_halves_away_from_zero() {
        assert_eq!(div_half_up(5, 10), Some(1));
        assert_eq!(div_half_up(4, 10), Some(0));
        assert_eq!(div_half_up(15, 10), Some(2));
        assert_eq!(div_half_up(0, 7), Some(0));
        assert_eq!(div_ceil(10, 5), 2);
        assert_eq!(div_ceil(11, 5), 3);
    }
}
