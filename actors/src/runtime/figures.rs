//! The runtime's figures: what /health and /health/actors serve.
//!
//! Counters are atomics updated on the paths they count (send, handle,
//! activate, passivate, crash); a snapshot reads them without stopping any
//! actor, so figures of different kinds may be a few microseconds apart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::NaiveDateTime;
use serde::Serialize;

/// At most this many stuck entities are listed per kind; the count is exact.
pub const STUCK_LISTED_MAX: usize = 20;
/// A stuck entity's reason is cut to this many characters.
pub const STUCK_REASON_CHARS_MAX: usize = 200;
/// The reason of an entity stuck only by being slow.
pub const SLOW_REASON: &str = "in flight for longer than stuck_after_ms";
/// Consecutive failed timer polls after which the runtime reports unhealthy
/// (the database is likely down: due work is not moving).
pub const TIMER_POLL_FAILURES_UNHEALTHY: u64 = 3;

/// One kind's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindFigures {
    /// Actors in memory now.
    pub live_actors: u64,
    /// Messages admitted to a mailbox and not yet picked up by a handler,
    /// over all actors of the kind (counted around send and handle).
    pub mailbox_backlog: u64,
    /// Per-actor bound of the mailbox.
    pub mailbox_capacity: u64,
    /// Requests refused because a mailbox was full (503 at the edge).
    pub mailbox_full: u64,
    /// Actor starts of every cause: on demand, at recovery, after a crash.
    pub activations: u64,
    /// Actors stopped after being idle (or terminal) for the idle timeout.
    pub passivations: u64,
    /// Actors that panicked.
    pub crashes: u64,
    /// Crashed actors re-activated from the database.
    pub restarts: u64,
    /// Age in ms of the oldest live, non-terminal entity, measured from when
    /// its current piece of work began ([`super::EntityKind::in_flight_since`]);
    /// 0 when none. Live actors only: a passivated entity waiting on a timer
    /// is not counted.
    pub oldest_in_flight_ms: u64,
    /// Threshold of `oldest_in_flight_ms` past which an entity is stuck.
    pub stuck_after_ms: u64,
    /// Live entities in flight for longer than `stuck_after_ms`, or whose
    /// work stopped on a failure that will not pass by itself.
    pub stuck_count: u64,
    /// Stuck entities, longest stuck first, at most [`STUCK_LISTED_MAX`].
    pub stuck_entities: Vec<StuckEntity>,
}

/// An entity an operator should look at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StuckEntity {
    pub id: String,
    /// The failure that stopped its work, or [`SLOW_REASON`].
    pub reason: String,
    /// Since its work stopped, or since its current work began when slow.
    pub age_ms: u64,
}

/// Work the runtime stopped resuming: it failed for a reason that will not
/// pass by itself, and the kind could not end it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stopped {
    pub reason: String,
    pub at: NaiveDateTime,
}

/// What the figures read of one live entity.
#[derive(Clone, Debug)]
pub(crate) struct LiveEntity {
    pub id: String,
    /// `None` when terminal.
    pub in_flight_since: Option<NaiveDateTime>,
    pub stopped: Option<Stopped>,
}

/// The timer service's figures on this node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimerFigures {
    pub running: bool,
    /// Timers delivered and handled.
    pub delivered: u64,
    /// Deliveries that failed and were released for a later retry.
    pub failed: u64,
    /// Timers dropped: their entity is gone or their payload is unreadable.
    pub discarded: u64,
    /// Consecutive polls that could not claim (database errors).
    pub poll_failures_in_a_row: u64,
}

/// Every kind's figures and the timer service's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeFigures {
    pub kinds: BTreeMap<String, KindFigures>,
    pub timers: TimerFigures,
    /// Where several nodes share the database: this node, the others,
    /// and the latest slot moves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<super::cluster::ClusterFigures>,
}

impl RuntimeFigures {
    /// Healthy when no entity is stuck and due timers are being claimed.
    /// A full mailbox is back-pressure working, not ill health.
    pub fn healthy(&self) -> bool {
        self.kinds.values().all(|kind| kind.stuck_count == 0)
            && self.timers.poll_failures_in_a_row < TIMER_POLL_FAILURES_UNHEALTHY
    }
}

/// Monotonic counters of one kind.
#[derive(Debug, Default)]
pub(crate) struct KindCounters {
    pub backlog: AtomicU64,
    pub mailbox_full: AtomicU64,
    pub activations: AtomicU64,
    pub passivations: AtomicU64,
    pub crashes: AtomicU64,
    pub restarts: AtomicU64,
}

