//! A card's amount limits come from two places (decisions §10): the values
//! its merchant set, and the program's defaults for the rest. Only the
//! merchant's values must be in order (per_transaction <= daily <= monthly,
//! else 422): a default never makes a PATCH fail. The defaults are fitted
//! between the merchant's values instead, so the effective per-transaction
//! limit is never above the daily one, nor the daily above the monthly.
//!
//! The card row holds the effective values (what authorizations are decided
//! against) and, in `limits_set`, which of them the merchant set.

use tern_schema::models::CardRow;
use tern_schema::money::MinorUnits;

use super::machine::{check_limits, Limits};
use super::messages::LimitsPatch;
use super::program;

/// One of a card's amount limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    PerTransaction,
    Daily,
    Monthly,
    AtmDaily,
}

impl Amount {
    pub const ALL: [Amount; 4] = [
        Amount::PerTransaction,
        Amount::Daily,
        Amount::Monthly,
        Amount::AtmDaily,
    ];
    /// The limits that must be in order, smallest first.
    const CHAIN: [Amount; 3] = [Amount::PerTransaction, Amount::Daily, Amount::Monthly];

    /// The field's name in the API and the column's in the database.
    pub fn name(self) -> &'static str {
        match self {
            Amount::PerTransaction => "per_transaction_minor",
            Amount::Daily => "daily_spend_minor",
            Amount::Monthly => "monthly_spend_minor",
            Amount::AtmDaily => "atm_daily_minor",
        }
    }

    fn of(self, limits: &Limits) -> Option<MinorUnits> {
        match self {
            Amount::PerTransaction => limits.per_transaction_minor,
            Amount::Daily => limits.daily_spend_minor,
            Amount::Monthly => limits.monthly_spend_minor,
            Amount::AtmDaily => limits.atm_daily_minor,
        }
    }

    fn put(self, limits: &mut Limits, value: Option<MinorUnits>) {
        let field = match self {
            Amount::PerTransaction => &mut limits.per_transaction_minor,
            Amount::Daily => &mut limits.daily_spend_minor,
            Amount::Monthly => &mut limits.monthly_spend_minor,
            Amount::AtmDaily => &mut limits.atm_daily_minor,
        };
        *field = value;
    }

    fn in_patch(self, patch: &LimitsPatch) -> bool {
        match self {
            Amount::PerTransaction => patch.per_transaction_minor.is_some(),
            Amount::Daily => patch.daily_spend_minor.is_some(),
            Amount::Monthly => patch.monthly_spend_minor.is_some(),
            Amount::AtmDaily => patch.atm_daily_minor.is_some(),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The amount limits the merchant set; a value set to `null` (no limit)
/// counts as set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetByMerchant([bool; 4]);

impl SetByMerchant {
    /// From the `limits_set` column; unknown names are ignored.
    pub fn parse(column: &str) -> SetByMerchant {
        let mut set = SetByMerchant::default();
        for name in column.split(',').map(str::trim) {
            if let Some(amount) = Amount::ALL.into_iter().find(|a| a.name() == name) {
                set.0[amount.index()] = true;
            }
        }
        set
    }

    /// The `limits_set` column: names in a fixed order.
    pub fn column(self) -> String {
        Amount::ALL
            .into_iter()
            .filter(|amount| self.has(*amount))
            .map(Amount::name)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn has(self, amount: Amount) -> bool {
        self.0[amount.index()]
    }

    fn with(mut self, amount: Amount) -> SetByMerchant {
        self.0[amount.index()] = true;
        self
    }
}

/// Field errors of a refused patch (422).
pub type LimitErrors = Vec<(&'static str, String)>;

/// The effective limits after `patch` and which the merchant has now set.
/// `current` are the effective limits before; a value the merchant set is
/// kept there unchanged, so it is read back from them.
pub fn patched(
    current: &Limits,
    set: SetByMerchant,
    patch: &LimitsPatch,
    defaults: &Limits,
) -> Result<(Limits, SetByMerchant), LimitErrors> {
    let merged = patch.merged(*current);
    let set = Amount::ALL
        .into_iter()
        .filter(|amount| amount.in_patch(patch))
        .fold(set, SetByMerchant::with);
    let mut merchants = merged;
    for amount in Amount::ALL {
        if !set.has(amount) {
            amount.put(&mut merchants, None);
        }
    }
    let errors = check_limits(&merchants);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((effective(&merged, set, defaults), set))
}

/// `merged` with every amount the merchant did not set taken from
/// `defaults`, fitted between the merchant's values in the chain: raised to
/// the largest set limit below it, lowered to the smallest set limit above
/// it (`None` is no limit and bounds nothing). The merchant's values are in
/// order, so the bounds never cross and the result is in order too.
pub fn effective(merged: &Limits, set: SetByMerchant, defaults: &Limits) -> Limits {
    let mut limits = *merged;
    for amount in Amount::ALL {
        if set.has(amount) {
            continue;
        }
        let mut value = amount.of(defaults);
        if let Some(at) = Amount::CHAIN.iter().position(|a| *a == amount) {
            let set_value = |a: &Amount| set.has(*a).then(|| a.of(merged)).flatten();
            let floor = Amount::CHAIN[..at].iter().filter_map(set_value).max();
            let ceiling = Amount::CHAIN[at + 1..].iter().filter_map(set_value).min();
            value = match (value, floor) {
                (Some(value), Some(floor)) => Some(value.max(floor)),
                (value, _) => value,
            };
            value = match (value, ceiling) {
                (Some(value), Some(ceiling)) => Some(value.min(ceiling)),
                (None, ceiling) => ceiling,
                (value, None) => value,
            };
        }
        amount.put(&mut limits, value);
    }
    limits
}

/// [`patched`] for a card row: its program's defaults and its recorded
/// choices. Answers the limits and the new `limits_set` column.
pub fn patch_row(row: &CardRow, patch: &LimitsPatch) -> Result<(Limits, String), LimitErrors> {
    let defaults = program::default_limits(row.card_type);
    let set = SetByMerchant::parse(&row.limits_set);
    patched(&row.limits, set, patch, &defaults).map(|(limits, set)| (limits, set.column()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program's defaults for a virtual card.
    fn defaults() -> Limits {
        program::default_limits(tern_schema::vocabulary::CardType::Virtual)
    }

    fn amounts(limits: &Limits) -> [Option<i64>; 4] {
        Amount::ALL.map(|amount| amount.of(limits).map(MinorUnits::get))
    }

    fn patch(amounts: [Option<Option<i64>>; 4]) -> LimitsPatch {
        LimitsPatch {
            per_transaction_minor: amounts[0].map(|limit| limit.map(MinorUnits::new)),
            daily_spend_minor: amounts[1].map(|limit| limit.map(MinorUnits::new)),
            monthly_spend_minor: amounts[2].map(|limit| limit.map(MinorUnits::new)),
            atm_daily_minor: amounts[3].map(|limit| limit.map(MinorUnits::new)),
            ..LimitsPatch::default()
        }
    }

    #[test]
    fn the_column_round_trips_and_ignores_what_it_does_not_know() {
        let set = SetByMerchant::default()
            .with(Amount::Monthly)
            .with(Amount::PerTransaction);
        assert_eq!(set.column(), "per_transaction_minor,monthly_spend_minor");
        assert_eq!(SetByMerchant::parse(&set.column()), set);
        // The migration's form, with a trailing comma.
        assert_eq!(
            SetByMerchant::parse("monthly_spend_minor,per_transaction_minor,"),
            set
        );
        assert_eq!(SetByMerchant::parse(""), SetByMerchant::default());
        assert_eq!(SetByMerchant::parse("colour,"), SetByMerchant::default());
        assert_eq!(SetByMerchant::default().column(), "");
    }

    /// Rows: limits the merchant set before (with their values; the rest
    /// are the defaults 500_000 / 1_000_000 / 5_000_000 / 50_000), the
    /// patch, and the effective limits after, or the fields refused.
    #[test]
    fn only_the_merchants_values_must_be_in_order() {
        type Row = (
            [Option<Option<i64>>; 4],
            [Option<Option<i64>>; 4],
            Result<[Option<i64>; 4], Vec<&'static str>>,
        );
        let d = [
            Some(500_000),
            Some(1_000_000),
            Some(5_000_000),
            Some(50_000),
        ];
        let table: [Row; 16] = [
            // The PATCH on a new card: the default per-transaction
            // limit is lowered to the daily one.
            (
                [None; 4],
                [None, Some(Some(50_000)), Some(Some(500_000)), None],
                Ok([Some(50_000), Some(50_000), Some(500_000), d[3]]),
            ),
            // Nothing set: the defaults, untouched.
            ([None; 4], [None; 4], Ok(d)),
            // A daily limit under the default per-transaction one.
            (
                [None; 4],
                [None, Some(Some(1_000)), None, None],
                Ok([Some(1_000), Some(1_000), d[2], d[3]]),
            ),
            // A monthly limit under the default daily and per-transaction.
            (
                [None; 4],
                [None, None, Some(Some(300_000)), None],
                Ok([Some(300_000), Some(300_000), Some(300_000), d[3]]),
            ),
            // A per-transaction limit above the default daily and monthly:
            // those are raised to it.
            (
                [None; 4],
                [Some(Some(8_000_000)), None, None, None],
                Ok([Some(8_000_000), Some(8_000_000), Some(8_000_000), d[3]]),
            ),
            // Between two set values, a default is fitted to both.
            (
                [Some(Some(2_000_000)), None, Some(Some(3_000_000)), None],
                [None; 4],
                Ok([Some(2_000_000), Some(2_000_000), Some(3_000_000), d[3]]),
            ),
            // A default already between them stays.
            (
                [Some(Some(100)), None, Some(Some(9_000_000)), None],
                [None; 4],
                Ok([Some(100), d[1], Some(9_000_000), d[3]]),
            ),
            // Raising the daily limit again brings the default back.
            (
                [None, Some(Some(50_000)), None, None],
                [None, Some(Some(2_000_000)), None, None],
                Ok([d[0], Some(2_000_000), d[2], d[3]]),
            ),
            // Two set values out of order: 422, whatever the defaults.
            (
                [Some(Some(10_000)), None, None, None],
                [None, Some(Some(5_000)), None, None],
                Err(vec!["per_transaction_minor"]),
            ),
            (
                [None; 4],
                [None, Some(Some(200)), Some(Some(100)), None],
                Err(vec!["daily_spend_minor"]),
            ),
            // Per-transaction against monthly when daily is not set.
            (
                [None, None, Some(Some(100)), None],
                [Some(Some(200)), None, None, None],
                Err(vec!["per_transaction_minor"]),
            ),
            // Equal set values are in order.
            (
                [None; 4],
                [Some(Some(100)), Some(Some(100)), Some(Some(100)), None],
                Ok([Some(100), Some(100), Some(100), d[3]]),
            ),
            // No limit set by the merchant bounds nothing and stays none.
            (
                [None; 4],
                [None, Some(None), None, None],
                Ok([d[0], None, d[2], d[3]]),
            ),
            (
                [None; 4],
                [Some(None), Some(Some(1_000)), None, None],
                Ok([None, Some(1_000), d[2], d[3]]),
            ),
            // Bounds are checked on set values only; ATM is its own limit.
            (
                [None; 4],
                [None, None, None, Some(Some(-1))],
                Err(vec!["atm_daily_minor"]),
            ),
            (
                [None; 4],
                [None, None, None, Some(Some(10_000_000))],
                Ok([d[0], d[1], d[2], Some(10_000_000)]),
            ),
        ];
        for (before, change, expected) in table {
            // The card as it stands: its set values applied to new limits.
            let (current, set) = patched(
                &defaults(),
                SetByMerchant::default(),
                &patch(before),
                &defaults(),
            )
            .expect("the row's own limits are valid");
            let got = patched(&current, set, &patch(change), &defaults());
            let got = got
                .map(|(limits, _)| amounts(&limits))
                .map_err(|errors| errors.into_iter().map(|(field, _)| field).collect());
            assert_eq!(got, expected, "set {before:?}, patch {change:?}");
            if let Ok(limits) = got {
                let [per, daily, monthly, _] = limits;
                let above = |low: Option<i64>, high: Option<i64>| matches!((low, high), (Some(low), Some(high)) if low > high);
                assert!(!above(per, daily), "per above daily: {limits:?}");
                assert!(!above(daily, monthly), "daily above monthly: {limits:?}");
            }
        }
    }

    #[test]
    fn a_patch_records_what_it_sets_and_keeps_what_was_set() {
        let (limits, set) = patched(
            &defaults(),
            SetByMerchant::default().with(Amount::AtmDaily),
            &patch([None, Some(Some(50_000)), None, None]),
            &defaults(),
        )
        .expect("valid");
        assert!(set.has(Amount::Daily) && set.has(Amount::AtmDaily));
        assert!(!set.has(Amount::PerTransaction) && !set.has(Amount::Monthly));
        // A switch is not an amount: it sets nothing.
        let switches = LimitsPatch {
            online_enabled: Some(false),
            ..LimitsPatch::default()
        };
        let (after, still) = patched(&limits, set, &switches, &defaults()).expect("valid");
        assert_eq!(still, set);
        assert!(!after.online_enabled);
        assert_eq!(amounts(&after), amounts(&limits));
    }
}
