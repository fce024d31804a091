//! Creating a card: its intent row, written before any issuer call so that
//! the partial unique index refuses a second live virtual card whatever the
//! concurrency, then issued by the card's actor (decisions §10).

use chrono::NaiveDateTime;
use tern_schema::models::CardRow;
use tern_schema::plan::{Plan, RowWrite};
use tern_schema::store::cluster::SLOTS;
use tern_schema::vocabulary::{CardId, CardType, MerchantId, UserId, WalletStatus};
use tern_schema::{PlanError, StoreError};

use super::ask::Cards;
use super::kind::CardKind;
use super::machine::Status;
use super::messages::{CardFailure, Origin};
use super::program::{self, Program, DEFAULT_THEME};
use crate::runtime::{cluster, EntityKind, Registry, RuntimeError, Versioned};

/// A validated request for a card.
#[derive(Clone, Debug)]
pub struct NewCard {
    pub merchant_id: MerchantId,
    pub user_id: UserId,
    pub program: &'static Program,
    pub card_type: CardType,
    pub currency: String,
    pub display_name: Option<String>,
    /// The name printed on the card.
    pub cardholder: String,
    pub origin: Origin,
}

/// Why no card was issued.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The card refused (a live virtual card exists, the issuer failed).
    #[error("{0:?}")]
    Refused(CardFailure),
    /// The intent is written but its slot moved to another node before it
    /// was issued: the request is not forwarded (the owner would make a
    /// second card); the new owner finishes this one and a retry finds it.
    #[error("the card moved to another node")]
    Moved,
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// A fresh card id in the slot of the card `beside`: a replacement lives
/// where the card it replaces does, so the node running that card runs it
/// too, and should that node die while the issuer makes it, the slot's
/// next owner finds it being issued and finishes it.
pub fn new_card_id_beside(beside: &CardId) -> CardId {
    let slot = cluster::slot_for(CardKind::NAME, beside.as_str());
    // Each try lands there with probability 1/SLOTS.
    let tries = 16 * usize::try_from(SLOTS).unwrap_or(64);
    (0..tries)
        .map(|_| CardId::generate())
        .find(|id| cluster::slot_for(CardKind::NAME, id.as_str()) == slot)
        .unwrap_or_else(CardId::generate)
}

/// The intent a request makes: issuing, with the program's network, art
/// and the type's default limits.
pub fn intent_of(id: CardId, new: &NewCard, now: NaiveDateTime) -> CardRow {
    let limits = program::default_limits(new.card_type);
    CardRow {
        id,
        merchant_id: new.merchant_id.clone(),
        user_id: new.user_id.clone(),
        program_id: new.program.id.to_owned(),
        card_type: new.card_type,
        status: Status::Issuing,
        network: new.program.network,
        currency: new.currency.clone(),
        cardholder: new.cardholder.clone(),
        display_name: new.display_name.clone(),
        card_art: new.program.card_art.to_owned(),
        theme: DEFAULT_THEME.to_owned(),
        provider_card_id: None,
        last_four: None,
        expiry_month: None,
        expiry_year: None,
        wallet_status: WalletStatus::None,
        limits,
        replaces_card_id: None,
        replaces_status: None,
        replaced_by_card_id: None,
        request_id: new.origin.request_id.clone(),
        version: Versioned::<()>::INITIAL,
        created_at: now,
        updated_at: now,
        closed_at: None,
        limits_set: String::new(),
    }
}

/// Writes the card's intent and has its actor issue it; answers the issued
/// card. The id is minted in a slot this node owns, so the card is written
/// and run here.
pub async fn create(
    cards: &Registry<CardKind>,
    new: &NewCard,
    now: NaiveDateTime,
) -> Result<CardRow, CreateError> {
    let row = intent_of(
        CardId::new(cards.mint(|| CardId::generate().into_inner())?),
        new,
        now,
    );
    let plan = Plan {
        rows: vec![RowWrite::NewCard(row.clone())],
        ..Plan::default()
    };
    match cards.local_db(row.id.as_str())?.commit(plan).await {
        Ok(_) => {}
        Err(PlanError::Store(StoreError::UniqueViolation(_))) => {
            return Err(CreateError::Refused(CardFailure::LiveCardExists));
        }
        Err(other) => return Err(RuntimeError::from(other).into()),
    }
    match Cards::new(cards).issue(&row.id, new.origin.clone()).await {
        Ok(Ok(issued)) => Ok(issued),
        Ok(Err(failure)) => Err(CreateError::Refused(failure)),
        Err(RuntimeError::Elsewhere { .. }) => Err(CreateError::Moved),
        Err(other) => Err(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacements_id_lives_in_the_slot_of_the_card_it_replaces() {
        for _ in 0..20 {
            let old = CardId::generate();
            let new = new_card_id_beside(&old);
            assert_ne!(new, old);
            assert!(new.as_str().starts_with(CardId::PREFIX), "{new}");
            assert_eq!(
                cluster::slot_for(CardKind::NAME, new.as_str()),
                cluster::slot_for(CardKind::NAME, old.as_str())
            );
        }
    }
}
