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
    let (reversing, _) = transition(&succeeded, Event::ReverseRequested, &policy).expect("reverse");
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
