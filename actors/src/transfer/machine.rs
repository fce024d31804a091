//! The transfer saga (decisions §7), pure: no I/O, no clock. A transfer
//! drives two child settlements, leg 1 a card_charge of the send amount and
//! leg 2 an on_chain payout of the receive amount; when leg 2 fails for good,
//! leg 1 is refunded.
//!
//! Status moves: pending -> leg1_in_flight -> leg1_succeeded | failed;
//! leg1_succeeded -> leg2_in_flight -> succeeded | compensating;
//! compensating -> failed. Leg moves: not_started -> in_flight -> succeeded |
//! failed; succeeded -> reversing -> reversed | reverse_failed.

use chrono::{DateTime, Duration, Utc};

pub use tern_schema::vocabulary::{LegStatus, TransferStatus as Status};

/// The 3DS challenge leg 1 waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub client_secret: String,
    /// Set while the challenge is open, cleared once the payer finished it.
    pub next_action_type: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub status: Status,
    pub leg1: LegStatus,
    pub leg2: LegStatus,
    pub challenge: Option<Challenge>,
    pub failure_reason: Option<String>,
    /// Refunds of leg 1 asked for so far (the first is 1).
    pub compensation_attempt: u32,
    /// When the next refund attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// An operator must look: the refund could not be made.
    pub alert: Option<String>,
}

impl State {
    pub fn new() -> State {
        State {
            status: Status::Pending,
            leg1: LegStatus::NotStarted,
            leg2: LegStatus::NotStarted,
            challenge: None,
            failure_reason: None,
            compensation_attempt: 0,
            next_attempt_at: None,
            alert: None,
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

/// How often the compensation asks for leg 1's refund: the wait before
/// attempt n+1 is `refund_delays[n-1]`; after `refund_delays.len() + 1`
/// attempts, the leg is `reverse_failed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub refund_delays: Vec<Duration>,
}

impl Policy {
    pub fn attempts_max(&self) -> u32 {
        self.refund_delays.len() as u32 + 1
    }
}

/// What a leg's settlement was seen to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    InFlight,
    /// An on-session charge waiting for the payer's 3DS challenge.
    AwaitingChallenge {
        client_secret: String,
        next_action_type: String,
    },
    /// Succeeded, and nothing is being done to undo it: no reversal is
    /// under way (none was asked, or the last one was not made).
    Succeeded,
    /// Succeeded, with a reversal (refund) under way at the provider.
    Reversing,
    Failed {
        reason: String,
    },
    Reversed,
}

/// One of a transfer's two legs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leg {
    /// The card_charge of the send amount.
    One,
    /// The on_chain payout of the receive amount.
    Two,
}

impl Leg {
    /// The leg's `index` (decisions §1).
    pub fn index(self) -> u8 {
        match self {
            Leg::One => 1,
            Leg::Two => 2,
        }
    }
}

/// The answer to a request for leg 1's refund.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refund {
    Completed,
    /// The provider finishes it later; the leg's own move brings the end.
    Pending,
    /// Not made this time (declined, provider unreachable).
    NotMade {
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The transfer is durable: start leg 1.
    Start,
    Leg1(Observed),
    Leg2(Observed),
    Refund(Refund),
    /// The persisted refund retry timer fired.
    RetryDue,
    /// The move that starts `leg` could not be written, for a reason that
    /// will not pass by itself (its key belongs to another settlement): the
    /// leg will never exist. Leg 2 is only ever started by leg 1's success,
    /// so a refused leg 2 means the payer was charged.
    LegRefused {
        leg: Leg,
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Create leg 1 (card_charge, on-session) and start it.
    StartLeg1,
    /// Book the collected fiat into the asset: fees out, conversion through
    /// the conversion accounts, the asset into transfer clearing.
    Convert,
    /// Create leg 2 (on_chain, held on transfer clearing) and start it.
    StartLeg2,
    /// Undo [`Effect::Convert`], so the fiat is there to refund.
    Unconvert,
    /// Ask leg 1's settlement for its refund.
    RequestRefund,
    /// Persist a due time; when it fires the actor feeds [`Event::RetryDue`].
    ScheduleRetry { at: DateTime<Utc> },
}

/// A move and every status it passed through, in order (a move may pass
/// through more than one: leg 1's success converts and starts leg 2 at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    pub state: State,
    pub effects: Vec<Effect>,
    pub statuses: Vec<Status>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// Nothing new: a repeated or stale observation.
    #[error("nothing changes")]
    Unchanged,
    #[error("event {event} does not apply to a {status} transfer")]
    Inapplicable {
        event: &'static str,
        status: &'static str,
    },
}

