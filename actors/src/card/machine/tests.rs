//! The card machine as tables: one per event family, rows of (state,
//! event, expected status and effects or rejection).

use super::*;

use chrono::NaiveDateTime;
use Effect as E;
use Event as V;
use Operation as O;
use Status as S;

fn at(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
}

fn now() -> NaiveDateTime {
    at("2026-11-25 12:00:00")
}

fn card(status: Status) -> State {
    State {
        status,
        currency: "USD".into(),
        limits: Limits::OPEN,
        spend: Spend::empty(now()),
        replacing: false,
    }
}

fn replacement() -> State {
    State {
        replacing: true,
        ..card(S::Issuing)
    }
}

type Row = (State, Event, Result<(Status, Vec<Effect>), Rejected>);

/// Runs a table: each row's next status and effects, or its rejection.
fn check(rows: Vec<Row>) {
    for (state, event, expected) in rows {
        let got = transition(&state, event.clone()).map(|(next, effects)| (next.status, effects));
        assert_eq!(got, expected, "{:?} {event:?}", state.status);
    }
}

fn inapplicable(event: &'static str, status: Status) -> Result<(Status, Vec<Effect>), Rejected> {
    Err(Rejected::Inapplicable {
        event,
        status: status.as_str(),
    })
}

#[test]
fn issue_outcomes() {
    check(vec![
        (
            card(S::Issuing),
            V::Issue,
            Ok((S::Issuing, vec![E::AskIssuer])),
        ),
        (card(S::Active), V::Issue, Ok((S::Active, vec![]))),
        (card(S::Closed), V::Issue, Ok((S::Closed, vec![]))),
        (
            card(S::Issuing),
            V::Issued,
            Ok((S::Active, vec![E::Persist, E::Audit("card.issued")])),
        ),
        (
            replacement(),
            V::Issued,
            Ok((
                S::Active,
                vec![E::Persist, E::Audit("card.issued"), E::BlockReplaced],
            )),
        ),
        (
            card(S::Issuing),
            V::NotIssued,
            Ok((S::Issuing, vec![E::Abandon])),
        ),
        (
            card(S::Issuing),
            V::IssueUnknown,
            Ok((S::Issuing, vec![E::ScheduleResume])),
        ),
        (
            card(S::Active),
            V::Issued,
            inapplicable("issued", S::Active),
        ),
        (
            card(S::Frozen),
            V::NotIssued,
            inapplicable("not_issued", S::Frozen),
        ),
        (
            card(S::Closed),
            V::IssueUnknown,
            inapplicable("issue_unknown", S::Closed),
        ),
    ]);
}

#[test]
fn lifecycle() {
    let told = |status, action| {
        Ok((
            status,
            vec![E::TellIssuer(status), E::Persist, E::Audit(action)],
        ))
    };
    let refused = |refusal| Err(Rejected::Refused(refusal));
    let replaced = Ok((
        S::Blocked,
        vec![E::Persist, E::Audit("card.replaced"), E::IssueReplacement],
    ));
    let provisioned = |status| {
        Ok((
            status,
            vec![
                E::RequestWalletToken,
                E::Persist,
                E::Audit("card.wallet_requested"),
            ],
        ))
    };
    check(vec![
        (
            card(S::Active),
            V::Operate(O::Freeze),
            told(S::Frozen, "card.frozen"),
        ),
        (
            card(S::Frozen),
            V::Operate(O::Unfreeze),
            told(S::Active, "card.unfrozen"),
        ),
        (
            card(S::Active),
            V::Operate(O::Close),
            told(S::Closed, "card.closed"),
        ),
        (
            card(S::Frozen),
            V::Operate(O::Close),
            told(S::Closed, "card.closed"),
        ),
        (
            card(S::Blocked),
            V::Operate(O::Close),
            told(S::Closed, "card.closed"),
        ),
        // A repeated close writes nothing.
        (
            card(S::Closed),
            V::Operate(O::Close),
            Ok((S::Closed, vec![])),
        ),
        (
            card(S::Frozen),
            V::Operate(O::Freeze),
            refused(Refusal::AlreadyFrozen),
        ),
        (
            card(S::Active),
            V::Operate(O::Unfreeze),
            refused(Refusal::NotFrozen),
        ),
        (
            card(S::Blocked),
            V::Operate(O::Freeze),
            refused(Refusal::Blocked),
        ),
        (
            card(S::Closed),
            V::Operate(O::Freeze),
            refused(Refusal::Closed),
        ),
        (
            card(S::Issuing),
            V::Operate(O::Freeze),
            refused(Refusal::NotIssued),
        ),
        (card(S::Active), V::Operate(O::Replace), replaced.clone()),
        (card(S::Frozen), V::Operate(O::Replace), replaced.clone()),
        (card(S::Blocked), V::Operate(O::Replace), replaced),
        (
            card(S::Closed),
            V::Operate(O::Replace),
            refused(Refusal::Closed),
        ),
        (
            card(S::Active),
            V::Operate(O::RevealDetails),
            Ok((S::Active, vec![])),
        ),
        (
            card(S::Issuing),
            V::Operate(O::RevealDetails),
            refused(Refusal::NotIssued),
        ),
        (
            card(S::Active),
            V::Operate(O::ProvisionWallet),
            provisioned(S::Active),
        ),
        (
            card(S::Frozen),
            V::Operate(O::ProvisionWallet),
            provisioned(S::Frozen),
        ),
        (
            card(S::Blocked),
            V::Operate(O::ProvisionWallet),
            refused(Refusal::Blocked),
        ),
    ]);
}

