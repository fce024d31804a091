//! The delivery of one event to its endpoint, as a pure state machine
//! (decisions §8): attempted at once, retried on the schedule with jitter,
//! dead-lettered after the last retry, re-armed by a replay, skipped when the
//! endpoint goes away.
//!
//! The removal rule is applied set-based in SQL
//! ([`tern_schema::store::webhooks::skip_pending`]); the table below is its
//! specification too.

use std::time::Duration;

use chrono::{DateTime, Utc};

pub use tern_schema::vocabulary::DeliveryStatus as Status;

/// An event's delivery state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub status: Status,
    /// Attempts in the current round.
    pub attempts: u32,
    /// Times armed: 0 at creation, one more per replay.
    pub round: u32,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx within the timeout.
    Accepted { status: u16 },
    /// The receiver answered something else (redirects included: they are
    /// not followed).
    Rejected { status: u16 },
    /// No answer: refused by the SSRF guard, connection or TLS failure,
    /// timeout.
    Failed { error: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Attempted(Outcome),
    Replay,
    EndpointRemoved,
}

/// The retry schedule: the delays after the first, second, ... failed
/// attempt; one more failure than it has entries dead-letters the event.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub delays: Vec<Duration>,
    /// Each delay is spread by up to this fraction either way, so that
    /// endpoints that failed together do not retry together.
    pub jitter: f64,
}

/// A move the event cannot make from where it is: a stale attempt result
/// (the event was replayed or skipped meanwhile), or a replay of an event
/// that is not done.
#[derive(Debug, PartialEq, Eq)]
pub struct Ignored;

/// The delivery after `event`. `draw` in [0, 1) picks the jitter; callers
/// pass a random number, tests a fixed one.
pub fn transition(
    delivery: &Delivery,
    event: &Event,
    policy: &Policy,
    now: DateTime<Utc>,
    draw: f64,
) -> Result<Delivery, Ignored> {
    use Status::*;
    match (delivery.status, event) {
        (Pending, Event::Attempted(Outcome::Accepted { .. })) => Ok(Delivery {
            status: Delivered,
            attempts: delivery.attempts + 1,
            next_attempt_at: None,
            ..*delivery
        }),
        (Pending, Event::Attempted(_)) => {
            let attempts = delivery.attempts + 1;
            let delay = usize::try_from(attempts - 1)
                .ok()
                .and_then(|index| policy.delays.get(index));
            Ok(match delay {
                Some(delay) => Delivery {
                    status: Pending,
                    attempts,
                    next_attempt_at: Some(now + jittered(*delay, policy.jitter, draw)),
                    ..*delivery
                },
                None => Delivery {
                    status: Dead,
                    attempts,
                    next_attempt_at: None,
                    ..*delivery
                },
            })
        }
        (Delivered | Dead, Event::Replay) => Ok(Delivery {
            status: Pending,
            attempts: 0,
            round: delivery.round + 1,
            next_attempt_at: Some(now),
        }),
        (Pending, Event::EndpointRemoved) => Ok(Delivery {
            status: Skipped,
            next_attempt_at: None,
            ..*delivery
        }),
        (Delivered | Dead | Skipped, Event::Attempted(_))
        | (Pending | Skipped, Event::Replay)
        | (Delivered | Dead | Skipped, Event::EndpointRemoved) => Err(Ignored),
    }
}

