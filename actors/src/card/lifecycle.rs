//! The card's lifecycle after issue: freeze, unfreeze and close (the
//! issuer follows first), and changes to its name and limits.

use serde_json::json;

use super::kind::{CardContext, CardState};
use super::machine::{Effect, Event, LimitsChange, Operation, Status};
use super::messages::{CardFailure, CardReply, LimitsPatch, Origin};
use super::record::{limits_of, record, with_limits};
use super::write::{answer, commit_step, decided, rejected, runtime_error, unexpected, Step};
use crate::ports::{IssuerStatus, ProviderError};
use crate::runtime::{self, EntityEnv};

fn issuer_status(status: Status) -> Option<IssuerStatus> {
    match status {
        Status::Active => Some(IssuerStatus::Active),
        Status::Frozen => Some(IssuerStatus::Frozen),
        Status::Blocked => Some(IssuerStatus::Blocked),
        Status::Closed => Some(IssuerStatus::Closed),
        Status::Issuing => None,
    }
}

pub(super) async fn change(
    env: &EntityEnv<CardContext>,
    state: CardState,
    operation: Operation,
    origin: Origin,
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
                if let (Some(provider_card_id), Some(status)) =
                    (provider_card_id, issuer_status(status))
                {
                    if let Err(error) = env.ctx.issuer.set_status(&provider_card_id, status).await {
                        return answer(state, Err(issuer_failure(&error)));
                    }
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

pub(super) fn issuer_failure(error: &ProviderError) -> CardFailure {
    CardFailure::Issuer(error.to_string())
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
            row = with_limits(row, limits);
            row.limits_set = limits_set;
            if limits != limits_of(&state.row) || row.limits_set != state.row.limits_set {
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
                        "per_transaction_minor": row.per_transaction_minor,
                        "daily_spend_minor": row.daily_spend_minor,
                        "monthly_spend_minor": row.monthly_spend_minor,
                        "atm_daily_minor": row.atm_daily_minor,
                        "online_enabled": row.online_enabled,
                        "international_enabled": row.international_enabled,
                        "atm_enabled": row.atm_enabled,
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