#[test]
fn updates() {
    let update = |name_changed, limits| V::Update {
        name_changed,
        limits,
    };
    let invalid = vec![("daily_spend_minor", "must be between".to_owned())];
    check(vec![
        (
            card(S::Active),
            update(false, LimitsChange::Same),
            Ok((S::Active, vec![])),
        ),
        (
            card(S::Frozen),
            update(true, LimitsChange::Same),
            Ok((S::Frozen, vec![E::Persist, E::Audit("card.updated")])),
        ),
        (
            card(S::Blocked),
            update(false, LimitsChange::Changed),
            Ok((
                S::Blocked,
                vec![E::Persist, E::Audit("card.limits_updated")],
            )),
        ),
        (
            card(S::Active),
            update(true, LimitsChange::Changed),
            Ok((
                S::Active,
                vec![
                    E::Persist,
                    E::Audit("card.updated"),
                    E::Audit("card.limits_updated"),
                ],
            )),
        ),
        (
            card(S::Active),
            update(true, LimitsChange::Invalid(invalid.clone())),
            Err(Rejected::InvalidLimits(invalid.clone())),
        ),
        // The status refuses before the limits are judged.
        (
            card(S::Closed),
            update(false, LimitsChange::Invalid(invalid)),
            Err(Rejected::Refused(Refusal::Closed)),
        ),
        (
            card(S::Issuing),
            update(true, LimitsChange::Same),
            Err(Rejected::Refused(Refusal::NotIssued)),
        ),
    ]);
}

fn request(amount_minor: i64, channel: Channel) -> Authorization {
    Authorization {
        amount_minor: MinorUnits::new(amount_minor),
        currency: "USD".into(),
        channel,
        country: "US".into(),
        at: now(),
    }
}

fn authorize(request: Authorization) -> Event {
    V::Authorize {
        request,
        owners: Ok(()),
    }
}

#[test]
fn authorizations() {
    let limited = State {
        limits: Limits {
            per_transaction_minor: Some(MinorUnits::new(500)),
            ..Limits::OPEN
        },
        ..card(S::Active)
    };
    let hold = |amount_minor| Ok((S::Active, vec![E::Hold { amount_minor }]));
    let declined = |status, reason| Ok((status, vec![E::Decline(reason)]));
    check(vec![
        (
            card(S::Active),
            authorize(request(100, Channel::Pos)),
            hold(MinorUnits::new(100)),
        ),
        (
            limited.clone(),
            authorize(request(500, Channel::Pos)),
            hold(MinorUnits::new(500)),
        ),
        (
            limited,
            authorize(request(501, Channel::Pos)),
            declined(S::Active, Decline::PerTransactionLimit),
        ),
        (
            card(S::Frozen),
            authorize(request(100, Channel::Pos)),
            declined(S::Frozen, Decline::CardFrozen),
        ),
        (
            card(S::Issuing),
            authorize(request(100, Channel::Pos)),
            declined(S::Issuing, Decline::CardNotIssued),
        ),
        (
            card(S::Active),
            authorize(Authorization {
                currency: "EUR".into(),
                ..request(100, Channel::Pos)
            }),
            declined(S::Active, Decline::CurrencyMismatch),
        ),
        // The owners' standing comes before the card's own reasons.
        (
            card(S::Frozen),
            V::Authorize {
                request: request(100, Channel::Pos),
                owners: Err(Decline::MerchantInactive),
            },
            declined(S::Frozen, Decline::MerchantInactive),
        ),
        (
            card(S::Active),
            V::Authorize {
                request: request(100, Channel::Pos),
                owners: Err(Decline::UserDisabled),
            },
            declined(S::Active, Decline::UserDisabled),
        ),
        (
            card(S::Active),
            V::HoldRefused(Decline::InsufficientFunds),
            declined(S::Active, Decline::InsufficientFunds),
        ),
        (
            card(S::Active),
            V::HoldRefused(Decline::AmountTooLarge),
            declined(S::Active, Decline::AmountTooLarge),
        ),
    ]);
}

