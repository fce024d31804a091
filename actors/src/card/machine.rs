//! The card's pure state machine: `transition(state, event)` answers the
//! card's next state and the effects the actor carries out (persist, ask
//! the issuer, hold or post ledger entries, audit). No I/O, no clock: the
//! time, the issuer's outcome and the ledger's refusals arrive inside
//! events. The status table (`status`), the authorization decision
//! (`spending`) and how much a reversal releases (`release`) are the rules
//! it applies.
//!
//! Status moves: issuing -> active (or the intent is abandoned); active <->
//! frozen; active | frozen | blocked -> blocked (replaced) | closed; closed
//! is terminal.

mod release;
mod spending;
mod status;

pub use release::{release, Release};
pub use spending::{
    check_limits, decide, domestic_countries, window_starts, Authorization, Channel, Decline,
    Limits, Spend, LIMIT_MAX_MINOR,
};
pub use status::{apply, Accepted, Operation, Refusal, Status};
pub use tern_schema::vocabulary::CardTransactionStatus;
pub use tern_schema::vocabulary::WalletTokenStatus;

use tern_schema::money::MinorUnits;

/// What the machine knows of a card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub status: Status,
    pub currency: String,
    pub limits: Limits,
    /// What the card's approved authorizations add up to in the current
    /// windows.
    pub spend: Spend,
    /// The card was issued in place of another, which the issuer blocks
    /// once this one is issued.
    pub replacing: bool,
}

/// What a card's limits patch comes to, judged against its current limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitsChange {
    Same,
    Changed,
    /// Out of bounds or out of order (422), per field.
    Invalid(Vec<(&'static str, String)>),
}

/// Something that happened to the card, or that is asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Issue the card its intent describes (at creation, on activation or
    /// when the resume timer fires).
    Issue,
    /// The issuer issued the card.
    Issued,
    /// The issuer did not issue it: the intent is abandoned.
    NotIssued,
    /// Nobody knows yet whether the issuer issued it.
    IssueUnknown,
    /// Freeze, unfreeze, close, replace, reveal details or provision a
    /// wallet token.
    Operate(Operation),
    /// A new display name and/or limits.
    Update {
        name_changed: bool,
        limits: LimitsChange,
    },
    /// An authorization request, decided except for the funds; `owners`
    /// is whether the card's merchant and user may spend, which comes
    /// before the card's own reasons.
    Authorize {
        request: Authorization,
        owners: Result<(), Decline>,
    },
    /// An approved request the ledger could not hold after all.
    HoldRefused(Decline),
    /// A clearing of an authorization: `held_minor` is its open hold, `None`
    /// when the authorization is unknown or ended.
    Clear {
        held_minor: Option<MinorUnits>,
        asked_minor: Option<MinorUnits>,
    },
    Refund {
        amount_minor: MinorUnits,
        currency: String,
    },
    /// The network's reversal of an authorization: `held_minor` is its open
    /// hold, `None` when the authorization is unknown or ended;
    /// `asked_minor` is what it releases, `None` the rest of the hold.
    Reverse {
        held_minor: Option<MinorUnits>,
        asked_minor: Option<MinorUnits>,
    },
    /// An authorization's hold outlived its lifetime: `held_minor` is what
    /// it still holds, `None` when something ended it first.
    ExpireHold { held_minor: Option<MinorUnits> },
    /// The issuer's new status of one of the card's wallet tokens (`None`
    /// when it is not a status Tern knows).
    WalletUpdated {
        status: Option<WalletTokenStatus>,
        token: Token,
    },
}

/// Whether the card has the token a wallet update names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token {
    Recorded,
    /// Asked of the issuer, whose answer is not recorded yet (it was lost;
    /// the provisioning's intent will record it).
    Pending,
    /// Not the card's.
    Unknown,
}