pub type Outcome = Result<Moved, Rejected>;

fn event_name(event: &Event) -> &'static str {
    match event {
        Event::Start => "start",
        Event::Leg1(_) => "leg1",
        Event::Leg2(_) => "leg2",
        Event::Refund(_) => "refund",
        Event::RetryDue => "retry_due",
        Event::LegRefused { .. } => "leg_refused",
    }
}

fn moved(state: State, effects: Vec<Effect>, statuses: Vec<Status>) -> Outcome {
    Ok(Moved {
        state,
        effects,
        statuses,
    })
}

/// The saga's move on `event` at `now` (time comes in as data: the
/// machine reads no clock).
pub fn transition(state: &State, event: Event, policy: &Policy, now: DateTime<Utc>) -> Outcome {
    let mut next = state.clone();
    match (state.status, event) {
        (Status::Pending, Event::Start) => {
            next.status = Status::Leg1InFlight;
            next.leg1 = LegStatus::InFlight;
            moved(next, vec![Effect::StartLeg1], vec![Status::Leg1InFlight])
        }
        (
            Status::Pending,
            Event::LegRefused {
                leg: Leg::One,
                reason,
            },
        ) => {
            // Nothing was charged: the transfer fails as a declined card
            // would, its statuses passing where a started leg's would.
            next.leg1 = LegStatus::Failed;
            next.status = Status::Failed;
            next.failure_reason = Some(reason);
            moved(next, vec![], vec![Status::Leg1InFlight, Status::Failed])
        }
        (
            Status::Leg1InFlight,
            Event::LegRefused {
                leg: Leg::Two,
                reason,
            },
        ) => {
            // Leg 1 succeeded and nothing was converted (the refused move
            // rolled back whole): refund it, as when leg 2 fails for good.
            finish_challenge(&mut next);
            next.leg1 = LegStatus::Reversing;
            next.leg2 = LegStatus::Failed;
            next.status = Status::Compensating;
            next.failure_reason = Some(reason);
            next.compensation_attempt = 1;
            moved(
                next,
                vec![Effect::RequestRefund],
                vec![
                    Status::Leg1Succeeded,
                    Status::Leg2InFlight,
                    Status::Compensating,
                ],
            )
        }
        (Status::Leg1InFlight, Event::Leg1(observed)) => match observed {
            Observed::InFlight => Err(Rejected::Unchanged),
            Observed::AwaitingChallenge {
                client_secret,
                next_action_type,
            } => {
                let challenge = Challenge {
                    client_secret,
                    next_action_type: Some(next_action_type),
                };
                if state.challenge.as_ref() == Some(&challenge) {
                    return Err(Rejected::Unchanged);
                }
                next.challenge = Some(challenge);
                moved(next, vec![], vec![])
            }
            Observed::Succeeded => {
                finish_challenge(&mut next);
                next.leg1 = LegStatus::Succeeded;
                next.leg2 = LegStatus::InFlight;
                next.status = Status::Leg2InFlight;
                moved(
                    next,
                    vec![Effect::Convert, Effect::StartLeg2],
                    vec![Status::Leg1Succeeded, Status::Leg2InFlight],
                )
            }
            Observed::Failed { reason } => {
                finish_challenge(&mut next);
                next.leg1 = LegStatus::Failed;
                next.status = Status::Failed;
                next.failure_reason = Some(reason);
                moved(next, vec![], vec![Status::Failed])
            }
            // A charge that never succeeded cannot be or have been refunded.
            Observed::Reversing | Observed::Reversed => Err(Rejected::Unchanged),
        },
        (Status::Leg2InFlight, Event::Leg2(observed)) => match observed {
            Observed::Succeeded => {
                next.leg2 = LegStatus::Succeeded;
                next.status = Status::Succeeded;
                moved(next, vec![], vec![Status::Succeeded])
            }
            Observed::Failed { reason } => {
                next.leg2 = LegStatus::Failed;
                next.leg1 = LegStatus::Reversing;
                next.status = Status::Compensating;
                next.failure_reason = Some(reason);
                next.compensation_attempt = 1;
                moved(
                    next,
                    vec![Effect::Unconvert, Effect::RequestRefund],
                    vec![Status::Compensating],
                )
            }
            Observed::InFlight
            | Observed::AwaitingChallenge { .. }
            | Observed::Reversing
            | Observed::Reversed => Err(Rejected::Unchanged),
        },
        (Status::Compensating, Event::Leg1(Observed::Reversed))
        | (Status::Compensating, Event::Refund(Refund::Completed)) => {
            next.leg1 = LegStatus::Reversed;
            next.status = Status::Failed;
            next.next_attempt_at = None;
            moved(next, vec![], vec![Status::Failed])
        }
        (Status::Compensating, Event::Refund(Refund::NotMade { reason })) => {
            refund_not_made(state, next, reason, now, policy)
        }
        (Status::Compensating, Event::Leg1(Observed::Succeeded)) => {
            // Leg 1 stands with no refund under way: one reported pending,
            // or under way when asked again after a restart, ended without
            // being made. Nothing else would move the transfer: try again.
            refund_not_made(
                state,
                next,
                "the refund was not made".to_owned(),
                now,
                policy,
            )
        }
        (Status::Compensating, Event::RetryDue) if state.next_attempt_at.is_some() => {
            next.compensation_attempt += 1;
            next.next_attempt_at = None;
            moved(next, vec![Effect::RequestRefund], vec![])
        }
        (Status::Compensating, Event::Refund(Refund::Pending))
        | (Status::Compensating, Event::Leg1(_))
        | (Status::Compensating, Event::Leg2(_)) => Err(Rejected::Unchanged),
        // Observations that arrive late, twice, or for the other leg.
        (_, Event::Leg1(_) | Event::Leg2(_) | Event::Refund(_)) => Err(Rejected::Unchanged),
        (_, event) => Err(Rejected::Inapplicable {
            event: event_name(&event),
            status: state.status.as_str(),
        }),
    }
}