#[test]
fn an_approval_counts_against_the_spend_windows_and_a_decline_does_not() {
    let state = card(S::Active);
    let (approved, _) = transition(&state, authorize(request(70, Channel::Atm))).unwrap();
    assert_eq!(
        (
            approved.spend.day_minor.get(),
            approved.spend.atm_day_minor.get(),
            approved.spend.month_minor.get()
        ),
        (70, 70, 70)
    );
    let (declined, _) = transition(&state, authorize(request(0, Channel::Atm))).unwrap();
    assert_eq!(declined, state);
}

#[test]
fn clearings() {
    let clear = |held_minor, asked_minor| V::Clear {
        held_minor,
        asked_minor,
    };
    let active = || card(S::Active);
    check(vec![
        (
            active(),
            clear(Some(MinorUnits::new(100)), None),
            Ok((S::Active, vec![E::PostHold])),
        ),
        (
            active(),
            clear(Some(MinorUnits::new(100)), Some(MinorUnits::new(100))),
            Ok((S::Active, vec![E::PostHold])),
        ),
        // Above the hold clears at the hold.
        (
            active(),
            clear(Some(MinorUnits::new(100)), Some(MinorUnits::new(150))),
            Ok((S::Active, vec![E::PostHold])),
        ),
        (
            active(),
            clear(Some(MinorUnits::new(100)), Some(MinorUnits::new(40))),
            Ok((
                S::Active,
                vec![
                    E::VoidHold,
                    E::PostClearing {
                        amount_minor: MinorUnits::new(40),
                    },
                ],
            )),
        ),
        (
            active(),
            clear(Some(MinorUnits::new(100)), Some(MinorUnits::ZERO)),
            Ok((S::Active, vec![E::VoidHold])),
        ),
        (
            active(),
            clear(None, Some(MinorUnits::new(40))),
            Ok((S::Active, vec![E::Ignore])),
        ),
        // A negative hold cannot be approved; were one read, the clearing
        // voids it rather than panicking inside the actor.
        (
            active(),
            clear(Some(MinorUnits::new(-5)), Some(MinorUnits::new(40))),
            Ok((S::Active, vec![E::VoidHold])),
        ),
        // A card closed since still clears what it authorized.
        (
            card(S::Closed),
            clear(Some(MinorUnits::new(100)), None),
            Ok((S::Closed, vec![E::PostHold])),
        ),
    ]);
}

#[test]
fn refunds() {
    let refund = |amount_minor, currency: &str| V::Refund {
        amount_minor,
        currency: currency.into(),
    };
    check(vec![
        (
            card(S::Active),
            refund(MinorUnits::new(250), "USD"),
            Ok((
                S::Active,
                vec![E::CreditRefund {
                    amount_minor: MinorUnits::new(250),
                }],
            )),
        ),
        (
            card(S::Closed),
            refund(MinorUnits::new(250), "USD"),
            Ok((
                S::Closed,
                vec![E::CreditRefund {
                    amount_minor: MinorUnits::new(250),
                }],
            )),
        ),
        (
            card(S::Active),
            refund(MinorUnits::new(250), "EUR"),
            Ok((S::Active, vec![E::Ignore])),
        ),
        (
            card(S::Active),
            refund(MinorUnits::ZERO, "USD"),
            Ok((S::Active, vec![E::Ignore])),
        ),
        (
            card(S::Active),
            refund(MinorUnits::new(-5), "USD"),
            Ok((S::Active, vec![E::Ignore])),
        ),
    ]);
}

