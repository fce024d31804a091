//! The card part of a batch: card transactions, recorded once per provider
//! event and once per authorization, and authorizations whose hold ends or
//! is renewed.
//!
//! Like the rest of a batch, it is read once per table, judged in memory
//! plan by plan, and written with one INSERT for the batch's card
//! transactions. An authorization's move is one UPDATE guarded by the
//! status and hold it was judged at: another node having ended it between
//! the read and the write fails the batch, whose writers try again.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel::sql_types::{Array, Text};
use diesel_async::RunQueryDsl;

use super::{AuthorizationMove, Plan, PlanError, RowMove};
use crate::db::{Conn, Tx};
use crate::models::CardTransactionRow;
use crate::schema::card_transactions;
use crate::vocabulary::{CardId, CardTransactionKind, CardTransactionStatus, EventSource};
use crate::{StoreError, StoreResult};

/// A provider event's key: (source, event id).
type EventKey = (EventSource, String);
/// An authorization's key: (card id, authorization id).
type AuthorizationKey = (CardId, String);

/// What the batch's plans find of cards.
#[derive(Debug, Default)]
pub(crate) struct Cards {
    events: HashSet<EventKey>,
    authorizations: HashSet<AuthorizationKey>,
    /// The authorizations the plans move, by id: status and hold.
    holds: HashMap<String, (CardTransactionStatus, Option<String>)>,
}

/// One plan's card rows while it is judged.
#[derive(Debug, Default)]
pub(crate) struct CardDraft {
    rows: Vec<CardTransactionRow>,
    moves: Vec<AuthorizationMove>,
}

/// The card rows of a batch's accepted plans.
#[derive(Debug, Default)]
pub(crate) struct CardRows {
    pub transactions: Vec<CardTransactionRow>,
    pub moves: Vec<AuthorizationMove>,
}

fn event_key(row: &CardTransactionRow) -> EventKey {
    (row.event_source, row.provider_event_id.clone())
}

fn authorization_key(row: &CardTransactionRow) -> Option<AuthorizationKey> {
    (row.kind == CardTransactionKind::Authorization)
        .then(|| (row.card_id.clone(), row.authorization_id.clone()))
}

fn taken(what: String) -> PlanError {
    PlanError::Store(StoreError::UniqueViolation(what))
}

impl Cards {
    /// Judges a card transaction the plan records: its event, and an
    /// authorization's id on its card, not recorded before.
    pub(crate) fn record(
        &self,
        draft: &mut CardDraft,
        row: &CardTransactionRow,
    ) -> Result<(), PlanError> {
        let event = event_key(row);
        if self.events.contains(&event) || draft.rows.iter().any(|r| event_key(r) == event) {
            return Err(taken(format!(
                "card event {} recorded",
                row.provider_event_id
            )));
        }
        if let Some(key) = authorization_key(row) {
            let again = self.authorizations.contains(&key)
                || draft
                    .rows
                    .iter()
                    .any(|r| authorization_key(r).as_ref() == Some(&key));
            if again {
                return Err(taken(format!(
                    "authorization {} recorded",
                    row.authorization_id
                )));
            }
        }
        draft.rows.push(row.clone());
        Ok(())
    }

    /// Judges an authorization's move: still approved on the hold the plan
    /// read, as the batch has left it so far.
    pub(crate) fn moved(
        &self,
        draft: &mut CardDraft,
        change: &AuthorizationMove,
    ) -> Result<(), PlanError> {
        let current = draft
            .moves
            .iter()
            .rev()
            .find(|m| m.id == change.id)
            .map(|m| (m.status, Some(m.ledger_transaction_id.clone())))
            .or_else(|| self.holds.get(&change.id).cloned());
        match current {
            Some((status, Some(hold)))
                if status == CardTransactionStatus::Approved && hold == change.hold_id =>
            {
                draft.moves.push(change.clone());
                Ok(())
            }
            _ => Err(PlanError::Store(StoreError::Conflict(format!(
                "authorization {} is no longer open on its hold",
                change.id
            )))),
        }
    }

    /// Applies an accepted plan's card rows to what later plans find.
    pub(crate) fn accept(&mut self, rows: &mut CardRows, draft: CardDraft) {
        for row in &draft.rows {
            self.events.insert(event_key(row));
            if let Some(key) = authorization_key(row) {
                self.authorizations.insert(key);
            }
        }
        for change in &draft.moves {
            self.holds.insert(
                change.id.clone(),
                (change.status, Some(change.ledger_transaction_id.clone())),
            );
        }
        rows.transactions.extend(draft.rows);
        rows.moves.extend(draft.moves);
    }
}

/// Authorizations recorded, by (card, authorization id) pairs, on
/// PostgreSQL: the partial unique index answers each pair.
const AUTHORIZATIONS_RECORDED: &str = "SELECT c.card_id, c.authorization_id \
     FROM card_transactions AS c \
     JOIN unnest($1::text[], $2::text[]) AS k (card_id, authorization_id) \
     ON c.card_id = k.card_id AND c.authorization_id = k.authorization_id \
     WHERE c.kind = 'authorization'";

#[derive(QueryableByName)]
struct Recorded {
    #[diesel(sql_type = Text)]
    card_id: CardId,
    #[diesel(sql_type = Text)]
    authorization_id: String,
}

