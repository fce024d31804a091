//! Domain value types shared by the store and its callers.

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};

pub use crate::vocabulary::MerchantStatus;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_no_sub_microsecond_part() {
        assert_eq!(utc_now().nanosecond() % 1_000, 0);
    }
}
