//! How an authorization request is decided (decisions §10): the card's
//! controls, its spend windows and the decline reasons.

use chrono::{Datelike, NaiveDate, NaiveDateTime};

use tern_schema::money::MinorUnits;

use super::status::Status;

pub use tern_schema::vocabulary::{Channel, Decline};

/// The card's controls (decisions §10), as its row stores them. `None`
/// amounts are no limit.
pub use tern_schema::models::CardLimits as Limits;

/// Largest spend limit accepted (decisions §10).
pub const LIMIT_MAX_MINOR: MinorUnits = MinorUnits::new(1_000_000_000_000);

/// Why a set of limits is refused, per field (422 with field errors).
pub fn check_limits(limits: &Limits) -> Vec<(&'static str, String)> {
    let mut errors = Vec::new();
    let fields = [
        ("per_transaction_minor", limits.per_transaction_minor),
        ("daily_spend_minor", limits.daily_spend_minor),
        ("monthly_spend_minor", limits.monthly_spend_minor),
        ("atm_daily_minor", limits.atm_daily_minor),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            if !(MinorUnits::ZERO..=LIMIT_MAX_MINOR).contains(&value) {
                errors.push((field, format!("must be between 0 and {LIMIT_MAX_MINOR}")));
            }
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    if let (Some(per), Some(daily)) = (limits.per_transaction_minor, limits.daily_spend_minor) {
        if per > daily {
            errors.push((
                "per_transaction_minor",
                "must not exceed daily_spend_minor".to_owned(),
            ));
        }
    }
    if let (Some(daily), Some(monthly)) = (limits.daily_spend_minor, limits.monthly_spend_minor) {
        if daily > monthly {
            errors.push((
                "daily_spend_minor",
                "must not exceed monthly_spend_minor".to_owned(),
            ));
        }
    }
    if let (Some(per), Some(monthly), None) = (
        limits.per_transaction_minor,
        limits.monthly_spend_minor,
        limits.daily_spend_minor,
    ) {
        if per > monthly {
            errors.push((
                "per_transaction_minor",
                "must not exceed monthly_spend_minor".to_owned(),
            ));
        }
    }
    errors
}

/// What the card's approved authorizations add up to in the current UTC
/// day and month: what the daily, monthly and ATM limits count. The actor
/// keeps it in memory (it is the only writer) and rebuilds it from the
/// database at activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spend {
    pub day: NaiveDate,
    pub day_minor: MinorUnits,
    pub atm_day_minor: MinorUnits,
    pub month_minor: MinorUnits,
}

impl Spend {
    pub fn empty(at: NaiveDateTime) -> Spend {
        Spend {
            day: at.date(),
            day_minor: MinorUnits::ZERO,
            atm_day_minor: MinorUnits::ZERO,
            month_minor: MinorUnits::ZERO,
        }
    }

    /// The windows as seen at `at`: a new day (or month) starts from zero.
    pub fn at(self, at: NaiveDateTime) -> Spend {
        let today = at.date();
        if today == self.day {
            return self;
        }
        let same_month = today.year() == self.day.year() && today.month() == self.day.month();
        Spend {
            day: today,
            day_minor: MinorUnits::ZERO,
            atm_day_minor: MinorUnits::ZERO,
            month_minor: if same_month {
                self.month_minor
            } else {
                MinorUnits::ZERO
            },
        }
    }

    /// The windows after approving `amount` on `channel` at `at`.
    pub fn add(self, at: NaiveDateTime, amount_minor: MinorUnits, channel: Channel) -> Spend {
        let mut next = self.at(at);
        next.day_minor = next.day_minor.saturating_add(amount_minor);
        next.month_minor = next.month_minor.saturating_add(amount_minor);
        if channel == Channel::Atm {
            next.atm_day_minor = next.atm_day_minor.saturating_add(amount_minor);
        }
        next
    }
}

/// The first instant of `at`'s UTC day and month.
pub fn window_starts(at: NaiveDateTime) -> (NaiveDateTime, NaiveDateTime) {
    let day = at.date();
    let month = day.with_day(1).unwrap_or(day);
    (
        day.and_hms_opt(0, 0, 0).unwrap_or(at),
        month.and_hms_opt(0, 0, 0).unwrap_or(at),
    )
}

/// An authorization request as the card sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization {
    pub amount_minor: MinorUnits,
    pub currency: String,
    pub channel: Channel,
    /// ISO 3166-1 alpha-2 of the merchant.
    pub country: String,
    pub at: NaiveDateTime,
}

/// Countries where a card of `currency` is domestic; elsewhere is
/// international. A currency not listed has no domestic country.
pub fn domestic_countries(currency: &str) -> &'static [&'static str] {
    match currency {
        "USD" => &["US"],
        "GBP" => &["GB"],
        "JPY" => &["JP"],
        "EUR" => &[
            "AT", "BE", "HR", "CY", "EE", "FI", "FR", "DE", "GR", "IE", "IT", "LV", "LT", "LU",
            "MT", "NL", "PT", "SK", "SI", "ES",
        ],
        _ => &[],
    }
}