/// Reads what the plans' card rows expect: their events and
/// authorizations already recorded, and the authorizations they move.
pub(crate) async fn read(tx: &mut Tx<'_>, plans: &[Plan]) -> StoreResult<Cards> {
    let mut cards = Cards::default();
    let mut sources = Vec::new();
    let mut event_ids = Vec::new();
    let mut card_ids = Vec::new();
    let mut authorization_ids = Vec::new();
    let mut moved = Vec::new();
    let mut pairs: Vec<AuthorizationKey> = Vec::new();
    for plan in plans {
        for row in &plan.card_transactions {
            // Two sources at most: a set needs no sorting.
            if !sources.contains(&row.event_source) {
                sources.push(row.event_source);
            }
            event_ids.push(row.provider_event_id.clone());
            if row.kind == CardTransactionKind::Authorization {
                card_ids.push(row.card_id.clone());
                authorization_ids.push(row.authorization_id.clone());
                pairs.push((row.card_id.clone(), row.authorization_id.clone()));
            }
        }
        for change in &plan.moves {
            if let RowMove::Authorization(change) = change {
                moved.push(change.id.clone());
            }
        }
    }
    card_ids.sort();
    card_ids.dedup();
    for ids in [&mut event_ids, &mut authorization_ids, &mut moved] {
        ids.sort();
        ids.dedup();
    }
    // Each read names the batch's values per column and keeps the exact
    // pairs: a few rows more are read, never one missed.
    if !event_ids.is_empty() {
        let found: Vec<EventKey> = load!(
            tx,
            (card_transactions::table
                .filter(card_transactions::event_source.eq_any(&sources))
                .filter(card_transactions::provider_event_id.eq_any(&event_ids))
                .select((
                    card_transactions::event_source,
                    card_transactions::provider_event_id,
                )))
        )?;
        cards.events = found.into_iter().collect();
    }
    if !authorization_ids.is_empty() {
        cards.authorizations = match tx.parts() {
            // One index lookup per (card, authorization) pair: with an array
            // per column, PostgreSQL 15 reads every transaction of the
            // batch's cards (2 ms a batch at 16 busy cards).
            (Conn::Pg(inner), behind) => {
                let (cards_of, ids): (Vec<&str>, Vec<&str>) = pairs
                    .iter()
                    .map(|(card, id)| (card.as_str(), id.as_str()))
                    .unzip();
                let found: Vec<Recorded> = behind
                    .drive(async {
                        let conn = inner;
                        diesel::sql_query(AUTHORIZATIONS_RECORDED)
                            .bind::<Array<Text>, _>(&cards_of)
                            .bind::<Array<Text>, _>(&ids)
                            .load(conn)
                            .await
                    })
                    .await?;
                found
                    .into_iter()
                    .map(|row| (row.card_id, row.authorization_id))
                    .collect()
            }
            (Conn::Sqlite(inner), _) => {
                let found: Vec<AuthorizationKey> = card_transactions::table
                    .filter(card_transactions::card_id.eq_any(&card_ids))
                    .filter(card_transactions::authorization_id.eq_any(&authorization_ids))
                    .filter(card_transactions::kind.eq(CardTransactionKind::Authorization))
                    .select((
                        card_transactions::card_id,
                        card_transactions::authorization_id,
                    ))
                    .load(&mut **inner)
                    .await?;
                found.into_iter().collect()
            }
        };
    }
    if !moved.is_empty() {
        type Open = (String, CardTransactionStatus, Option<String>);
        let found: Vec<Open> = load!(
            tx,
            (card_transactions::table
                .filter(card_transactions::id.eq_any(&moved))
                .select((
                    card_transactions::id,
                    card_transactions::status,
                    card_transactions::ledger_transaction_id,
                )))
        )?;
        cards.holds = found
            .into_iter()
            .map(|(id, status, hold)| (id, (status, hold)))
            .collect();
    }
    Ok(cards)
}

/// Writes the accepted plans' card rows: one multi-row INSERT, and each
/// authorization's move under the status and hold it was judged at.
pub(crate) async fn write(tx: &mut Tx<'_>, rows: CardRows) -> StoreResult<()> {
    let CardRows {
        transactions,
        mut moves,
    } = rows;
    // In id order (stable), as other nodes' batches meet them.
    moves.sort_by(|a, b| a.id.cmp(&b.id));
    insert_rows!(
        tx,
        card_transactions::table,
        transactions,
        "card transactions"
    )?;
    for change in &moves {
        crate::write_behind!(tx, conn => diesel::update(
                card_transactions::table
                    .filter(card_transactions::id.eq(&change.id))
                    .filter(card_transactions::status.eq(CardTransactionStatus::Approved))
                    .filter(card_transactions::ledger_transaction_id.eq(&change.hold_id)),
            )
            .set((
                card_transactions::status.eq(change.status),
                card_transactions::ledger_transaction_id.eq(&change.ledger_transaction_id),
                card_transactions::hold_minor.eq(change.hold_minor),
                card_transactions::updated_at.eq(change.at),
            ))
            .execute(conn), crate::db::one_row("authorization moved by another writer"))?;
    }
    Ok(())
}
