//! An authorization request the card has seen before, by its event id or
//! by its `authorization_id` (decisions §10). Networks re-send a request
//! they got no answer to, sometimes under a new event id: the same
//! authorization id with the same amount and currency gets the first
//! decision again and holds nothing new. The same id with other data is
//! not that request: it is declined (`duplicate_authorization`) and nothing
//! is recorded, so each authorization id names one hold a reversal or a
//! clearing can end. A unique index on (card, authorization id) backs this
//! in the database.

use tern_schema::models::CardTransactionRow;
use tern_schema::store::cards as store;
use tern_schema::vocabulary::{
    CardId, CardTransactionKind as Kind, CardTransactionStatus as TxStatus,
};
use tern_schema::Db;

use super::machine::Decline;
use super::messages::{AuthorizationRequest, Decision};
use crate::runtime::RuntimeResult;

/// The decision a stored authorization records.
pub(super) fn decision_of(row: &CardTransactionRow, duplicate: bool) -> Decision {
    Decision {
        approved: row.kind == Kind::Authorization && row.status != TxStatus::Declined,
        reason: row.decline_reason,
        transaction_id: Some(row.id.clone()),
        duplicate,
    }
}

/// What a request answers given the authorization already stored under
/// its authorization id.
pub fn repeated(earlier: &CardTransactionRow, request: &AuthorizationRequest) -> Decision {
    let same = earlier.amount_minor == request.amount_minor && earlier.currency == request.currency;
    if same {
        return decision_of(earlier, true);
    }
    Decision {
        approved: false,
        reason: Some(Decline::DuplicateAuthorization),
        transaction_id: None,
        duplicate: false,
    }
}

/// The answer to a request decided before, by its event id or its
/// authorization id; `None` when it is new.
pub(super) async fn earlier_decision(
    db: &Db,
    card_id: &CardId,
    request: &AuthorizationRequest,
) -> RuntimeResult<Option<Decision>> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    if let Some(row) = store::transaction_by_event(&mut tx, &request.event_id).await? {
        return Ok(Some(decision_of(&row, true)));
    }
    let earlier = store::authorization(&mut tx, card_id, &request.authorization_id).await?;
    if let Some(earlier) = &earlier {
        if earlier.amount_minor != request.amount_minor || earlier.currency != request.currency {
            tracing::warn!(card = %card_id, authorization_id = %request.authorization_id, event_id = %request.event_id, "authorization id reused with other data declined");
        }
    }
    Ok(earlier.map(|earlier| repeated(&earlier, request)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::machine::Channel;
    use tern_schema::money::MinorUnits;
    use tern_schema::vocabulary::{EventSource, MerchantId};

    fn request(amount_minor: MinorUnits, currency: &str) -> AuthorizationRequest {
        AuthorizationRequest {
            event_id: "evt_2".into(),
            authorization_id: "auth_1".into(),
            amount_minor,
            currency: currency.into(),
            merchant: String::new(),
            mcc: String::new(),
            channel: Channel::Pos,
            country: "US".into(),
        }
    }

    fn stored(status: TxStatus, reason: Option<Decline>) -> CardTransactionRow {
        CardTransactionRow {
            id: "ctx_1".into(),
            card_id: CardId::new("card_1"),
            merchant_id: MerchantId::new("m_1"),
            provider_event_id: "evt_1".into(),
            authorization_id: "auth_1".into(),
            kind: Kind::Authorization,
            status,
            amount_minor: MinorUnits::new(1_000),
            currency: "USD".into(),
            merchant_name: String::new(),
            mcc: String::new(),
            channel: "pos".into(),
            country: "US".into(),
            decline_reason: reason,
            ledger_transaction_id: None,
            created_at: chrono::NaiveDateTime::MIN,
            updated_at: chrono::NaiveDateTime::MIN,
            hold_minor: MinorUnits::ZERO,
            event_source: EventSource::Provider,
        }
    }

    #[test]
    fn a_resent_authorization_gets_its_first_decision_and_other_data_is_declined() {
        let approved = stored(TxStatus::Approved, None);
        let declined = stored(TxStatus::Declined, Some(Decline::InsufficientFunds));
        let again = |approved, reason| Decision {
            approved,
            reason,
            transaction_id: Some("ctx_1".into()),
            duplicate: true,
        };
        let refused = Decision {
            approved: false,
            reason: Some(Decline::DuplicateAuthorization),
            transaction_id: None,
            duplicate: false,
        };
        let table = [
            (
                &approved,
                request(MinorUnits::new(1_000), "USD"),
                again(true, None),
            ),
            (
                &declined,
                request(MinorUnits::new(1_000), "USD"),
                again(false, Some(Decline::InsufficientFunds)),
            ),
            (
                &approved,
                request(MinorUnits::new(2_000), "USD"),
                refused.clone(),
            ),
            (
                &approved,
                request(MinorUnits::new(999), "USD"),
                refused.clone(),
            ),
            (
                &approved,
                request(MinorUnits::new(1_000), "EUR"),
                refused.clone(),
            ),
            (&declined, request(MinorUnits::new(2_000), "USD"), refused),
        ];
        for (earlier, asked, expected) in table {
            assert_eq!(repeated(earlier, &asked), expected, "{asked:?}");
        }
    }
}
