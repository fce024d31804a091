//! How a transfer row and the saga state map onto each other, and the
//! identifiers of a transfer.

use tern_schema::models::TransferRow;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::TransferId;

use super::machine::{Challenge, State};

/// A row the saga cannot read (an unknown code) is corruption, not input.
#[derive(Debug, thiserror::Error)]
#[error("transfer {id} holds an unknown {field} `{value}`")]
pub struct CorruptRow {
    pub id: TransferId,
    pub field: &'static str,
    pub value: String,
}

pub fn state_of(row: &TransferRow) -> Result<State, CorruptRow> {
    let corrupt = |field: &'static str, value: &str| CorruptRow {
        id: row.id.clone(),
        field,
        value: value.to_owned(),
    };
    Ok(State {
        status: row.status,
        leg1: row.leg1_status,
        leg2: row.leg2_status,
        challenge: row.leg1_client_secret.as_ref().map(|secret| Challenge {
            client_secret: secret.clone(),
            next_action_type: row.leg1_next_action_type.clone(),
        }),
        failure_reason: row.failure_reason.clone(),
        compensation_attempt: u32::try_from(row.compensation_attempt)
            .map_err(|_| corrupt("compensation_attempt", "negative"))?,
        next_attempt_at: row.next_attempt_at.map(as_utc),
        alert: row.alert.clone(),
    })
}

/// Writes the saga's state into a copy of the row (ledger ids, version and
/// timestamps are the caller's).
pub fn apply_state(row: &TransferRow, state: &State) -> TransferRow {
    TransferRow {
        status: state.status,
        leg1_status: state.leg1,
        leg2_status: state.leg2,
        leg1_client_secret: state.challenge.as_ref().map(|c| c.client_secret.clone()),
        leg1_next_action_type: state
            .challenge
            .as_ref()
            .and_then(|c| c.next_action_type.clone()),
        failure_reason: state.failure_reason.clone(),
        compensation_attempt: i32::try_from(state.compensation_attempt).unwrap_or(i32::MAX),
        next_attempt_at: state.next_attempt_at.map(|at| at.naive_utc()),
        alert: state.alert.clone(),
        ..row.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::transfer::machine::{LegStatus, Status};
    use tern_schema::money::MinorUnits;
    use tern_schema::types::utc_now;
    use tern_schema::vocabulary::{Asset, MerchantId, Network, SettlementKey};

    pub(crate) fn row() -> TransferRow {
        let now = utc_now();
        TransferRow {
            id: TransferId::generate(),
            merchant_id: MerchantId::new("m"),
            idempotency_key: "k".into(),
            flow: "tern".into(),
            quote_id: tern_schema::vocabulary::QuoteId::new("qt_1"),
            card_pm: "pm_card_visa".into(),
            wallet: "0x52908400098527886E0F7030069857D2E4169EE7".into(),
            send_currency: "EUR".into(),
            send_amount_minor: MinorUnits::new(10_000),
            receive_asset: Asset::Usdc,
            receive_network: Network::Polygon,
            receive_amount_minor: MinorUnits::new(105_858_000),
            rate: "1.08".into(),
            platform_fee_minor: MinorUnits::new(100),
            network_fee_minor: MinorUnits::new(5),
            status: Status::Pending,
            leg1_key: SettlementKey::new("l1"),
            leg1_status: LegStatus::NotStarted,
            leg1_client_secret: None,
            leg1_next_action_type: None,
            leg2_key: SettlementKey::new("l2"),
            leg2_status: LegStatus::NotStarted,
            failure_reason: None,
            conversion_transaction_id: None,
            compensation_attempt: 0,
            next_attempt_at: None,
            alert: None,
            alert_acknowledged_at: None,
            request_id: "r".into(),
            version: 1,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn state_survives_the_row() {
        let row = row();
        let mut state = state_of(&row).expect("readable");
        state.status = Status::Compensating;
        state.leg1 = LegStatus::Reversing;
        state.leg2 = LegStatus::Failed;
        state.challenge = Some(Challenge {
            client_secret: "cs".into(),
            next_action_type: None,
        });
        state.compensation_attempt = 2;
        state.failure_reason = Some("invalid_destination".into());
        let written = apply_state(&row, &state);
        assert_eq!(state_of(&written).expect("readable"), state);
    }

    #[test]
    fn unknown_codes_are_corruption() {
        let mut bad = row();
        bad.compensation_attempt = -1;
        assert_eq!(
            state_of(&bad).expect_err("corrupt").field,
            "compensation_attempt"
        );
    }

    #[test]
    fn ids_are_prefixed_and_time_ordered() {
        let ids: Vec<TransferId> = (0..100).map(|_| TransferId::generate()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        assert!(ids
            .iter()
            .all(|id| TransferId::from_text(id.as_str()).is_some()));
    }
}