/// The refund was not made: try again after the policy's next delay, or,
/// out of attempts, give up with leg 1 `reverse_failed` and an alert.
fn refund_not_made(
    state: &State,
    mut next: State,
    reason: String,
    now: DateTime<Utc>,
    policy: &Policy,
) -> Outcome {
    if state.next_attempt_at.is_some() {
        // A retry is already scheduled: a second report changes nothing.
        return Err(Rejected::Unchanged);
    }
    let delay = policy
        .refund_delays
        .get(state.compensation_attempt.saturating_sub(1) as usize);
    match delay {
        Some(delay) => {
            let at = now + *delay;
            next.next_attempt_at = Some(at);
            moved(next, vec![Effect::ScheduleRetry { at }], vec![])
        }
        None => {
            next.leg1 = LegStatus::ReverseFailed;
            next.status = Status::Failed;
            next.alert = Some(format!(
                "the refund of leg 1 failed {} times (last: {reason}); the payer has not been paid back",
                state.compensation_attempt
            ));
            moved(next, vec![], vec![Status::Failed])
        }
    }
}

/// The payer is done with the challenge: nothing more to act on.
fn finish_challenge(next: &mut State) {
    if let Some(challenge) = &mut next.challenge {
        challenge.next_action_type = None;
    }
}

/// The work a transfer re-activated in `state` must resume (at start, after
/// a crash): which legs to look at, and whether to ask for the refund again.
pub fn resumption(state: &State) -> Resume {
    match state.status {
        Status::Pending => Resume::Start,
        Status::Leg1InFlight => Resume::Observe,
        // Converted but leg 2 not started cannot be persisted (one move), so
        // leg1_succeeded is never at rest; observe to be safe.
        Status::Leg1Succeeded | Status::Leg2InFlight => Resume::Observe,
        // Waiting for a scheduled retry: its timer resumes the work.
        Status::Compensating if state.next_attempt_at.is_some() => Resume::Observe,
        Status::Compensating => Resume::ObserveAndRefund,
        Status::Succeeded | Status::Failed => Resume::Nothing,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    Nothing,
    Start,
    /// Read the legs' settlements and feed what they show.
    Observe,
    /// Observe, then ask for leg 1's refund (again: the settlement answers
    /// a refund it already made or is making without making another).
    ObserveAndRefund,
}

#[cfg(test)]
mod tests;
