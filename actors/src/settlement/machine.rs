//! The settlement state machine (decisions §5), pure: no I/O, no clock, no
//! randomness. Time and provider results arrive inside events; effects are
//! data the actor applies (one database transaction per transition, then
//! provider calls whose results come back as events).
//!
//! Status moves: pending -> in_flight -> succeeded | failed | retrying;
//! retrying -> in_flight | failed; succeeded -> reversed. failed and reversed
//! are terminal.
//!
//! An on-session charge (a transfer's card_charge leg) may stay in_flight
//! with an open 3DS challenge (`client_secret`, `next_action_type`) until the
//! payer finishes it or its deadline passes (`challenge_expired`). While the
//! challenge is open, `next_attempt_at` is that deadline.

use chrono::{DateTime, Duration, Utc};

pub use tern_schema::vocabulary::{
    Reversal, SettlementMethod as Method, SettlementStatus as Status,
};

/// What the provider reported for the settlement's operation.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Execution {
    pub provider_id: Option<String>,
    pub stan: Option<String>,
    pub retrieval_reference_number: Option<String>,
    pub transaction_identifier: Option<String>,
    pub approval_code: Option<String>,
    pub action_code: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub status: Status,
    pub method: Method,
    /// Provider attempts made so far (the first is 1).
    pub attempt: u32,
    /// After a timeout or dropped connection the outcome is unknown: the next
    /// attempt asks the provider before sending again.
    pub outcome_unknown: bool,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub execution: Execution,
    pub failure_reason: Option<String>,
    pub reversal: Reversal,
    /// The 3DS challenge the payer was given; kept after it ends, so that
    /// the outcome can still be matched to the challenge.
    pub client_secret: Option<String>,
    /// Set only while the challenge is open: the payer has something to do.
    pub next_action_type: Option<String>,
}

impl State {
    pub fn new(method: Method) -> State {
        State {
            status: Status::Pending,
            method,
            attempt: 0,
            outcome_unknown: false,
            next_attempt_at: None,
            execution: Execution::default(),
            failure_reason: None,
            reversal: Reversal::None,
            client_secret: None,
            next_action_type: None,
        }
    }

    /// Whether the payer is still expected to finish a 3DS challenge.
    pub fn challenge_open(&self) -> bool {
        self.next_action_type.is_some()
    }

    /// Whether the open challenge's deadline has passed at `now`. Without a
    /// deadline (dropped while retrying an inquiry after it passed) it has.
    fn challenge_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.next_attempt_at.is_none_or(|deadline| now >= deadline)
    }
}

/// The retry policy, from TERN_SETTLEMENT_RETRY_SCHEDULE: the wait before
/// attempt n+1 is `delays[n-1]`; after `delays.len() + 1` attempts, give up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub delays: Vec<Duration>,
    /// How long a 3DS challenge may stay open (TERN_CHALLENGE_TTL).
    pub challenge_ttl: Duration,
}

