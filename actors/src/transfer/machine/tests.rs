//! The saga as a table: every (status, event) pair, moved or rejected.

use super::*;

fn policy() -> Policy {
    Policy {
        refund_delays: vec![Duration::seconds(1), Duration::seconds(4)],
    }
}

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("time")
}

fn at(status: Status) -> State {
    let (leg1, leg2) = match status {
        Status::Pending => (LegStatus::NotStarted, LegStatus::NotStarted),
        Status::Leg1InFlight => (LegStatus::InFlight, LegStatus::NotStarted),
        Status::Leg1Succeeded => (LegStatus::Succeeded, LegStatus::NotStarted),
        Status::Leg2InFlight => (LegStatus::Succeeded, LegStatus::InFlight),
        Status::Succeeded => (LegStatus::Succeeded, LegStatus::Succeeded),
        Status::Compensating => (LegStatus::Reversing, LegStatus::Failed),
        Status::Failed => (LegStatus::Failed, LegStatus::NotStarted),
    };
    State {
        status,
        leg1,
        leg2,
        compensation_attempt: u32::from(status == Status::Compensating),
        ..State::new()
    }
}

fn challenge() -> Observed {
    Observed::AwaitingChallenge {
        client_secret: "ch_1_secret_x".into(),
        next_action_type: "redirect_to_url".into(),
    }
}

fn failed(reason: &str) -> Observed {
    Observed::Failed {
        reason: reason.into(),
    }
}

fn not_made() -> Event {
    Event::Refund(Refund::NotMade {
        reason: "declined".into(),
    })
}

fn refused(leg: Leg) -> Event {
    Event::LegRefused {
        leg,
        reason: "leg_key_taken".into(),
    }
}

fn all_events() -> Vec<Event> {
    let mut events = vec![
        Event::Start,
        Event::RetryDue,
        refused(Leg::One),
        refused(Leg::Two),
    ];
    for observed in [
        Observed::InFlight,
        challenge(),
        Observed::Succeeded,
        failed("card_declined"),
        Observed::Reversing,
        Observed::Reversed,
    ] {
        events.push(Event::Leg1(observed.clone()));
        events.push(Event::Leg2(observed));
    }
    events.push(Event::Refund(Refund::Completed));
    events.push(Event::Refund(Refund::Pending));
    events.push(not_made());
    events
}

/// (status, event) -> (status after, leg1 after, leg2 after, effects,
/// statuses passed), or `None`: rejected.
type Row = (
    Status,
    Event,
    Option<(Status, LegStatus, LegStatus, Vec<Effect>, Vec<Status>)>,
);

