//! The card's lifecycle after issue: freeze, unfreeze and close (the
//! issuer follows first), and changes to its name and limits.
//!
//! A status change's intent (`intent`) is written before the issuer is
//! told: a timer naming the operation, one per card, so a later change
//! replaces it. Telling the issuer a status it already has succeeds, so
//! finishing a change repeats nothing there.

use serde_json::json;

use tern_schema::vocabulary::CardId;

use super::intent::{self, Intent};
use super::kind::{CardContext, CardState};
use super::machine::{Effect, Event, LimitsChange, Operation, Status};
use super::messages::{CardFailure, CardReply, LimitsPatch, Origin};
use super::record::record;
use super::write::{answer, commit_step, decided, rejected, runtime_error, unexpected, Step};
use crate::ports::{IssuerStatus, ProviderError};
use crate::runtime::{self, EntityEnv, TimerFiring};

/// Payload prefix of the timer that finishes a status change:
/// `change:freeze`, `change:unfreeze`, `change:close`.
const TIMER_FINISH_CHANGE: &str = "change:";

fn issuer_status(status: Status) -> Option<IssuerStatus> {
    match status {
        Status::Active => Some(IssuerStatus::Active),
        Status::Frozen => Some(IssuerStatus::Frozen),
        Status::Blocked => Some(IssuerStatus::Blocked),
        Status::Closed => Some(IssuerStatus::Closed),
        Status::Issuing => None,
    }
}

/// The status change a finishing timer's payload names.
pub(super) fn finishing(payload: &str) -> Option<Operation> {
    match payload.strip_prefix(TIMER_FINISH_CHANGE)? {
        "freeze" => Some(Operation::Freeze),
        "unfreeze" => Some(Operation::Unfreeze),
        "close" => Some(Operation::Close),
        _ => None,
    }
}

/// The card's one status-change intent: a later change replaces it.
fn intent_timer_id(card_id: &CardId) -> String {
    format!("{card_id}:change")
}

fn change_intent(card_id: &CardId, operation: Operation) -> Intent {
    Intent {
        card_id: card_id.to_owned(),
        id: intent_timer_id(card_id),
        payload: format!("{TIMER_FINISH_CHANGE}{}", operation_name(operation)),
    }
}

/// Whether the issuer is told of a change for a request or to finish an
/// intent (which keeps trying while the issuer is unavailable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Request,
    Intent,
}

/// Freezes, unfreezes or closes the card for a request. A change still
/// unconfirmed at the issuer is finished first, so the request is decided
/// against the status it led to and a stale intent never overrides a
/// newer request; the same change asked again only finishes it.
pub(super) async fn change(
    env: &EntityEnv<CardContext>,
    state: CardState,
    operation: Operation,
    origin: Origin,
) -> Step {
    let timer_id = intent_timer_id(&state.row.id);
    let Some(pending) = intent::pending(&env.db, &timer_id, finishing).await? else {
        return carry_out(env, state, operation, origin, Cause::Request, None).await;
    };
    if pending == operation {
        return carry_out(env, state, operation, origin, Cause::Intent, None).await;
    }
    let system = Origin::system(&state.row);
    let finished = carry_out(env, state, pending, system, Cause::Intent, None).await?;
    let state = match finished.reply {
        Ok(_) => finished.state,
        // The card moved on since the intent was written: nothing is left
        // to finish.
        Err(CardFailure::Refused(_)) => {
            change_intent(&finished.state.row.id, pending)
                .drop(&env.db)
                .await?;
            finished.state
        }
        // Still unconfirmed: the request waits for it.
        Err(_) => return Ok(finished),
    };
    carry_out(env, state, operation, origin, Cause::Request, None).await
}

/// Finishes the status change an intent's timer names. Refused when the
/// card moved on since (the change was written, or another replaced it);
/// the timer service then completes the timer.
pub(super) async fn finish(
    env: &EntityEnv<CardContext>,
    state: CardState,
    operation: Operation,
    firing: TimerFiring,
) -> Step {
    let origin = Origin::system(&state.row);
    carry_out(env, state, operation, origin, Cause::Intent, Some(firing)).await
}

async fn carry_out(
    env: &EntityEnv<CardContext>,
    state: CardState,
    operation: Operation,
    origin: Origin,
    cause: Cause,
    firing: Option<TimerFiring>,
) -> Step {
    let (next, effects) = match decided(&state, Event::Operate(operation)) {
        Ok(decided) => decided,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&state.row, state.row.clone(), None);
    let mut persist = false;
    for effect in effects {
        match effect {
            // The issuer follows first: if it cannot, nothing changes here
            // either.
            Effect::TellIssuer(status) => {
                let provider_card_id = state.row.provider_card_id.clone();
                let (Some(provider_card_id), Some(status)) =
                    (provider_card_id, issuer_status(status))
                else {
                    continue;
                };
                let intent = change_intent(&state.row.id, operation);
                step.plan.cancels_timers.push(intent.id.clone());
                let delay = env.ctx.intent_delay;
                intent.write(&env.db, delay, firing.as_ref()).await?;
                if let Err(error) = env.ctx.issuer.set_status(&provider_card_id, status).await {
                    return not_followed(env, state, operation, cause, error).await;
                }
            }
            Effect::Persist => {
                step.next.status = next.status;
                if next.status == Status::Closed {
                    step.next.closed_at = Some(step.next.updated_at);
                }
                persist = true;
            }
            Effect::Audit(action) => {
                let data = json!({"from": state.row.status, "to": step.next.status});
                let audit = record(&step.next, &origin, action, data);
                step.plan.audit.push(audit);
            }
            other => return Err(unexpected(&other, operation_name(operation))),
        }
    }
    written(env, state, step, persist).await
}