#[test]
fn reversals() {
    let reverse = |held_minor, asked_minor| V::Reverse {
        held_minor,
        asked_minor,
    };
    let part = |released: i64, remaining: i64| {
        vec![
            E::VoidHold,
            E::HoldRest {
                amount_minor: MinorUnits::new(remaining),
            },
            E::RecordRelease {
                amount_minor: MinorUnits::new(released),
            },
        ]
    };
    let all = |released: i64| {
        vec![
            E::VoidHold,
            E::EndAuthorization(CardTransactionStatus::Reversed),
            E::CancelExpiry,
            E::RecordRelease {
                amount_minor: MinorUnits::new(released),
            },
        ]
    };
    let ignored = Ok((S::Active, vec![E::Ignore]));
    check(vec![
        // The rest of the hold, or at least all of it: the hold ends.
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), None),
            Ok((S::Active, all(100))),
        ),
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(100))),
            Ok((S::Active, all(100))),
        ),
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(150))),
            Ok((S::Active, all(100))),
        ),
        // Part of it: the rest is held anew.
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(40))),
            Ok((S::Active, part(40, 60))),
        ),
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(99))),
            Ok((S::Active, part(99, 1))),
        ),
        // Nothing asked, nothing held, or no open hold (unknown, cleared,
        // or reversed already: a replayed reversal under a new event id).
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::ZERO)),
            ignored.clone(),
        ),
        (
            card(S::Active),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(-5))),
            ignored.clone(),
        ),
        (
            card(S::Active),
            reverse(Some(MinorUnits::ZERO), None),
            ignored.clone(),
        ),
        (
            card(S::Active),
            reverse(None, Some(MinorUnits::new(40))),
            ignored.clone(),
        ),
        (card(S::Active), reverse(None, None), ignored),
        // A hold is released whatever became of the card.
        (
            card(S::Frozen),
            reverse(Some(MinorUnits::new(100)), None),
            Ok((S::Frozen, all(100))),
        ),
        (
            card(S::Closed),
            reverse(Some(MinorUnits::new(100)), Some(MinorUnits::new(40))),
            Ok((S::Closed, part(40, 60))),
        ),
    ]);
}

#[test]
fn hold_expiries() {
    let expire = |held_minor| V::ExpireHold { held_minor };
    let released = |held| {
        vec![
            E::VoidHold,
            E::EndAuthorization(CardTransactionStatus::Expired),
            E::RecordRelease { amount_minor: held },
        ]
    };
    check(vec![
        (
            card(S::Active),
            expire(Some(MinorUnits::new(100))),
            Ok((S::Active, released(MinorUnits::new(100)))),
        ),
        (
            card(S::Closed),
            expire(Some(MinorUnits::new(1))),
            Ok((S::Closed, released(MinorUnits::new(1)))),
        ),
        // Cleared, reversed or expired already: a late firing does nothing.
        (
            card(S::Active),
            expire(None),
            Ok((S::Active, vec![E::Ignore])),
        ),
        (
            card(S::Closed),
            expire(None),
            Ok((S::Closed, vec![E::Ignore])),
        ),
    ]);
}

#[test]
fn wallet_updates() {
    let updated = |status, token| V::WalletUpdated { status, token };
    let follows = Ok((
        S::Active,
        vec![
            E::UpdateWalletToken,
            E::Persist,
            E::Audit("card.wallet_updated"),
        ],
    ));
    let mut rows: Vec<Row> = WalletTokenStatus::ALL
        .into_iter()
        .map(|status| {
            (
                card(S::Active),
                updated(Some(status), Token::Recorded),
                follows.clone(),
            )
        })
        .collect();
    // A status the issuer reports that Tern does not know.
    for token in [Token::Recorded, Token::Pending, Token::Unknown] {
        rows.push((
            card(S::Active),
            updated(None, token),
            Ok((S::Active, vec![E::Ignore])),
        ));
    }
    rows.push((
        card(S::Active),
        updated(Some(WalletTokenStatus::Active), Token::Unknown),
        Ok((S::Active, vec![E::Ignore])),
    ));
    // Its provisioning's answer was lost: the update proves the issuer
    // made it.
    rows.push((
        card(S::Active),
        updated(Some(WalletTokenStatus::Active), Token::Pending),
        Ok((S::Active, vec![E::FinishProvisioning])),
    ));
    check(rows);
}

/// Closed accepts nothing that changes it; whatever comes, it stays
/// closed.
#[test]
fn closed_is_terminal() {
    let events = [
        V::Issue,
        V::Issued,
        V::Operate(O::Close),
        V::Operate(O::Unfreeze),
        authorize(request(1, Channel::Pos)),
        V::Clear {
            held_minor: Some(MinorUnits::new(1)),
            asked_minor: None,
        },
        V::Reverse {
            held_minor: Some(MinorUnits::new(1)),
            asked_minor: None,
        },
        V::ExpireHold {
            held_minor: Some(MinorUnits::new(1)),
        },
    ];
    for event in events {
        if let Ok((next, effects)) = transition(&card(S::Closed), event.clone()) {
            assert_eq!(next.status, S::Closed, "{event:?}");
            assert!(!effects.contains(&E::Persist), "{event:?}");
        }
    }
}