fn table() -> Vec<Row> {
    use LegStatus as L;
    use Status as S;
    vec![
        (
            S::Pending,
            Event::Start,
            Some((
                S::Leg1InFlight,
                L::InFlight,
                L::NotStarted,
                vec![Effect::StartLeg1],
                vec![S::Leg1InFlight],
            )),
        ),
        (S::Leg1InFlight, Event::Leg1(Observed::InFlight), None),
        (
            S::Leg1InFlight,
            Event::Leg1(challenge()),
            Some((S::Leg1InFlight, L::InFlight, L::NotStarted, vec![], vec![])),
        ),
        (
            S::Leg1InFlight,
            Event::Leg1(Observed::Succeeded),
            Some((
                S::Leg2InFlight,
                L::Succeeded,
                L::InFlight,
                vec![Effect::Convert, Effect::StartLeg2],
                vec![S::Leg1Succeeded, S::Leg2InFlight],
            )),
        ),
        (
            S::Leg1InFlight,
            Event::Leg1(failed("card_declined")),
            Some((S::Failed, L::Failed, L::NotStarted, vec![], vec![S::Failed])),
        ),
        (
            S::Leg2InFlight,
            Event::Leg2(Observed::Succeeded),
            Some((
                S::Succeeded,
                L::Succeeded,
                L::Succeeded,
                vec![],
                vec![S::Succeeded],
            )),
        ),
        (
            S::Leg2InFlight,
            Event::Leg2(failed("card_declined")),
            Some((
                S::Compensating,
                L::Reversing,
                L::Failed,
                vec![Effect::Unconvert, Effect::RequestRefund],
                vec![S::Compensating],
            )),
        ),
        (
            S::Compensating,
            Event::Refund(Refund::Completed),
            Some((S::Failed, L::Reversed, L::Failed, vec![], vec![S::Failed])),
        ),
        (
            S::Compensating,
            Event::Leg1(Observed::Reversed),
            Some((S::Failed, L::Reversed, L::Failed, vec![], vec![S::Failed])),
        ),
        (S::Compensating, Event::Refund(Refund::Pending), None),
        (S::Compensating, Event::Leg1(Observed::Reversing), None),
        // The refund ended without being made while the saga waited.
        (
            S::Compensating,
            Event::Leg1(Observed::Succeeded),
            Some((
                S::Compensating,
                L::Reversing,
                L::Failed,
                vec![Effect::ScheduleRetry {
                    at: now() + Duration::seconds(1),
                }],
                vec![],
            )),
        ),
        (
            S::Compensating,
            not_made(),
            Some((
                S::Compensating,
                L::Reversing,
                L::Failed,
                vec![Effect::ScheduleRetry {
                    at: now() + Duration::seconds(1),
                }],
                vec![],
            )),
        ),
        // No retry is scheduled: the timer is stale.
        (S::Compensating, Event::RetryDue, None),
        // Leg 1 cannot be created: nothing was charged.
        (
            S::Pending,
            refused(Leg::One),
            Some((
                S::Failed,
                L::Failed,
                L::NotStarted,
                vec![],
                vec![S::Leg1InFlight, S::Failed],
            )),
        ),
        // Leg 2 cannot be created after leg 1 charged the payer: refund.
        (
            S::Leg1InFlight,
            refused(Leg::Two),
            Some((
                S::Compensating,
                L::Reversing,
                L::Failed,
                vec![Effect::RequestRefund],
                vec![S::Leg1Succeeded, S::Leg2InFlight, S::Compensating],
            )),
        ),
        // A leg the current status does not start is not refused.
        (S::Pending, refused(Leg::Two), None),
        (S::Leg1InFlight, refused(Leg::One), None),
        (S::Leg2InFlight, refused(Leg::Two), None),
    ]
}

#[test]
fn transition_table() {
    for (status, event, expected) in table() {
        let outcome = transition(&at(status), event.clone(), &policy(), now());
        match (outcome, expected) {
            (Ok(moved), Some((to, leg1, leg2, effects, statuses))) => {
                assert_eq!(
                    (
                        moved.state.status,
                        moved.state.leg1,
                        moved.state.leg2,
                        moved.effects,
                        moved.statuses
                    ),
                    (to, leg1, leg2, effects, statuses),
                    "{status:?} + {event:?}"
                );
            }
            (Err(_), None) => {}
            (outcome, expected) => {
                panic!("{status:?} + {event:?}: got {outcome:?}, expected {expected:?}")
            }
        }
    }
}

/// Every pair not in the table is rejected: the table is the whole
/// machine, and terminal transfers never move again.
#[test]
fn everything_else_is_rejected() {
    let table = table();
    for status in Status::ALL {
        for event in all_events() {
            let listed = table.iter().any(|(s, e, _)| *s == status && *e == event);
            if listed {
                continue;
            }
            assert!(
                transition(&at(status), event.clone(), &policy(), now()).is_err(),
                "{status:?} + {event:?} is not in the table but moved"
            );
        }
    }
}

