//! The card's lifecycle after issue: freeze, unfreeze and close (the
//! issuer follows first), and changes to its name and limits.

use serde_json::json;
use tern_schema::plan::Plan;
use tern_schema::types::utc_now;

use super::kind::{CardContext, CardState};
use super::machine::{self, Accepted, Operation, Status};
use super::messages::{CardFailure, CardReply, LimitsPatch, Origin};
use super::record::{limits_of, moved, record, status_of, successor, with_limits};
use super::write::{answer, commit, refusal, Step};
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
    let Accepted { next, changes } = match machine::apply(status_of(&state.row), operation) {
        Ok(accepted) => accepted,
        Err(refused) => return refusal(state, refused),
    };
    if !changes {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    // The issuer follows first: if it cannot, nothing changes here either.
    if let (Some(provider_card_id), Some(status)) =
        (state.row.provider_card_id.clone(), issuer_status(next))
    {
        if let Err(error) = env.ctx.issuer.set_status(&provider_card_id, status).await {
            return answer(state, Err(issuer_failure(&error)));
        }
    }
    let now = utc_now();
    let mut row = successor(&state.row, now);
    row.status = next.as_str().to_owned();
    if next == Status::Closed {
        row.closed_at = Some(now);
    }
    let action = match operation {
        Operation::Freeze => "card.frozen",
        Operation::Unfreeze => "card.unfrozen",
        _ => "card.closed",
    };
    let audit = record(
        &row,
        &origin,
        action,
        json!({"from": state.row.status, "to": row.status}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![moved(&row, state.row.version)],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
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
    if let Err(refused) = machine::apply(status_of(&state.row), Operation::Update) {
        return refusal(state, refused);
    }
    let (limits, limits_set) = match super::limits::patch_row(&state.row, &patch) {
        Ok(patched) => patched,
        Err(errors) => return answer(state, Err(CardFailure::InvalidLimits(errors))),
    };
    let mut row = with_limits(successor(&state.row, utc_now()), limits);
    row.limits_set = limits_set;
    if let Some(display_name) = display_name.clone() {
        row.display_name = display_name;
    }
    let limits_changed = limits != limits_of(&state.row) || row.limits_set != state.row.limits_set;
    let name_changed = row.display_name != state.row.display_name;
    if !limits_changed && !name_changed {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    let mut audits = Vec::new();
    if name_changed {
        audits.push(record(
            &row,
            &origin,
            "card.updated",
            json!({"display_name": row.display_name}),
        ));
    }
    if limits_changed {
        audits.push(record(
            &row,
            &origin,
            "card.limits_updated",
            json!({
                "per_transaction_minor": row.per_transaction_minor,
                "daily_spend_minor": row.daily_spend_minor,
                "monthly_spend_minor": row.monthly_spend_minor,
                "atm_daily_minor": row.atm_daily_minor,
                "online_enabled": row.online_enabled,
                "international_enabled": row.international_enabled,
                "atm_enabled": row.atm_enabled,
            }),
        ));
    }
    let plan = Plan {
        audit: audits,
        rows: vec![moved(&row, state.row.version)],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}