impl RetryPolicy {
    pub fn attempts_max(&self) -> u32 {
        self.delays.len() as u32 + 1
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The intent is durable: make the first attempt.
    Start,
    Succeeded(Execution),
    /// A definite refusal (decline, bad destination, authentication needed).
    Declined {
        reason: String,
        execution: Execution,
    },
    /// Definitely not executed (5xx, refused connection, action code 91).
    Transient {
        now: DateTime<Utc>,
    },
    /// Maybe executed (timeout, dropped connection).
    Unknown {
        now: DateTime<Utc>,
    },
    /// The persisted retry timer fired.
    RetryDue,
    /// An on-session charge waits for the payer's 3DS challenge (the answer
    /// to the charge, or to an inquiry about it).
    ActionRequired {
        client_secret: String,
        next_action_type: String,
        now: DateTime<Utc>,
    },
    /// The inquiry after an unknown outcome found nothing under the key.
    InquiryFoundNothing,
    /// The provider accepted the operation and finishes it later (a payout
    /// waiting for confirmations): ask again at `at`.
    ProviderPending {
        at: DateTime<Utc>,
    },
    ReverseRequested,
    ReversalSucceeded(Execution),
    /// The reversal finishes later at the provider: ask again at `at`.
    ReversalPending {
        at: DateTime<Utc>,
    },
    /// Asked about the reversal, the provider knows nothing under its key:
    /// it was never executed, so sending it (again) is safe.
    ReversalFoundNothing,
    ReversalDeclined {
        action_code: Option<String>,
    },
    ReversalTransient,
}

/// Provider work and bookkeeping the actor performs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send the operation under the settlement's provider key.
    Execute,
    /// Ask the provider what happened under the key before sending again.
    Inquire,
    /// Persist a due time; when it fires the actor feeds [`Event::RetryDue`].
    ScheduleRetry { at: DateTime<Utc> },
    /// card_charge success: post the credit reserved at creation.
    CreditFunding,
    /// card_push / on_chain success: post the hold made at creation.
    PostHold,
    /// Failure: release what creation held (or, card_charge, reserved).
    VoidHold,
    /// A refund takes money back out of the source: reserve it first (an
    /// insufficient available balance refuses the reversal).
    HoldRefund,
    /// The refund did not happen: release that reservation.
    ReleaseRefund,
    /// Send the reversal (refund or push reversal) under its own key.
    ExecuteReversal,
    /// Ask the provider what became of the reversal under its key.
    InquireReversal,
    /// The reversal completed: post the opposite entry.
    PostReversal,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("a {method} settlement cannot be reversed")]
    NotReversible { method: &'static str },
    #[error("a {status} settlement cannot be reversed")]
    NotReversibleInStatus { status: &'static str },
    #[error("a reversal is already under way")]
    ReversalUnderWay,
    #[error("event {event} does not apply to a {status} settlement")]
    Inapplicable {
        event: &'static str,
        status: &'static str,
    },
    /// The event is known already (a challenge still open before its
    /// deadline): nothing to write.
    #[error("nothing changes")]
    Unchanged,
}

pub type Outcome = Result<(State, Vec<Effect>), Rejected>;

fn event_name(event: &Event) -> &'static str {
    match event {
        Event::Start => "start",
        Event::Succeeded(_) => "succeeded",
        Event::Declined { .. } => "declined",
        Event::Transient { .. } => "transient",
        Event::Unknown { .. } => "unknown",
        Event::RetryDue => "retry_due",
        Event::ActionRequired { .. } => "action_required",
        Event::InquiryFoundNothing => "inquiry_found_nothing",
        Event::ProviderPending { .. } => "provider_pending",
        Event::ReverseRequested => "reverse_requested",
        Event::ReversalSucceeded(_) => "reversal_succeeded",
        Event::ReversalPending { .. } => "reversal_pending",
        Event::ReversalFoundNothing => "reversal_found_nothing",
        Event::ReversalDeclined { .. } => "reversal_declined",
        Event::ReversalTransient => "reversal_transient",
    }
}