/// Decides everything but the funds, which only the ledger can (the hold
/// either fits the available balance or is refused in the same statement).
/// The checks run in a fixed order so the reason is predictable: status,
/// request sanity, channels, then limits. An amount equal to a limit passes.
pub fn decide(
    status: Status,
    card_currency: &str,
    limits: &Limits,
    spend: Spend,
    request: &Authorization,
) -> Result<(), Decline> {
    match status {
        Status::Active => {}
        Status::Frozen => return Err(Decline::CardFrozen),
        Status::Blocked => return Err(Decline::CardBlocked),
        Status::Closed => return Err(Decline::CardClosed),
        Status::Issuing => return Err(Decline::CardNotIssued),
    }
    if request.currency != card_currency {
        return Err(Decline::CurrencyMismatch);
    }
    if !request.amount_minor.is_positive() {
        return Err(Decline::InvalidAmount);
    }
    match request.channel {
        Channel::Online if !limits.online_enabled => return Err(Decline::OnlineDisabled),
        Channel::Atm if !limits.atm_enabled => return Err(Decline::AtmDisabled),
        _ => {}
    }
    if !limits.international_enabled
        && !domestic_countries(card_currency).contains(&request.country.as_str())
    {
        return Err(Decline::InternationalDisabled);
    }
    let amount = request.amount_minor;
    let over =
        |limit: Option<MinorUnits>, total: MinorUnits| limit.is_some_and(|limit| total > limit);
    if over(limits.per_transaction_minor, amount) {
        return Err(Decline::PerTransactionLimit);
    }
    let spend = spend.at(request.at);
    if over(
        limits.daily_spend_minor,
        spend.day_minor.saturating_add(amount),
    ) {
        return Err(Decline::DailyLimit);
    }
    if over(
        limits.monthly_spend_minor,
        spend.month_minor.saturating_add(amount),
    ) {
        return Err(Decline::MonthlyLimit);
    }
    if request.channel == Channel::Atm
        && over(
            limits.atm_daily_minor,
            spend.atm_day_minor.saturating_add(amount),
        )
    {
        return Err(Decline::AtmDailyLimit);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use Status as S;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    fn request(amount_minor: i64, channel: Channel, country: &str) -> Authorization {
        Authorization {
            amount_minor: MinorUnits::new(amount_minor),
            currency: "USD".into(),
            channel,
            country: country.into(),
            at: at("2026-11-25 12:00:00"),
        }
    }

    #[test]
    fn each_decline_reason_has_its_row() {
        let now = at("2026-11-25 12:00:00");
        let spent = Spend {
            day: now.date(),
            day_minor: MinorUnits::new(900),
            atm_day_minor: MinorUnits::new(100),
            month_minor: MinorUnits::new(4_000),
        };
        let limited = Limits {
            per_transaction_minor: Some(MinorUnits::new(500)),
            daily_spend_minor: Some(MinorUnits::new(1_000)),
            monthly_spend_minor: Some(MinorUnits::new(4_200)),
            atm_daily_minor: Some(MinorUnits::new(150)),
            ..Limits::OPEN
        };
        let pos = |amount| request(amount, Channel::Pos, "US");
        type Case = (Status, Limits, Spend, Authorization, Result<(), Decline>);
        let cases: Vec<Case> = vec![
            (S::Active, Limits::OPEN, spent, pos(100), Ok(())),
            (
                S::Frozen,
                Limits::OPEN,
                spent,
                pos(100),
                Err(Decline::CardFrozen),
            ),
            (
                S::Blocked,
                Limits::OPEN,
                spent,
                pos(100),
                Err(Decline::CardBlocked),
            ),
            (
                S::Closed,
                Limits::OPEN,
                spent,
                pos(100),
                Err(Decline::CardClosed),
            ),
            (
                S::Issuing,
                Limits::OPEN,
                spent,
                pos(100),
                Err(Decline::CardNotIssued),
            ),
            (
                S::Active,
                Limits::OPEN,
                spent,
                Authorization {
                    currency: "EUR".into(),
                    ..pos(100)
                },
                Err(Decline::CurrencyMismatch),
            ),
            (
                S::Active,
                Limits::OPEN,
                spent,
                pos(0),
                Err(Decline::InvalidAmount),
            ),
            (
                S::Active,
                Limits {
                    online_enabled: false,
                    ..Limits::OPEN
                },
                spent,
                request(100, Channel::Online, "US"),
                Err(Decline::OnlineDisabled),
            ),
            (
                S::Active,
                Limits {
                    atm_enabled: false,
                    ..Limits::OPEN
                },
                spent,
                request(100, Channel::Atm, "US"),
                Err(Decline::AtmDisabled),
            ),
            (
                S::Active,
                Limits {
                    international_enabled: false,
                    ..Limits::OPEN
                },
                spent,
                request(100, Channel::Pos, "FR"),
                Err(Decline::InternationalDisabled),
            ),
            (
                S::Active,
                Limits {
                    international_enabled: false,
                    ..Limits::OPEN
                },
                spent,
                pos(100),
                Ok(()),
            ),
            // Equal to a limit passes; one more does not.
            (S::Active, limited, Spend::empty(now), pos(500), Ok(())),
            (
                S::Active,
                limited,
                Spend::empty(now),
                pos(501),
                Err(Decline::PerTransactionLimit),
            ),
            (S::Active, limited, spent, pos(100), Ok(())),
            (
                S::Active,
                limited,
                spent,
                pos(101),
                Err(Decline::DailyLimit),
            ),
            (
                S::Active,
                Limits {
                    daily_spend_minor: None,
                    ..limited
                },
                spent,
                pos(201),
                Err(Decline::MonthlyLimit),
            ),
            (
                S::Active,
                limited,
                spent,
                request(50, Channel::Atm, "US"),
                Ok(()),
            ),
            (
                S::Active,
                limited,
                spent,
                request(51, Channel::Atm, "US"),
                Err(Decline::AtmDailyLimit),
            ),
        ];
        for (status, limits, spend, request, expected) in cases {
            assert_eq!(
                decide(status, "USD", &limits, spend, &request),
                expected,
                "{status:?} {limits:?} {spend:?} {request:?}"
            );
        }
    }

    #[test]
    fn a_new_day_starts_the_daily_window_and_a_new_month_the_monthly_one() {
        let spend = Spend::empty(at("2026-11-30 10:00:00")).add(
            at("2026-11-30 10:00:00"),
            MinorUnits::new(700),
            Channel::Atm,
        );
        assert_eq!(
            (
                spend.day_minor.get(),
                spend.atm_day_minor.get(),
                spend.month_minor.get()
            ),
            (700, 700, 700)
        );
        let next_day = spend.at(at("2026-11-30 23:59:59"));
        assert_eq!(next_day, spend);
        let december = spend.at(at("2026-12-01 00:00:00"));
        assert_eq!(
            (
                december.day_minor.get(),
                december.atm_day_minor.get(),
                december.month_minor.get()
            ),
            (0, 0, 0)
        );
        let same_month = Spend::empty(at("2026-11-02 10:00:00"))
            .add(
                at("2026-11-02 10:00:00"),
                MinorUnits::new(300),
                Channel::Pos,
            )
            .at(at("2026-11-03 00:00:00"));
        assert_eq!(
            (same_month.day_minor.get(), same_month.month_minor.get()),
            (0, 300)
        );
        // A window past its day counts nothing against today's limit.
        let limited = Limits {
            daily_spend_minor: Some(MinorUnits::new(1_000)),
            ..Limits::OPEN
        };
        let yesterday = Spend {
            day: at("2026-11-24 00:00:00").date(),
            day_minor: MinorUnits::new(1_000),
            atm_day_minor: MinorUnits::ZERO,
            month_minor: MinorUnits::new(1_000),
        };
        assert_eq!(
            decide(
                S::Active,
                "USD",
                &limited,
                yesterday,
                &request(1_000, Channel::Pos, "US")
            ),
            Ok(())
        );
    }

    #[test]
    fn window_starts_are_midnight_and_the_first_of_the_month() {
        let (day, month) = window_starts(at("2026-11-25 13:14:15"));
        assert_eq!(day, at("2026-11-25 00:00:00"));
        assert_eq!(month, at("2026-11-01 00:00:00"));
    }

    #[test]
    fn limits_are_bounded_and_ordered() {
        let ok = Limits {
            per_transaction_minor: Some(MinorUnits::new(100)),
            daily_spend_minor: Some(MinorUnits::new(100)),
            monthly_spend_minor: Some(MinorUnits::new(100)),
            atm_daily_minor: Some(MinorUnits::ZERO),
            ..Limits::OPEN
        };
        assert!(check_limits(&ok).is_empty());
        let fields = |limits: Limits| {
            check_limits(&limits)
                .into_iter()
                .map(|(field, _)| field)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fields(Limits {
                per_transaction_minor: Some(MinorUnits::new(-1)),
                atm_daily_minor: Some(MinorUnits::new(LIMIT_MAX_MINOR.get() + 1)),
                ..Limits::OPEN
            }),
            ["per_transaction_minor", "atm_daily_minor"]
        );
        assert_eq!(
            fields(Limits {
                per_transaction_minor: Some(LIMIT_MAX_MINOR),
                ..Limits::OPEN
            }),
            Vec::<&str>::new()
        );
        assert_eq!(
            fields(Limits {
                per_transaction_minor: Some(MinorUnits::new(200)),
                daily_spend_minor: Some(MinorUnits::new(100)),
                ..Limits::OPEN
            }),
            ["per_transaction_minor"]
        );
        assert_eq!(
            fields(Limits {
                daily_spend_minor: Some(MinorUnits::new(200)),
                monthly_spend_minor: Some(MinorUnits::new(100)),
                ..Limits::OPEN
            }),
            ["daily_spend_minor"]
        );
        assert_eq!(
            fields(Limits {
                per_transaction_minor: Some(MinorUnits::new(200)),
                monthly_spend_minor: Some(MinorUnits::new(100)),
                ..Limits::OPEN
            }),
            ["per_transaction_minor"]
        );
    }
}
