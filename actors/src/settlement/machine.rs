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
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            delays: vec![Duration::seconds(1), Duration::seconds(4)],
            challenge_ttl: Duration::minutes(15),
        }
    }

    fn action_required(now: DateTime<Utc>) -> Event {
        Event::ActionRequired {
            client_secret: "ch_1_secret_abc".into(),
            next_action_type: "redirect_to_url".into(),
            now,
        }
    }

    /// An on-session charge whose challenge was opened at `now()`.
    fn challenged() -> State {
        State {
            status: Status::InFlight,
            attempt: 1,
            next_attempt_at: Some(now() + Duration::minutes(15)),
            client_secret: Some("ch_1_secret_abc".into()),
            next_action_type: Some("redirect_to_url".into()),
            ..State::new(Method::CardCharge)
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).expect("time")
    }

    fn state(status: Status, method: Method) -> State {
        State {
            status,
            attempt: if status == Status::Pending { 0 } else { 1 },
            ..State::new(method)
        }
    }

    fn approved() -> Execution {
        Execution {
            transaction_identifier: Some("123456789012345".into()),
            action_code: Some("00".into()),
            ..Execution::default()
        }
    }

    fn all_events() -> Vec<Event> {
        vec![
            Event::Start,
            Event::Succeeded(approved()),
            Event::Declined {
                reason: "card_declined".into(),
                execution: Execution::default(),
            },
            Event::Transient { now: now() },
            Event::Unknown { now: now() },
            Event::RetryDue,
            action_required(now()),
            Event::InquiryFoundNothing,
            Event::ProviderPending { at: now() },
            Event::ReverseRequested,
            Event::ReversalSucceeded(Execution::default()),
            Event::ReversalPending { at: now() },
            Event::ReversalFoundNothing,
            Event::ReversalDeclined {
                action_code: Some("05".into()),
            },
            Event::ReversalTransient,
        ]
    }

    const ALL_STATUSES: [Status; 6] = [
        Status::Pending,
        Status::InFlight,
        Status::Retrying,
        Status::Succeeded,
        Status::Failed,
        Status::Reversed,
    ];
    const ALL_METHODS: [Method; 3] = [Method::CardCharge, Method::CardPush, Method::OnChain];

    /// (status, method, event) -> (status after, effects), or `None`: rejected.
    type Row = (Status, Method, Event, Option<(Status, Vec<Effect>)>);

    #[test]
    fn transition_table() {
        let at = |secs| now() + Duration::seconds(secs);
        let rows: Vec<Row> = vec![
            (
                Status::Pending,
                Method::CardPush,
                Event::Start,
                Some((Status::InFlight, vec![Effect::Execute])),
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::Succeeded(approved()),
                Some((Status::Succeeded, vec![Effect::PostHold])),
            ),
            (
                Status::InFlight,
                Method::OnChain,
                Event::Succeeded(approved()),
                Some((Status::Succeeded, vec![Effect::PostHold])),
            ),
            (
                Status::InFlight,
                Method::CardCharge,
                Event::Succeeded(approved()),
                Some((Status::Succeeded, vec![Effect::CreditFunding])),
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::Declined {
                    reason: "x".into(),
                    execution: Execution::default(),
                },
                Some((Status::Failed, vec![Effect::VoidHold])),
            ),
            (
                Status::InFlight,
                Method::CardCharge,
                Event::Declined {
                    reason: "x".into(),
                    execution: Execution::default(),
                },
                Some((Status::Failed, vec![Effect::VoidHold])),
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::Transient { now: now() },
                Some((Status::Retrying, vec![Effect::ScheduleRetry { at: at(1) }])),
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::Unknown { now: now() },
                Some((Status::Retrying, vec![Effect::ScheduleRetry { at: at(1) }])),
            ),
            (
                Status::Retrying,
                Method::CardPush,
                Event::RetryDue,
                Some((Status::InFlight, vec![Effect::Execute])),
            ),
            (
                Status::Succeeded,
                Method::CardPush,
                Event::ReverseRequested,
                Some((Status::Succeeded, vec![Effect::ExecuteReversal])),
            ),
            (
                Status::Succeeded,
                Method::CardCharge,
                Event::ReverseRequested,
                Some((
                    Status::Succeeded,
                    vec![Effect::HoldRefund, Effect::ExecuteReversal],
                )),
            ),
            (
                Status::Succeeded,
                Method::OnChain,
                Event::ReverseRequested,
                None,
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::ReverseRequested,
                None,
            ),
            (
                Status::Failed,
                Method::CardPush,
                Event::ReverseRequested,
                None,
            ),
            (
                Status::Reversed,
                Method::CardPush,
                Event::ReverseRequested,
                None,
            ),
            (
                Status::Pending,
                Method::CardPush,
                Event::Succeeded(approved()),
                None,
            ),
            (
                Status::Succeeded,
                Method::CardPush,
                Event::Succeeded(approved()),
                None,
            ),
            (Status::Failed, Method::CardPush, Event::RetryDue, None),
            (
                Status::InFlight,
                Method::OnChain,
                Event::RetryDue,
                Some((Status::InFlight, vec![Effect::Inquire])),
            ),
            (
                Status::InFlight,
                Method::CardPush,
                Event::InquiryFoundNothing,
                Some((Status::InFlight, vec![Effect::Execute])),
            ),
            (
                Status::InFlight,
                Method::OnChain,
                Event::ProviderPending { at: at(30) },
                Some((Status::InFlight, vec![Effect::ScheduleRetry { at: at(30) }])),
            ),
            (Status::Succeeded, Method::CardPush, Event::RetryDue, None),
            (
                Status::Succeeded,
                Method::CardPush,
                Event::ReversalFoundNothing,
                None,
            ),
            (
                Status::Succeeded,
                Method::CardPush,
                Event::ReversalSucceeded(Execution::default()),
                None,
            ),
            // The first ActionRequired opens the challenge; its deadline is
            // the persisted timer.
            (
                Status::InFlight,
                Method::CardCharge,
                action_required(now()),
                Some((
                    Status::InFlight,
                    vec![Effect::ScheduleRetry { at: at(900) }],
                )),
            ),
            (
                Status::Pending,
                Method::CardCharge,
                action_required(now()),
                None,
            ),
            (
                Status::Retrying,
                Method::CardCharge,
                action_required(now()),
                None,
            ),
            (
                Status::Succeeded,
                Method::CardCharge,
                action_required(now()),
                None,
            ),
        ];
        for (status, method, event, expected) in rows {
            let label = format!("{status:?} {method:?} {event:?}");
            match (
                transition(&state(status, method), event, &policy()),
                expected,
            ) {
                (Ok((next, effects)), Some((expected_status, expected_effects))) => {
                    assert_eq!(
                        (next.status, effects),
                        (expected_status, expected_effects),
                        "{label}"
                    );
                }
                (Err(_), None) => {}
                (outcome, expected) => panic!("{label}: got {outcome:?}, expected {expected:?}"),
            }
        }
    }

    /// The challenge of an on-session charge: the whole state after each
    /// event, since the challenge lives in fields beside the status.
    #[test]
    fn challenge_transition_table() {
        let deadline = now() + Duration::minutes(15);
        let later = |secs| now() + Duration::seconds(secs);
        let retrying_after_deadline = State {
            status: Status::Retrying,
            outcome_unknown: true,
            next_attempt_at: Some(deadline + Duration::seconds(1)),
            ..challenged()
        };
        let asking_after_deadline = State {
            status: Status::InFlight,
            attempt: 2,
            next_attempt_at: None,
            ..retrying_after_deadline.clone()
        };
        let ended = |status: Status, reason: Option<&str>| State {
            status,
            next_attempt_at: None,
            next_action_type: None,
            failure_reason: reason.map(str::to_owned),
            ..challenged()
        };
        let rows: Vec<(&str, State, Event, Outcome)> = vec![
            (
                "the first ask opens the challenge until its deadline",
                state(Status::InFlight, Method::CardCharge),
                action_required(now()),
                Ok((challenged(), vec![Effect::ScheduleRetry { at: deadline }])),
            ),
            (
                "asked again before the deadline: nothing changes",
                challenged(),
                action_required(later(300)),
                Err(Rejected::Unchanged),
            ),
            (
                "asked again at the deadline: expired",
                challenged(),
                action_required(deadline),
                Ok((
                    ended(Status::Failed, Some("challenge_expired")),
                    vec![Effect::VoidHold],
                )),
            ),
            (
                "the deadline's timer asks the provider and keeps the deadline",
                challenged(),
                Event::RetryDue,
                Ok((challenged(), vec![Effect::Inquire])),
            ),
            (
                "the payer finished: the charge succeeds",
                challenged(),
                Event::Succeeded(Execution::default()),
                Ok((ended(Status::Succeeded, None), vec![Effect::CreditFunding])),
            ),
            (
                "the payer declined the challenge",
                challenged(),
                Event::Declined {
                    reason: "authentication_failed".into(),
                    execution: Execution::default(),
                },
                Ok((
                    ended(Status::Failed, Some("authentication_failed")),
                    vec![Effect::VoidHold],
                )),
            ),
            (
                "an unanswered inquiry before the deadline: the timer stands",
                challenged(),
                Event::Transient { now: later(60) },
                Err(Rejected::Unchanged),
            ),
            (
                "an unknown inquiry before the deadline: the timer stands",
                challenged(),
                Event::Unknown { now: later(60) },
                Err(Rejected::Unchanged),
            ),
            (
                "an unanswered inquiry after the deadline: ask again, never resend",
                challenged(),
                Event::Transient { now: deadline },
                Ok((
                    retrying_after_deadline.clone(),
                    vec![Effect::ScheduleRetry {
                        at: deadline + Duration::seconds(1),
                    }],
                )),
            ),
            (
                "the retry after the deadline inquires",
                retrying_after_deadline,
                Event::RetryDue,
                Ok((asking_after_deadline.clone(), vec![Effect::Inquire])),
            ),
            (
                "still open with the deadline gone: expired",
                asking_after_deadline.clone(),
                action_required(now()),
                Ok((
                    State {
                        attempt: 2,
                        ..ended(Status::Failed, Some("challenge_expired"))
                    },
                    vec![Effect::VoidHold],
                )),
            ),
            (
                "an open challenge is not reversible",
                challenged(),
                Event::ReverseRequested,
                Err(Rejected::NotReversibleInStatus {
                    status: "in_flight",
                }),
            ),
        ];
        for (label, start, event, expected) in rows {
            assert_eq!(transition(&start, event, &policy()), expected, "{label}");
        }
    }

    /// On every path of an on-session charge: an open challenge is never
    /// resent blind, and a charge never ends with its challenge still open.
    #[test]
    fn a_challenge_ends_with_its_charge_and_is_never_resent_blind() {
        let policy = policy();
        let deadline = now() + policy.challenge_ttl;
        let outcomes = [
            action_required(now()),
            action_required(deadline),
            Event::Succeeded(approved()),
            Event::Declined {
                reason: "authentication_failed".into(),
                execution: Execution::default(),
            },
            Event::Transient { now: now() },
            Event::Transient { now: deadline },
            Event::RetryDue,
            Event::InquiryFoundNothing,
        ];
        let mut frontier = vec![
            transition(&State::new(Method::CardCharge), Event::Start, &policy)
                .expect("start")
                .0,
        ];
        for _ in 0..6 {
            let mut next_frontier = Vec::new();
            for current in frontier {
                for event in &outcomes {
                    let Ok((next, effects)) = transition(&current, event.clone(), &policy) else {
                        continue;
                    };
                    if current.challenge_open() && effects.contains(&Effect::Execute) {
                        assert_eq!(
                            *event,
                            Event::InquiryFoundNothing,
                            "blind resend of a challenged charge: {current:?}"
                        );
                    }
                    if next.status != Status::InFlight && next.status != Status::Retrying {
                        assert!(
                            !next.challenge_open(),
                            "ended open: {next:?} after {event:?}"
                        );
                    }
                    if current.client_secret.is_some() {
                        assert_eq!(next.client_secret, current.client_secret, "secret kept");
                    }
                    next_frontier.push(next);
                }
            }
            frontier = next_frontier;
        }
    }

    #[test]
    fn terminal_states_stay_terminal_and_execute_nothing() {
        for status in [Status::Failed, Status::Reversed] {
            for method in ALL_METHODS {
                for event in all_events() {
                    if let Ok((next, effects)) =
                        transition(&state(status, method), event.clone(), &policy())
                    {
                        panic!("{status:?} accepted {event:?}: {next:?} {effects:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn transient_failures_retry_on_schedule_then_fail_and_release_the_hold() {
        let policy = policy();
        let mut current = transition(&State::new(Method::CardPush), Event::Start, &policy)
            .expect("start")
            .0;
        for expected_delay in [1, 4] {
            let (next, effects) =
                transition(&current, Event::Transient { now: now() }, &policy).expect("transient");
            assert_eq!(
                effects,
                vec![Effect::ScheduleRetry {
                    at: now() + Duration::seconds(expected_delay)
                }]
            );
            assert_eq!(
                next.next_attempt_at,
                Some(now() + Duration::seconds(expected_delay))
            );
            let (next, effects) = transition(&next, Event::RetryDue, &policy).expect("retry");
            assert_eq!(
                effects,
                vec![Effect::Execute],
                "the same operation, the same key"
            );
            current = next;
        }
        assert_eq!(current.attempt, policy.attempts_max());
        let (last, effects) =
            transition(&current, Event::Transient { now: now() }, &policy).expect("exhausted");
        assert_eq!(
            (last.status, effects),
            (Status::Failed, vec![Effect::VoidHold])
        );
        assert_eq!(last.failure_reason.as_deref(), Some("provider_unavailable"));
    }

    #[test]
    fn an_unknown_outcome_is_inquired_before_any_resend() {
        let policy = policy();
        let started = transition(&State::new(Method::CardPush), Event::Start, &policy)
            .expect("start")
            .0;
        let (unknown, _) =
            transition(&started, Event::Unknown { now: now() }, &policy).expect("unknown");
        assert!(unknown.outcome_unknown);
        let (retry, effects) = transition(&unknown, Event::RetryDue, &policy).expect("due");
        assert_eq!(effects, vec![Effect::Inquire], "ask before sending again");
        // A transient failure of the inquiry keeps the outcome unknown.
        let (again, _) =
            transition(&retry, Event::Transient { now: now() }, &policy).expect("transient");
        let (retry, effects) = transition(&again, Event::RetryDue, &policy).expect("due");
        assert_eq!(effects, vec![Effect::Inquire]);
        // Even out of attempts, an unknown outcome is never guessed.
        let (waiting, effects) =
            transition(&retry, Event::Unknown { now: now() }, &policy).expect("unknown again");
        assert_eq!(waiting.status, Status::Retrying);
        assert!(matches!(effects.as_slice(), [Effect::ScheduleRetry { .. }]));
        // The provider found nothing under the key: now a resend is safe.
        let (inquiring, _) = transition(&waiting, Event::RetryDue, &policy).expect("due");
        let (resend, effects) =
            transition(&inquiring, Event::InquiryFoundNothing, &policy).expect("nothing");
        assert_eq!(effects, vec![Effect::Execute]);
        assert!(!resend.outcome_unknown);
        // The inquiry may instead find the earlier execution.
        let (found, effects) =
            transition(&inquiring, Event::Succeeded(approved()), &policy).expect("found");
        assert_eq!(
            (found.status, effects),
            (Status::Succeeded, vec![Effect::PostHold])
        );
    }

    #[test]
    fn reversals_complete_later_or_are_declined_and_the_original_stands() {
        let policy = policy();
        let succeeded = State {
            status: Status::Succeeded,
            execution: approved(),
            ..State::new(Method::CardPush)
        };
        let (reversing, _) =
            transition(&succeeded, Event::ReverseRequested, &policy).expect("reverse");
        assert_eq!(
            transition(&reversing, Event::ReverseRequested, &policy),
            Err(Rejected::ReversalUnderWay)
        );
        let (pending, effects) =
            transition(&reversing, Event::ReversalPending { at: now() }, &policy).expect("pending");
        assert_eq!(
            (pending.status, pending.reversal, effects),
            (
                Status::Succeeded,
                Reversal::PendingAtProvider,
                vec![Effect::ScheduleRetry { at: now() }]
            )
        );
        let (asking, effects) = transition(&pending, Event::RetryDue, &policy).expect("due");
        assert_eq!(effects, vec![Effect::InquireReversal]);
        let (resending, effects) =
            transition(&asking, Event::ReversalFoundNothing, &policy).expect("nothing");
        assert_eq!(
            (resending.reversal, effects),
            (Reversal::InFlight, vec![Effect::ExecuteReversal])
        );
        let (reversed, effects) = transition(
            &pending,
            Event::ReversalSucceeded(Execution::default()),
            &policy,
        )
        .expect("done");
        assert_eq!(
            (reversed.status, effects),
            (Status::Reversed, vec![Effect::PostReversal])
        );
        let (declined, effects) = transition(
            &reversing,
            Event::ReversalDeclined {
                action_code: Some("05".into()),
            },
            &policy,
        )
        .expect("declined");
        assert_eq!(
            (declined.status, declined.reversal, effects),
            (Status::Succeeded, Reversal::None, vec![])
        );
        assert_eq!(declined.execution.action_code.as_deref(), Some("05"));
    }

    /// Every hold made at creation is either posted or voided, exactly once,
    /// whatever the provider says along the way.
    #[test]
    fn holds_are_settled_exactly_once_on_every_path() {
        let policy = policy();
        let outcomes = [
            Event::Succeeded(approved()),
            Event::Declined {
                reason: "x".into(),
                execution: Execution::default(),
            },
            Event::Transient { now: now() },
            Event::Unknown { now: now() },
            Event::InquiryFoundNothing,
            Event::RetryDue,
            Event::ProviderPending { at: now() },
        ];
        // Explore every sequence of up to 7 provider events.
        let mut frontier = vec![(
            transition(&State::new(Method::CardPush), Event::Start, &policy)
                .expect("start")
                .0,
            0usize,
        )];
        for _ in 0..7 {
            let mut next_frontier = Vec::new();
            for (current, settled) in frontier {
                for event in &outcomes {
                    let Ok((next, effects)) = transition(&current, event.clone(), &policy) else {
                        continue;
                    };
                    let settles = effects
                        .iter()
                        .filter(|e| matches!(e, Effect::PostHold | Effect::VoidHold))
                        .count();
                    let settled = settled + settles;
                    assert!(settled <= 1, "a hold settled twice: {current:?} {event:?}");
                    if matches!(next.status, Status::Succeeded | Status::Failed) {
                        assert_eq!(
                            settled, 1,
                            "reached {:?} without settling the hold",
                            next.status
                        );
                    }
                    if effects.contains(&Effect::Execute) {
                        assert!(
                            !current.outcome_unknown || *event == Event::InquiryFoundNothing,
                            "blind resend after {current:?}"
                        );
                    }
                    next_frontier.push((next, settled));
                }
            }
            frontier = next_frontier;
        }
    }

    /// A refund reserves the money it returns before it is sent, and every
    /// way it can end settles that reservation once.
    #[test]
    fn a_refund_reserves_its_amount_and_settles_the_reservation() {
        let policy = policy();
        let charged = State {
            status: Status::Succeeded,
            ..State::new(Method::CardCharge)
        };
        let (refunding, _) = transition(&charged, Event::ReverseRequested, &policy).expect("go");
        for (event, expected) in [
            (
                Event::ReversalSucceeded(Execution::default()),
                vec![Effect::PostReversal],
            ),
            (
                Event::ReversalDeclined { action_code: None },
                vec![Effect::ReleaseRefund],
            ),
            (Event::ReversalTransient, vec![Effect::ReleaseRefund]),
            (
                Event::ReversalPending { at: now() },
                vec![Effect::ScheduleRetry { at: now() }],
            ),
        ] {
            let label = format!("{event:?}");
            let (_, effects) = transition(&refunding, event, &policy).expect("applies");
            assert_eq!(effects, expected, "{label}");
        }
    }

    #[test]
    fn codes_round_trip() {
        for status in ALL_STATUSES {
            assert_eq!(Status::parse(status.as_str()), Some(status));
        }
        for method in ALL_METHODS {
            assert_eq!(Method::parse(method.as_str()), Some(method));
        }
        assert_eq!(Method::parse("wire"), None);
    }
}
