//! How a settlement row and the pure machine state map onto each other, and
//! the identifiers derived from a settlement: its actor id and its provider
//! idempotency keys.

use tern_schema::models::SettlementRow;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{MerchantId, SettlementKey};

use super::machine::{Execution, State};

/// The actor id of a settlement: keys are scoped per merchant.
pub fn entity_id(merchant_id: &MerchantId, key: &SettlementKey) -> String {
    format!("{merchant_id}/{key}")
}

/// (merchant id, key) of an actor id made by [`entity_id`].
pub fn split_entity_id(id: &str) -> Option<(&str, &str)> {
    id.split_once('/')
}

/// The provider idempotency key of the settlement's operation: the same on
/// every attempt, and scoped by merchant so that one merchant choosing
/// another's Idempotency-Key can never meet the other's provider record.
pub fn provider_key(row: &SettlementRow) -> String {
    format!("{}_{}", row.merchant_id, row.idempotency_key)
}

/// The provider idempotency key of the settlement's reversal.
pub fn reversal_key(row: &SettlementRow) -> String {
    format!("{}_{}_reversal", row.merchant_id, row.idempotency_key)
}

/// A row the machine cannot read (an unknown code) is corruption, not input.
#[derive(Debug, thiserror::Error)]
#[error("settlement {key} holds an unknown {field} `{value}`")]
pub struct CorruptRow {
    pub key: SettlementKey,
    pub field: &'static str,
    pub value: String,
}

pub fn state_of(row: &SettlementRow) -> Result<State, CorruptRow> {
    let corrupt = |field: &'static str, value: &str| CorruptRow {
        key: row.idempotency_key.clone(),
        field,
        value: value.to_owned(),
    };
    Ok(State {
        status: row.status,
        method: row.method,
        attempt: u32::try_from(row.attempt).map_err(|_| corrupt("attempt", "negative"))?,
        outcome_unknown: row.outcome_unknown,
        next_attempt_at: row.next_attempt_at.map(as_utc),
        execution: Execution {
            provider_id: row.provider_id.clone(),
            stan: row.stan.clone(),
            retrieval_reference_number: row.retrieval_reference_number.clone(),
            transaction_identifier: row.transaction_identifier.clone(),
            approval_code: row.approval_code.clone(),
            action_code: row.action_code.clone(),
        },
        failure_reason: row.failure_reason.clone(),
        reversal: row.reversal,
        client_secret: row.client_secret.clone(),
        next_action_type: row.next_action_type.clone(),
    })
}

/// Writes the machine's state into a copy of the row (ledger ids, version
/// and timestamps are the caller's).
pub fn apply_state(row: &SettlementRow, state: &State) -> SettlementRow {
    SettlementRow {
        status: state.status,
        attempt: i32::try_from(state.attempt).unwrap_or(i32::MAX),
        outcome_unknown: state.outcome_unknown,
        next_attempt_at: state.next_attempt_at.map(|at| at.naive_utc()),
        provider_id: state.execution.provider_id.clone(),
        stan: state.execution.stan.clone(),
        retrieval_reference_number: state.execution.retrieval_reference_number.clone(),
        transaction_identifier: state.execution.transaction_identifier.clone(),
        approval_code: state.execution.approval_code.clone(),
        action_code: state.execution.action_code.clone(),
        failure_reason: state.failure_reason.clone(),
        reversal: state.reversal,
        client_secret: state.client_secret.clone(),
        next_action_type: state.next_action_type.clone(),
        ..row.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settlement::machine::{Method, Reversal, Status};
    use tern_schema::models::SettlementIntent;
    use tern_schema::money::MinorUnits;
    use tern_schema::types::utc_now;

    pub(crate) fn row() -> SettlementRow {
        SettlementRow::pending(
            SettlementIntent {
                merchant_id: MerchantId::new("m"),
                idempotency_key: SettlementKey::new("k"),
                method: Method::CardPush,
                currency: "USD".into(),
                amount_minor: MinorUnits::new(100),
                asset: None,
                source: "acc".into(),
                destination: "tok_x".into(),
                recipient_name: "Ada".into(),
                reference: None,
                request_id: "r".into(),
            },
            utc_now(),
        )
    }

    #[test]
    fn state_survives_the_row() {
        let row = row();
        let mut state = state_of(&row).expect("readable");
        state.status = Status::Retrying;
        state.attempt = 2;
        state.outcome_unknown = true;
        state.reversal = Reversal::PendingAtProvider;
        state.execution.stan = Some("123456".into());
        state.client_secret = Some("ch_1_secret_abc".into());
        state.next_action_type = Some("redirect_to_url".into());
        let written = apply_state(&row, &state);
        assert_eq!(state_of(&written).expect("readable"), state);
    }

    #[test]
    fn unknown_codes_are_corruption() {
        let mut bad = row();
        bad.attempt = -1;
        assert_eq!(state_of(&bad).expect_err("corrupt").field, "attempt");
    }

    #[test]
    fn ids_are_scoped_by_merchant() {
        let row = row();
        assert_eq!(
            split_entity_id(&entity_id(&MerchantId::new("m"), &SettlementKey::new("k"))),
            Some(("m", "k"))
        );
        assert_ne!(provider_key(&row), reversal_key(&row));
        assert!(provider_key(&row).starts_with("m_"));
    }
}