#[test]
fn refund_retries_then_gives_up_with_an_alert() {
    let policy = policy();
    let mut state = transition(
        &at(Status::Leg2InFlight),
        Event::Leg2(failed("invalid_destination")),
        &policy,
        now(),
    )
    .expect("compensates")
    .state;
    assert_eq!(state.failure_reason.as_deref(), Some("invalid_destination"));
    let mut scheduled = Vec::new();
    for _ in 1..policy.attempts_max() {
        let moved = transition(&state, not_made(), &policy, now()).expect("schedules");
        let [Effect::ScheduleRetry { at }] = moved.effects[..] else {
            panic!("expected a retry: {:?}", moved.effects)
        };
        scheduled.push(at - now());
        // A second answer before the timer changes nothing.
        assert_eq!(
            transition(&moved.state, not_made(), &policy, now()),
            Err(Rejected::Unchanged)
        );
        let retried = transition(&moved.state, Event::RetryDue, &policy, now()).expect("retries");
        assert_eq!(retried.effects, vec![Effect::RequestRefund]);
        state = retried.state;
    }
    assert_eq!(scheduled, policy.refund_delays);
    assert_eq!(state.compensation_attempt, policy.attempts_max());
    let gave_up = transition(&state, not_made(), &policy, now()).expect("gives up");
    assert_eq!(gave_up.state.status, Status::Failed);
    assert_eq!(gave_up.state.leg1, LegStatus::ReverseFailed);
    assert!(gave_up.state.alert.is_some());
    assert!(gave_up.effects.is_empty());
}

#[test]
fn a_challenge_is_shown_until_the_payer_finishes_it() {
    let policy = policy();
    let waiting = transition(
        &at(Status::Leg1InFlight),
        Event::Leg1(challenge()),
        &policy,
        now(),
    )
    .expect("shows the challenge")
    .state;
    let shown = waiting.challenge.clone().expect("challenge");
    assert_eq!(shown.next_action_type.as_deref(), Some("redirect_to_url"));
    assert_eq!(
        transition(&waiting, Event::Leg1(challenge()), &policy, now()),
        Err(Rejected::Unchanged),
        "the same challenge twice is nothing new"
    );
    for outcome in [Observed::Succeeded, failed("authentication_failed")] {
        let done = transition(&waiting, Event::Leg1(outcome), &policy, now())
            .expect("finishes")
            .state;
        let kept = done.challenge.expect("the client secret stays");
        assert_eq!(kept.client_secret, shown.client_secret);
        assert_eq!(kept.next_action_type, None);
    }
}

#[test]
fn resumption_by_status() {
    let cases = [
        (Status::Pending, Resume::Start),
        (Status::Leg1InFlight, Resume::Observe),
        (Status::Leg2InFlight, Resume::Observe),
        (Status::Compensating, Resume::ObserveAndRefund),
        (Status::Succeeded, Resume::Nothing),
        (Status::Failed, Resume::Nothing),
    ];
    for (status, resume) in cases {
        assert_eq!(resumption(&at(status)), resume, "{status:?}");
    }
    let waiting = State {
        next_attempt_at: Some(now()),
        ..at(Status::Compensating)
    };
    assert_eq!(resumption(&waiting), Resume::Observe);
}

#[test]
fn codes_read_back() {
    for status in Status::ALL {
        assert_eq!(Status::parse(status.as_str()), Some(status));
    }
    for leg in LegStatus::ALL {
        assert_eq!(LegStatus::parse(leg.as_str()), Some(leg));
    }
    assert_eq!(Status::parse("lost"), None);
}

#[test]
fn a_refused_leg_2_refunds_leg_1_and_ends_failed() {
    let policy = policy();
    let waiting = transition(
        &at(Status::Leg1InFlight),
        Event::Leg1(challenge()),
        &policy,
        now(),
    )
    .expect("shows the challenge")
    .state;
    let compensating = transition(&waiting, refused(Leg::Two), &policy, now())
        .expect("compensates")
        .state;
    assert_eq!(
        compensating.failure_reason.as_deref(),
        Some("leg_key_taken")
    );
    assert_eq!(compensating.compensation_attempt, 1);
    let kept = compensating
        .challenge
        .clone()
        .expect("the client secret stays");
    assert_eq!(kept.next_action_type, None, "the payer is done");
    assert_eq!(resumption(&compensating), Resume::ObserveAndRefund);
    let done = transition(
        &compensating,
        Event::Refund(Refund::Completed),
        &policy,
        now(),
    )
    .expect("refunded");
    assert_eq!(
        (done.state.status, done.state.leg1, done.state.leg2),
        (Status::Failed, LegStatus::Reversed, LegStatus::Failed)
    );
    assert_eq!(
        transition(&done.state, refused(Leg::Two), &policy, now()),
        Err(Rejected::Inapplicable {
            event: "leg_refused",
            status: "failed"
        }),
        "terminal stays terminal"
    );
}