pub fn transition(state: &State, event: Event, policy: &RetryPolicy) -> Outcome {
    let inapplicable = |event: &Event| Rejected::Inapplicable {
        event: event_name(event),
        status: state.status.as_str(),
    };
    let mut next = state.clone();
    match (state.status, event) {
        (Status::Pending, Event::Start) => {
            next.status = Status::InFlight;
            next.attempt = 1;
            Ok((next, vec![Effect::Execute]))
        }
        (Status::InFlight, Event::Succeeded(execution)) => {
            next.status = Status::Succeeded;
            next.execution = execution;
            next.outcome_unknown = false;
            next.next_attempt_at = None;
            next.next_action_type = None;
            let book = if state.method.holds_funds() {
                Effect::PostHold
            } else {
                Effect::CreditFunding
            };
            Ok((next, vec![book]))
        }
        (Status::InFlight, Event::Declined { reason, execution }) => {
            Ok(fail(next, reason, execution))
        }
        (Status::InFlight, Event::Transient { now } | Event::Unknown { now })
            if state.challenge_open() =>
        {
            challenge_unanswered(next, now, policy)
        }
        (Status::InFlight, Event::Transient { now }) => Ok(retry_or_fail(next, now, false, policy)),
        (Status::InFlight, Event::Unknown { now }) => Ok(retry_or_fail(next, now, true, policy)),
        (
            Status::InFlight,
            Event::ActionRequired {
                client_secret,
                next_action_type,
                now,
            },
        ) => action_required(next, client_secret, next_action_type, now, policy),
        (Status::InFlight, Event::RetryDue) if state.challenge_open() => {
            // The challenge's deadline: ask the provider whether the payer
            // finished; the answer decides (still open: challenge_expired).
            // next_attempt_at stays, it is the deadline the answer is held to.
            Ok((next, vec![Effect::Inquire]))
        }
        (Status::InFlight, Event::InquiryFoundNothing) => {
            // Nothing was executed under the key: sending (again) is safe.
            // Also the path of an actor re-activated in flight, which cannot
            // know whether its call left before the crash.
            next.outcome_unknown = false;
            Ok((next, vec![Effect::Execute]))
        }
        (Status::InFlight, Event::ProviderPending { at }) => {
            next.outcome_unknown = true;
            next.next_attempt_at = Some(at);
            Ok((next, vec![Effect::ScheduleRetry { at }]))
        }
        (Status::InFlight, Event::RetryDue) => {
            // A pending operation's check is due: ask, never resend blind.
            next.outcome_unknown = true;
            next.next_attempt_at = None;
            Ok((next, vec![Effect::Inquire]))
        }
        (Status::Retrying, Event::RetryDue) => {
            next.status = Status::InFlight;
            next.attempt += 1;
            next.next_attempt_at = None;
            let effect = if state.outcome_unknown {
                Effect::Inquire
            } else {
                Effect::Execute
            };
            Ok((next, vec![effect]))
        }
        (Status::Succeeded, Event::ReverseRequested) => {
            if !state.method.reversible() {
                return Err(Rejected::NotReversible {
                    method: state.method.as_str(),
                });
            }
            if state.reversal != Reversal::None {
                return Err(Rejected::ReversalUnderWay);
            }
            next.reversal = Reversal::InFlight;
            let effects = if state.method == Method::CardCharge {
                vec![Effect::HoldRefund, Effect::ExecuteReversal]
            } else {
                vec![Effect::ExecuteReversal]
            };
            Ok((next, effects))
        }
        (Status::Succeeded, Event::ReversalSucceeded(execution))
            if state.reversal != Reversal::None =>
        {
            next.status = Status::Reversed;
            next.reversal = Reversal::None;
            merge_reversal(&mut next.execution, execution);
            Ok((next, vec![Effect::PostReversal]))
        }
        (Status::Succeeded, Event::ReversalPending { at }) if state.reversal != Reversal::None => {
            next.reversal = Reversal::PendingAtProvider;
            Ok((next, vec![Effect::ScheduleRetry { at }]))
        }
        (Status::Succeeded, Event::RetryDue) if state.reversal != Reversal::None => {
            Ok((next, vec![Effect::InquireReversal]))
        }
        (Status::Succeeded, Event::ReversalFoundNothing) if state.reversal != Reversal::None => {
            next.reversal = Reversal::InFlight;
            Ok((next, vec![Effect::ExecuteReversal]))
        }
        (Status::Succeeded, Event::ReversalDeclined { action_code })
            if state.reversal != Reversal::None =>
        {
            // The original stands; the decline is the caller's answer (409).
            next.reversal = Reversal::None;
            if action_code.is_some() {
                next.execution.action_code = action_code;
            }
            Ok((next, release_refund(state.method)))
        }
        (Status::Succeeded, Event::ReversalTransient) if state.reversal != Reversal::None => {
            // Definitely not executed: the caller may ask again.
            next.reversal = Reversal::None;
            Ok((next, release_refund(state.method)))
        }
        (
            Status::Pending
            | Status::InFlight
            | Status::Retrying
            | Status::Failed
            | Status::Reversed,
            Event::ReverseRequested,
        ) => Err(Rejected::NotReversibleInStatus {
            status: state.status.as_str(),
        }),
        (
            Status::Pending
            | Status::InFlight
            | Status::Retrying
            | Status::Succeeded
            | Status::Failed
            | Status::Reversed,
            event,
        ) => Err(inapplicable(&event)),
    }
}

