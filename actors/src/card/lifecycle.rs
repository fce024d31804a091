//! The card's lifecycle after issue: freeze, unfreeze and close (the
//! issuer follows first), and changes to its name and limits.

use serde_json::json;
use tern_schema::plan::Plan;
use tern_schema::types::utc_now;

use super::kind::{CardContext, CardState};
use super::machine::{Effect, Event, LimitsChange, Operation, Status};
use super::messages::{CardFailure, CardReply, LimitsPatch, Origin};
use super::record::{limits_of, moved, record, successor, with_limits};
use super::write::{answer, commit, decided, rejected, unexpected, Step};
use crate::ports::{IssuerStatus, ProviderError};
use crate::runtime::EntityEnv;

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
    mut state: CardState,
    operation: Operation,
    origin: Origin,
) -> Step {
    let (next, effects) = match decided(&state, Event::Operate(operation)) {
        Ok(decided) => decided,
        Err(refused) => return rejected(state, refused),
    };
    let now = utc_now();
    let mut row = successor(&state.row, now);
    let mut plan = Plan::default();
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
                row.status = next.status.as_str().to_owned();
                if next.status == Status::Closed {
                    row.closed_at = Some(now);
                }
                plan.rows.push(moved(&row, state.row.version));
            }
            Effect::Audit(action) => plan.audit.push(record(
                &row,
                &origin,
                action,
                json!({"from": state.row.status, "to": row.status}),
            )),
            other => return Err(unexpected(&other, operation_name(operation))),
        }
    }
    if plan.rows.is_empty() {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    commit(&env.db, &row.id, plan).await?;
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
    mut state: CardState,
    display_name: Option<Option<String>>,
    patch: LimitsPatch,
    origin: Origin,
) -> Step {
    let patched = super::limits::patch_row(&state.row, &patch);
    let mut row = successor(&state.row, utc_now());
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
    let mut plan = Plan::default();
    for effect in effects {
        match effect {
            Effect::Persist => plan.rows.push(moved(&row, state.row.version)),
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
                plan.audit.push(record(&row, &origin, action, data));
            }
            other => return Err(unexpected(&other, "update")),
        }
    }
    if plan.rows.is_empty() {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    commit(&env.db, &row.id, plan).await?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}