/// The issuer did not say it followed: the card is unchanged, and the
/// intent dropped or left to finish the change.
async fn not_followed(
    env: &EntityEnv<CardContext>,
    state: CardState,
    operation: Operation,
    cause: Cause,
    error: ProviderError,
) -> Step {
    let intent = change_intent(&state.row.id, operation);
    let fate = intent
        .settle(&env.db, &error, cause == Cause::Intent)
        .await?;
    tracing::warn!(card = %state.row.id, operation = operation_name(operation), %error, ?fate, "the issuer did not confirm a status change");
    answer(state, Err(issuer_failure(&error, fate)))
}

/// The card after a change: written as the step's row when the machine
/// asked for it, else as it stands.
async fn written(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    step: runtime::Step<tern_schema::models::CardRow>,
    persist: bool,
) -> Step {
    if !persist {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    let row = commit_step(&env.db, step).await.map_err(runtime_error)?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}

fn operation_name(operation: Operation) -> &'static str {
    match operation {
        Operation::Freeze => "freeze",
        Operation::Unfreeze => "unfreeze",
        Operation::Close => "close",
        Operation::Replace => "replace",
        Operation::Update => "update",
        Operation::RevealDetails => "reveal_details",
        Operation::ProvisionWallet => "provision_wallet",
    }
}

/// What a request is answered when the issuer did not confirm its call:
/// a failure, or, when the call's intent stays to finish it, that the
/// outcome is not known yet.
pub(super) fn issuer_failure(error: &ProviderError, fate: intent::Fate) -> CardFailure {
    match fate {
        intent::Fate::Drop => CardFailure::Issuer(error.to_string()),
        intent::Fate::Keep => CardFailure::IssuerUnconfirmed(error.to_string()),
    }
}

pub(super) async fn update(
    env: &EntityEnv<CardContext>,
    state: CardState,
    display_name: Option<Option<String>>,
    patch: LimitsPatch,
    origin: Origin,
) -> Step {
    let patched = super::limits::patch_row(&state.row, &patch);
    let mut row = state.row.clone();
    let limits = match patched {
        Ok((limits, limits_set)) => {
            row.limits = limits;
            row.limits_set = limits_set;
            if limits != state.row.limits || row.limits_set != state.row.limits_set {
                LimitsChange::Changed
            } else {
                LimitsChange::Same
            }
        }
        Err(errors) => LimitsChange::Invalid(errors),
    };
    if let Some(display_name) = display_name {
        row.display_name = display_name;
    }
    let name_changed = row.display_name != state.row.display_name;
    let event = Event::Update {
        name_changed,
        limits,
    };
    let (_, effects) = match decided(&state, event) {
        Ok(decided) => decided,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&state.row, row, None);
    let mut persist = false;
    for effect in effects {
        let row = &step.next;
        match effect {
            Effect::Persist => persist = true,
            Effect::Audit(action) => {
                let data = match action {
                    "card.limits_updated" => json!({
                        "per_transaction_minor": row.limits.per_transaction_minor,
                        "daily_spend_minor": row.limits.daily_spend_minor,
                        "monthly_spend_minor": row.limits.monthly_spend_minor,
                        "atm_daily_minor": row.limits.atm_daily_minor,
                        "online_enabled": row.limits.online_enabled,
                        "international_enabled": row.limits.international_enabled,
                        "atm_enabled": row.limits.atm_enabled,
                    }),
                    _ => json!({"display_name": row.display_name}),
                };
                let audit = record(row, &origin, action, data);
                step.plan.audit.push(audit);
            }
            other => return Err(unexpected(&other, "update")),
        }
    }
    written(env, state, step, persist).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finishing_timer_names_a_status_change() {
        for operation in [Operation::Freeze, Operation::Unfreeze, Operation::Close] {
            let intent = change_intent(&CardId::new("card_1"), operation);
            assert_eq!(finishing(&intent.payload), Some(operation));
            assert_eq!(intent.id, "card_1:change");
        }
        assert_eq!(finishing("change:replace"), None);
        assert_eq!(finishing("resume_issue"), None);
        assert_eq!(finishing("freeze"), None);
    }
}