impl KindCounters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Decrements without wrapping below zero.
    pub fn drop_one(counter: &AtomicU64) {
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub fn read(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

fn age_ms(now: NaiveDateTime, since: NaiveDateTime) -> u64 {
    // A start in the future (clock step) counts as age 0.
    u64::try_from((now - since).num_milliseconds()).unwrap_or(0)
}

fn cut(reason: &str) -> String {
    reason.chars().take(STUCK_REASON_CHARS_MAX).collect()
}

/// Oldest in-flight age, stuck count and the listed stuck entities of the
/// live ones. Pure, so it is tested directly.
pub(crate) fn summarize_in_flight(
    now: NaiveDateTime,
    entities: &[LiveEntity],
    stuck_after_ms: u64,
) -> (u64, u64, Vec<StuckEntity>) {
    let oldest_ms = entities
        .iter()
        .filter_map(|entity| entity.in_flight_since)
        .map(|since| age_ms(now, since))
        .max()
        .unwrap_or(0);
    let mut stuck: Vec<(u64, &str, &str)> = entities
        .iter()
        .filter_map(|entity| match (&entity.stopped, entity.in_flight_since) {
            (Some(stopped), _) => Some((
                age_ms(now, stopped.at),
                entity.id.as_str(),
                stopped.reason.as_str(),
            )),
            (None, Some(since)) if age_ms(now, since) > stuck_after_ms => {
                Some((age_ms(now, since), entity.id.as_str(), SLOW_REASON))
            }
            (None, _) => None,
        })
        .collect();
    stuck.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let listed = stuck
        .iter()
        .take(STUCK_LISTED_MAX)
        .map(|(age_ms, id, reason)| StuckEntity {
            id: (*id).to_owned(),
            reason: cut(reason),
            age_ms: *age_ms,
        })
        .collect();
    (oldest_ms, stuck.len() as u64, listed)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    fn at(ms: i64) -> NaiveDateTime {
        NaiveDateTime::default() + Duration::milliseconds(ms)
    }

    fn live(id: &str, since: Option<NaiveDateTime>) -> LiveEntity {
        LiveEntity {
            id: id.to_owned(),
            in_flight_since: since,
            stopped: None,
        }
    }

    fn ids(stuck: &[StuckEntity]) -> Vec<&str> {
        stuck.iter().map(|entity| entity.id.as_str()).collect()
    }

    #[test]
    fn terminal_entities_are_neither_oldest_nor_stuck() {
        let now = at(100_000);
        let entities = vec![
            live("done", None),
            live("young", Some(at(99_000))),
            live("old", Some(at(10_000))),
            live("older", Some(at(5_000))),
        ];
        let (oldest_ms, stuck_count, stuck) = summarize_in_flight(now, &entities, 60_000);
        assert_eq!(oldest_ms, 95_000);
        assert_eq!(stuck_count, 2);
        assert_eq!(ids(&stuck), ["older", "old"]);
        assert_eq!(stuck[0].reason, SLOW_REASON);
        assert_eq!(stuck[0].age_ms, 95_000);
    }

    #[test]
    fn stopped_work_is_stuck_at_once_with_its_reason() {
        let now = at(100_000);
        let failed = LiveEntity {
            stopped: Some(Stopped {
                reason: "x".repeat(STUCK_REASON_CHARS_MAX + 10),
                at: at(97_000),
            }),
            ..live("failed", Some(at(96_000)))
        };
        let entities = vec![failed, live("young", Some(at(99_000)))];
        let (oldest_ms, stuck_count, stuck) = summarize_in_flight(now, &entities, 60_000);
        assert_eq!((oldest_ms, stuck_count), (4_000, 1));
        assert_eq!(ids(&stuck), ["failed"]);
        assert_eq!(stuck[0].age_ms, 3_000, "since its work stopped");
        assert_eq!(stuck[0].reason.chars().count(), STUCK_REASON_CHARS_MAX);
    }

    #[test]
    fn nothing_in_flight_is_zero_and_a_future_start_is_age_zero() {
        assert_eq!(summarize_in_flight(at(0), &[], 1), (0, 0, Vec::new()));
        let ahead = vec![live("clock", Some(at(5_000)))];
        assert_eq!(summarize_in_flight(at(0), &ahead, 1), (0, 0, Vec::new()));
    }

    #[test]
    fn the_stuck_list_is_bounded_but_the_count_is_exact() {
        let entities: Vec<_> = (0..STUCK_LISTED_MAX + 5)
            .map(|i| live(&format!("e{i}"), Some(at(0))))
            .collect();
        let (_, stuck_count, stuck) = summarize_in_flight(at(10_000), &entities, 1_000);
        assert_eq!(stuck_count, (STUCK_LISTED_MAX + 5) as u64);
        assert_eq!(stuck.len(), STUCK_LISTED_MAX);
    }

    #[test]
    fn health_follows_stuck_entities_and_timer_polls() {
        let mut figures = RuntimeFigures::default();
        assert!(figures.healthy());
        figures.kinds.insert(
            "probe".into(),
            KindFigures {
                stuck_count: 1,
                ..KindFigures::default()
            },
        );
        assert!(!figures.healthy());
        figures.kinds.clear();
        figures.timers.poll_failures_in_a_row = TIMER_POLL_FAILURES_UNHEALTHY;
        assert!(!figures.healthy());
    }
}