/// `delay` spread by `jitter` (a fraction) either way, as `draw` in [0, 1)
/// says; never negative.
fn jittered(delay: Duration, jitter: f64, draw: f64) -> chrono::Duration {
    let spread = jitter.clamp(0.0, 1.0) * (2.0 * draw.clamp(0.0, 1.0) - 1.0);
    let ms = delay.as_millis() as f64 * (1.0 + spread);
    chrono::Duration::milliseconds(ms.max(0.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            delays: vec![Duration::from_secs(5), Duration::from_secs(300)],
            jitter: 0.1,
        }
    }

    fn at(status: Status, attempts: u32) -> Delivery {
        Delivery {
            status,
            attempts,
            round: 0,
            next_attempt_at: None,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    fn secs(n: i64) -> chrono::Duration {
        chrono::Duration::seconds(n)
    }

    #[test]
    fn the_delivery_table() {
        use Status::*;
        let accepted = Event::Attempted(Outcome::Accepted { status: 204 });
        let rejected = Event::Attempted(Outcome::Rejected { status: 500 });
        let failed = Event::Attempted(Outcome::Failed {
            error: "timeout".into(),
        });
        let pending_at = |attempts, due: chrono::Duration| Delivery {
            next_attempt_at: Some(now() + due),
            ..at(Pending, attempts)
        };
        // (from, event, expected) with the jitter draw at its midpoint (no spread).
        let table: Vec<(Delivery, Event, Result<Delivery, Ignored>)> = vec![
            (at(Pending, 0), accepted.clone(), Ok(at(Delivered, 1))),
            (at(Pending, 1), accepted.clone(), Ok(at(Delivered, 2))),
            (at(Pending, 0), rejected.clone(), Ok(pending_at(1, secs(5)))),
            (at(Pending, 0), failed.clone(), Ok(pending_at(1, secs(5)))),
            (at(Pending, 1), failed.clone(), Ok(pending_at(2, secs(300)))),
            (at(Pending, 2), rejected.clone(), Ok(at(Dead, 3))),
            (at(Pending, 2), failed.clone(), Ok(at(Dead, 3))),
            (at(Delivered, 1), accepted.clone(), Err(Ignored)),
            (at(Dead, 3), failed.clone(), Err(Ignored)),
            (at(Skipped, 0), accepted.clone(), Err(Ignored)),
            (
                at(Delivered, 1),
                Event::Replay,
                Ok(Delivery {
                    round: 1,
                    ..pending_at(0, secs(0))
                }),
            ),
            (
                at(Dead, 3),
                Event::Replay,
                Ok(Delivery {
                    round: 1,
                    ..pending_at(0, secs(0))
                }),
            ),
            (at(Pending, 1), Event::Replay, Err(Ignored)),
            (at(Skipped, 0), Event::Replay, Err(Ignored)),
            (at(Pending, 1), Event::EndpointRemoved, Ok(at(Skipped, 1))),
            (at(Delivered, 1), Event::EndpointRemoved, Err(Ignored)),
            (at(Dead, 3), Event::EndpointRemoved, Err(Ignored)),
            (at(Skipped, 0), Event::EndpointRemoved, Err(Ignored)),
        ];
        for (from, event, expected) in table {
            let got = transition(&from, &event, &policy(), now(), 0.5);
            assert_eq!(got, expected, "{from:?} on {event:?}");
        }
    }

    #[test]
    fn every_status_and_event_pair_is_decided() {
        use Status::*;
        let events = [
            Event::Attempted(Outcome::Accepted { status: 200 }),
            Event::Attempted(Outcome::Rejected { status: 302 }),
            Event::Attempted(Outcome::Failed { error: "x".into() }),
            Event::Replay,
            Event::EndpointRemoved,
        ];
        for status in [Pending, Delivered, Dead, Skipped] {
            for event in &events {
                let moved = transition(&at(status, 0), event, &policy(), now(), 0.5);
                if let Ok(next) = moved {
                    assert_eq!(
                        next.next_attempt_at.is_some(),
                        next.status == Pending,
                        "{status:?} on {event:?}: a due time exactly while pending"
                    );
                }
            }
        }
    }

    #[test]
    fn jitter_spreads_a_retry_within_its_fraction() {
        let failed = Event::Attempted(Outcome::Rejected { status: 503 });
        let due = |draw| {
            transition(&at(Status::Pending, 0), &failed, &policy(), now(), draw)
                .ok()
                .and_then(|next| next.next_attempt_at)
                .map(|due| due - now())
        };
        assert_eq!(due(0.0), Some(chrono::Duration::milliseconds(4_500)));
        assert_eq!(due(0.5), Some(secs(5)));
        assert_eq!(due(0.999_999), Some(chrono::Duration::milliseconds(5_500)));
    }

    #[test]
    fn an_empty_schedule_dead_letters_on_the_first_failure() {
        let policy = Policy {
            delays: Vec::new(),
            jitter: 0.0,
        };
        let failed = Event::Attempted(Outcome::Failed { error: "x".into() });
        let next = transition(&at(Status::Pending, 0), &failed, &policy, now(), 0.5);
        assert_eq!(next, Ok(at(Status::Dead, 1)));
    }

    #[test]
    fn statuses_round_trip_their_names() {
        for status in [
            Status::Pending,
            Status::Delivered,
            Status::Dead,
            Status::Skipped,
        ] {
            assert_eq!(Status::parse(status.as_str()), Some(status));
        }
        assert_eq!(Status::parse("sent"), None);
    }
}