/// Work the actor carries out, in order, for a transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Ask the issuer for the card under the card's id as key.
    AskIssuer,
    /// Remove the intent and give a replaced card back its status.
    Abandon,
    /// Persist the timer that asks the issuer again later.
    ScheduleResume,
    /// Tell the issuer of the card's new status first, the change's intent
    /// written before the call so that a lost answer or a crash cannot
    /// leave the issuer ahead of Tern: if the issuer cannot follow,
    /// nothing changes.
    TellIssuer(Status),
    /// Write the card's row at its next version, with the next status.
    Persist,
    /// Tell the issuer the card this one replaces is blocked.
    BlockReplaced,
    /// Write the new card's intent with this one's blocking, and issue it.
    IssueReplacement,
    /// Provision a wallet token at the issuer and write it.
    RequestWalletToken,
    /// Write a wallet token's new status.
    UpdateWalletToken,
    /// Hold the amount on the funding account; approve when it fits.
    Hold { amount_minor: MinorUnits },
    /// Record the request as declined.
    Decline(Decline),
    /// Post the whole hold: the clearing takes all of it.
    PostHold,
    /// Release the hold: the clearing takes less than it, or a reversal or
    /// an expiry gives (part of) it back.
    VoidHold,
    /// Post a clearing for less than its hold (after voiding the hold).
    PostClearing { amount_minor: MinorUnits },
    /// Credit a refund back to the funding account.
    CreditRefund { amount_minor: MinorUnits },
    /// Hold anew what a partial reversal left (after voiding the hold): the
    /// authorization stays open on the new hold.
    HoldRest { amount_minor: MinorUnits },
    /// The authorization ends as `reversed` or `expired`, holding nothing.
    EndAuthorization(CardTransactionStatus),
    /// Cancel the hold's expiry timer: something else ended the hold.
    CancelExpiry,
    /// Record what went back to the funding account (a reversal or an
    /// expiry), naming the void.
    RecordRelease { amount_minor: MinorUnits },
    /// Record an audit record with this action.
    Audit(&'static str),
    /// Nothing to record: the event names nothing the card can act on.
    Ignore,
    /// The token an update names is still being provisioned (the issuer's
    /// answer was lost): finish that first, then hear the update again.
    FinishProvisioning,
}

/// Why the card does not do what an event asks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// The status table refuses the operation (409 with its code).
    #[error("{}", .0.detail())]
    Refused(Refusal),
    /// The limits asked for are out of bounds or out of order (422).
    #[error("invalid limits")]
    InvalidLimits(Vec<(&'static str, String)>),
    /// The event does not apply to a card in this status (an issuer's
    /// outcome for a card not being issued).
    #[error("event {event} does not apply to a {status} card")]
    Inapplicable {
        event: &'static str,
        status: &'static str,
    },
}

pub type Outcome = Result<(State, Vec<Effect>), Rejected>;

fn event_name(event: &Event) -> &'static str {
    match event {
        Event::Issue => "issue",
        Event::Issued => "issued",
        Event::NotIssued => "not_issued",
        Event::IssueUnknown => "issue_unknown",
        Event::Operate(_) => "operate",
        Event::Update { .. } => "update",
        Event::Authorize { .. } => "authorize",
        Event::HoldRefused(_) => "hold_refused",
        Event::Clear { .. } => "clear",
        Event::Refund { .. } => "refund",
        Event::Reverse { .. } => "reverse",
        Event::ExpireHold { .. } => "expire_hold",
        Event::WalletUpdated { .. } => "wallet_updated",
    }
}

