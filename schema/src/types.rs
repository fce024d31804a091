//! Domain value types shared by the store and its callers.

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};

/// The current UTC time, truncated to microseconds so that a value survives a
/// round trip through either database unchanged.
pub fn utc_now() -> NaiveDateTime {
    truncate_micros(Utc::now().naive_utc())
}

pub fn truncate_micros(at: NaiveDateTime) -> NaiveDateTime {
    let nanos = at.nanosecond();
    at.with_nanosecond(nanos - nanos % 1_000).unwrap_or(at)
}

/// Timestamps are stored naive and always mean UTC.
pub fn as_utc(at: NaiveDateTime) -> DateTime<Utc> {
    DateTime::from_naive_utc_and_offset(at, Utc)
}

/// A merchant's standing. Only `Active` may operate on settlements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MerchantStatus {
    Active,
    Suspended,
    Disabled,
}

impl MerchantStatus {
    pub const ALL: [MerchantStatus; 3] = [Self::Active, Self::Suspended, Self::Disabled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
            Self::Disabled => "disabled",
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merchant_status_codes_round_trip() {
        for status in MerchantStatus::ALL {
            assert_eq!(MerchantStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(MerchantStatus::parse("Active"), None);
    }

    #[test]
    fn now_has_no_sub_microsecond_part() {
        assert_eq!(utc_now().nanosecond() % 1_000, 0);
    }
}
