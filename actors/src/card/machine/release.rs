//! How much of an authorization's hold a reversal releases (decisions
//! §10): what it names, never more than is held.

use tern_schema::money::MinorUnits;

/// What a reversal of `asked_minor` (absent: the rest) does to a hold of
/// `held_minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Nothing is held, or the reversal names no positive amount.
    Nothing,
    /// Part of the hold goes back; the rest stays held.
    Part {
        released_minor: MinorUnits,
        remaining_minor: MinorUnits,
    },
    /// The whole hold goes back: a reversal of at least what is held.
    All { released_minor: MinorUnits },
}

pub fn release(held_minor: MinorUnits, asked_minor: Option<MinorUnits>) -> Release {
    if !held_minor.is_positive() {
        return Release::Nothing;
    }
    match asked_minor {
        None => Release::All {
            released_minor: held_minor,
        },
        Some(asked) if !asked.is_positive() => Release::Nothing,
        Some(asked) if asked >= held_minor => Release::All {
            released_minor: held_minor,
        },
        Some(asked) => Release::Part {
            released_minor: asked,
            // 0 < asked < held: no overflow.
            remaining_minor: held_minor.saturating_sub(asked),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reversal_releases_what_it_names_and_never_more_than_is_held() {
        let part = |released: i64, remaining: i64| Release::Part {
            released_minor: MinorUnits::new(released),
            remaining_minor: MinorUnits::new(remaining),
        };
        let all = |released: i64| Release::All {
            released_minor: MinorUnits::new(released),
        };
        let table = [
            // (held, asked) -> release
            (2_000, None, all(2_000)),
            (2_000, Some(500), part(500, 1_500)),
            (2_000, Some(1_999), part(1_999, 1)),
            (2_000, Some(1), part(1, 1_999)),
            (2_000, Some(2_000), all(2_000)),
            (2_000, Some(2_001), all(2_000)),
            (2_000, Some(i64::MAX), all(2_000)),
            (2_000, Some(0), Release::Nothing),
            (2_000, Some(-5), Release::Nothing),
            (2_000, Some(i64::MIN), Release::Nothing),
            (0, None, Release::Nothing),
            (0, Some(100), Release::Nothing),
            (-1, None, Release::Nothing),
            (1, None, all(1)),
        ];
        for (held, asked, expected) in table {
            assert_eq!(
                release(MinorUnits::new(held), asked.map(MinorUnits::new)),
                expected,
                "held {held}, asked {asked:?}"
            );
        }
    }

    #[test]
    fn what_a_release_takes_and_leaves_adds_up_to_the_hold() {
        for held in [1, 2, 7, 1_000, 250_000] {
            for asked in [None, Some(1), Some(held / 2), Some(held), Some(held + 1)] {
                match release(MinorUnits::new(held), asked.map(MinorUnits::new)) {
                    Release::Part {
                        released_minor,
                        remaining_minor,
                    } => {
                        assert!(released_minor.is_positive() && remaining_minor.is_positive());
                        assert_eq!(
                            released_minor.checked_add(remaining_minor),
                            Some(MinorUnits::new(held))
                        );
                    }
                    Release::All { released_minor } => {
                        assert_eq!(released_minor, MinorUnits::new(held))
                    }
                    Release::Nothing => assert_eq!(asked, Some(0), "held {held}"),
                }
            }
        }
    }
}