pub fn transition(state: &State, event: Event) -> Outcome {
    let inapplicable = |event: &Event| Rejected::Inapplicable {
        event: event_name(event),
        status: state.status.as_str(),
    };
    let mut next = state.clone();
    let issuing = state.status == Status::Issuing;
    match event {
        Event::Issue if issuing => Ok((next, vec![Effect::AskIssuer])),
        // Issued already (a late timer, a repeated request): as it is.
        Event::Issue => Ok((next, vec![])),
        Event::Issued if issuing => {
            next.status = Status::Active;
            let mut effects = vec![Effect::Persist, Effect::Audit("card.issued")];
            if state.replacing {
                effects.push(Effect::BlockReplaced);
            }
            Ok((next, effects))
        }
        Event::NotIssued if issuing => Ok((next, vec![Effect::Abandon])),
        Event::IssueUnknown if issuing => Ok((next, vec![Effect::ScheduleResume])),
        event @ (Event::Issued | Event::NotIssued | Event::IssueUnknown) => {
            Err(inapplicable(&event))
        }
        Event::Operate(operation) => operate(next, operation),
        Event::Update {
            name_changed,
            limits,
        } => {
            apply(state.status, Operation::Update).map_err(Rejected::Refused)?;
            let limits_changed = match limits {
                LimitsChange::Invalid(errors) => return Err(Rejected::InvalidLimits(errors)),
                LimitsChange::Same => false,
                LimitsChange::Changed => true,
            };
            if !name_changed && !limits_changed {
                return Ok((next, vec![]));
            }
            let mut effects = vec![Effect::Persist];
            if name_changed {
                effects.push(Effect::Audit("card.updated"));
            }
            if limits_changed {
                effects.push(Effect::Audit("card.limits_updated"));
            }
            Ok((next, effects))
        }
        Event::Authorize { request, owners } => {
            let decided = decide(
                state.status,
                &state.currency,
                &state.limits,
                state.spend,
                &request,
            );
            match owners.and(decided) {
                Ok(()) => {
                    next.spend = state
                        .spend
                        .add(request.at, request.amount_minor, request.channel);
                    let amount_minor = request.amount_minor;
                    Ok((next, vec![Effect::Hold { amount_minor }]))
                }
                Err(reason) => Ok((next, vec![Effect::Decline(reason)])),
            }
        }
        Event::HoldRefused(reason) => Ok((next, vec![Effect::Decline(reason)])),
        Event::Clear {
            held_minor,
            asked_minor,
        } => {
            let Some(held) = held_minor else {
                return Ok((next, vec![Effect::Ignore]));
            };
            // A clearing never takes more than was held: the network settles
            // any excess as a new authorization. `min` then `max`, not
            // `clamp`: clamp panics when the bounds cross (a negative hold).
            let amount_minor = asked_minor.unwrap_or(held).min(held).max(MinorUnits::ZERO);
            let effects = if amount_minor == held {
                vec![Effect::PostHold]
            } else if amount_minor.is_positive() {
                vec![Effect::VoidHold, Effect::PostClearing { amount_minor }]
            } else {
                vec![Effect::VoidHold]
            };
            Ok((next, effects))
        }
        Event::Refund {
            amount_minor,
            currency,
        } => {
            if currency != state.currency || !amount_minor.is_positive() {
                return Ok((next, vec![Effect::Ignore]));
            }
            Ok((next, vec![Effect::CreditRefund { amount_minor }]))
        }
        // Whatever the card's status: a hold is released even on a closed
        // card, and only an open hold can be.
        Event::Reverse {
            held_minor,
            asked_minor,
        } => {
            let released = held_minor.map_or(Release::Nothing, |held| release(held, asked_minor));
            let effects = match released {
                Release::Nothing => vec![Effect::Ignore],
                Release::Part {
                    released_minor,
                    remaining_minor,
                } => vec![
                    Effect::VoidHold,
                    Effect::HoldRest {
                        amount_minor: remaining_minor,
                    },
                    Effect::RecordRelease {
                        amount_minor: released_minor,
                    },
                ],
                Release::All { released_minor } => vec![
                    Effect::VoidHold,
                    Effect::EndAuthorization(CardTransactionStatus::Reversed),
                    Effect::CancelExpiry,
                    Effect::RecordRelease {
                        amount_minor: released_minor,
                    },
                ],
            };
            Ok((next, effects))
        }
        // The firing timer is the expiry's own: it completes with the
        // release, so there is nothing to cancel.
        Event::ExpireHold { held_minor } => {
            let Some(held) = held_minor else {
                return Ok((next, vec![Effect::Ignore]));
            };
            Ok((
                next,
                vec![
                    Effect::VoidHold,
                    Effect::EndAuthorization(CardTransactionStatus::Expired),
                    Effect::RecordRelease { amount_minor: held },
                ],
            ))
        }
        Event::WalletUpdated { status, token } => {
            match (status, token) {
                (None, _) | (_, Token::Unknown) => return Ok((next, vec![Effect::Ignore])),
                (Some(_), Token::Pending) => return Ok((next, vec![Effect::FinishProvisioning])),
                (Some(_), Token::Recorded) => {}
            }
            Ok((
                next,
                vec![
                    Effect::UpdateWalletToken,
                    Effect::Persist,
                    Effect::Audit("card.wallet_updated"),
                ],
            ))
        }
    }
}

/// An operation through the status table.
fn operate(mut next: State, operation: Operation) -> Outcome {
    let Accepted {
        next: status,
        changes,
    } = apply(next.status, operation).map_err(Rejected::Refused)?;
    if !changes {
        return Ok((next, vec![]));
    }
    next.status = status;
    // The issuer follows a status change first: if it cannot, nothing
    // changes here either.
    let told = |action| {
        vec![
            Effect::TellIssuer(status),
            Effect::Persist,
            Effect::Audit(action),
        ]
    };
    let effects = match operation {
        Operation::Freeze => told("card.frozen"),
        Operation::Unfreeze => told("card.unfrozen"),
        Operation::Close => told("card.closed"),
        Operation::Replace => vec![
            Effect::Persist,
            Effect::Audit("card.replaced"),
            Effect::IssueReplacement,
        ],
        Operation::ProvisionWallet => vec![
            Effect::RequestWalletToken,
            Effect::Persist,
            Effect::Audit("card.wallet_requested"),
        ],
        // Through `Event::Update`, which knows what changes; reading the
        // details changes nothing.
        Operation::Update | Operation::RevealDetails => vec![],
    };
    Ok((next, effects))
}

#[cfg(test)]
mod tests;