fn release_refund(method: Method) -> Vec<Effect> {
    if method == Method::CardCharge {
        vec![Effect::ReleaseRefund]
    } else {
        vec![]
    }
}

/// An on-session charge asks for the payer: the first answer opens the
/// challenge with its deadline; later ones (webhook nudges, the deadline's
/// inquiry) fail it once the deadline has passed and change nothing before.
fn action_required(
    mut next: State,
    client_secret: String,
    next_action_type: String,
    now: DateTime<Utc>,
    policy: &RetryPolicy,
) -> Outcome {
    if !next.challenge_open() {
        let at = now + policy.challenge_ttl;
        next.client_secret = Some(client_secret);
        next.next_action_type = Some(next_action_type);
        next.outcome_unknown = false;
        next.next_attempt_at = Some(at);
        return Ok((next, vec![Effect::ScheduleRetry { at }]));
    }
    if next.challenge_expired_at(now) {
        return Ok(fail(
            next,
            "challenge_expired".to_owned(),
            Execution::default(),
        ));
    }
    Err(Rejected::Unchanged)
}

/// An inquiry about an open challenge could not be answered. Before the
/// deadline nothing changes: the deadline's timer still stands and asks
/// again. After it, keep asking on the retry schedule as for an unknown
/// outcome: the charge exists at the provider, so it is never resent blind
/// nor given up as `provider_unavailable`.
fn challenge_unanswered(next: State, now: DateTime<Utc>, policy: &RetryPolicy) -> Outcome {
    if next.challenge_expired_at(now) {
        Ok(retry_or_fail(next, now, true, policy))
    } else {
        Err(Rejected::Unchanged)
    }
}

fn fail(mut next: State, reason: String, execution: Execution) -> (State, Vec<Effect>) {
    next.status = Status::Failed;
    next.failure_reason = Some(reason);
    next.next_attempt_at = None;
    next.outcome_unknown = false;
    // A challenge ends with the settlement; its client_secret stays on record.
    next.next_action_type = None;
    if execution != Execution::default() {
        next.execution = execution;
    }
    (next, vec![Effect::VoidHold])
}

fn retry_or_fail(
    mut next: State,
    now: DateTime<Utc>,
    unknown: bool,
    policy: &RetryPolicy,
) -> (State, Vec<Effect>) {
    // An unknown outcome is never forgotten: it stays until an inquiry
    // settles it, whatever later attempts report.
    next.outcome_unknown = next.outcome_unknown || unknown;
    match policy.delays.get(next.attempt.saturating_sub(1) as usize) {
        Some(delay) => {
            let at = now + *delay;
            next.status = Status::Retrying;
            next.next_attempt_at = Some(at);
            (next, vec![Effect::ScheduleRetry { at }])
        }
        None if next.outcome_unknown => {
            // Out of attempts but maybe executed: keep asking, never guess.
            let at = now
                + policy
                    .delays
                    .last()
                    .copied()
                    .unwrap_or_else(|| Duration::seconds(60));
            next.status = Status::Retrying;
            next.next_attempt_at = Some(at);
            (next, vec![Effect::ScheduleRetry { at }])
        }
        None => fail(
            next,
            "provider_unavailable".to_owned(),
            Execution::default(),
        ),
    }
}

fn merge_reversal(execution: &mut Execution, reversal: Execution) {
    if reversal.action_code.is_some() {
        execution.action_code = reversal.action_code;
    }
    if reversal.approval_code.is_some() {
        execution.approval_code = reversal.approval_code;
    }
}

#[cfg(test)]
mod tests;
