//! Cards, their transactions (one per provider event) and their wallet
//! tokens. The card's actor is the only writer of all three; the edge reads.

use chrono::NaiveDateTime;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use crate::db::Conn;
use crate::models::{CardRow, CardTransactionRow, CardWalletTokenRow};
use crate::money::MinorUnits;
use crate::schema::{card_transactions, card_wallet_tokens, cards};
use crate::store::cached::Cached;
use crate::{dispatch, StoreResult, Tx};

use crate::vocabulary::{
    CardId, CardStatus, CardTransactionKind, CardTransactionStatus, CardType, Channel, EventSource,
    MerchantId, UserId, WalletTokenId, WalletTokenStatus,
};

pub const STATUS_ISSUING: CardStatus = CardStatus::Issuing;
/// Statuses that count against "one live virtual card per user".
pub const LIVE_STATUSES: [CardStatus; 3] =
    [CardStatus::Issuing, CardStatus::Active, CardStatus::Frozen];
/// Most cards one listing answers; a user holds few cards (one live
/// virtual card, plus the closed and replaced ones).
pub const CARDS_LISTED_MAX: i64 = 200;
/// Most transactions or events one listing answers.
pub const TRANSACTIONS_LISTED_MAX: i64 = 200;
/// Most wallet tokens one card may hold; a listing shows them all.
pub const WALLET_TOKENS_PER_CARD_MAX: i64 = 50;

/// The kinds `GET /v1/cards/{id}/transactions` answers (the interface's
/// Transaction.kind); reversals and expiries show as their authorization's
/// status and in the card's events.
pub const LISTED_TRANSACTION_KINDS: [CardTransactionKind; 3] = [
    CardTransactionKind::Authorization,
    CardTransactionKind::Clear,
    CardTransactionKind::Refund,
];
/// Statuses of an authorization that was approved, whatever became of it.
pub const APPROVED_STATUSES: [CardTransactionStatus; 4] = [
    CardTransactionStatus::Approved,
    CardTransactionStatus::Cleared,
    CardTransactionStatus::Reversed,
    CardTransactionStatus::Expired,
];

pub async fn insert(tx: &mut Tx<'_>, row: &CardRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(cards::table).values(row).execute(conn).await)?;
    Ok(())
}

pub async fn find(tx: &mut Tx<'_>, card_id: &CardId) -> StoreResult<Option<CardRow>> {
    let row = dispatch!(tx, conn => cards::table
        .find(card_id)
        .select(CardRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The card when it belongs to this merchant and has been issued; another
/// merchant's card, or one still being issued, is not found.
pub async fn find_in_merchant(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    card_id: &CardId,
) -> StoreResult<Option<CardRow>> {
    let row = dispatch!(tx, conn => cards::table
        .find(card_id)
        .filter(cards::merchant_id.eq(merchant_id))
        .filter(cards::status.ne(STATUS_ISSUING))
        .select(CardRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The user's issued cards, newest first.
pub async fn list_for_user(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    user_id: &UserId,
) -> StoreResult<Vec<CardRow>> {
    let rows = dispatch!(tx, conn => cards::table
        .filter(cards::merchant_id.eq(merchant_id))
        .filter(cards::user_id.eq(user_id))
        .filter(cards::status.ne(STATUS_ISSUING))
        .order((cards::created_at.desc(), cards::id.desc()))
        .limit(CARDS_LISTED_MAX)
        .select(CardRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// The user's live virtual card (issuing, active or frozen), if any.
pub async fn live_virtual(tx: &mut Tx<'_>, user_id: &UserId) -> StoreResult<Option<CardRow>> {
    let row = dispatch!(tx, conn => cards::table
        .filter(cards::user_id.eq(user_id))
        .filter(cards::card_type.eq(CardType::Virtual))
        .filter(cards::status.eq_any(LIVE_STATUSES))
        .select(CardRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Writes `next` (with `next.version` already advanced) if the stored row
/// still has `expected_version`; answers whether it did.
pub async fn update_if_version(
    tx: &mut Tx<'_>,
    next: &CardRow,
    expected_version: i64,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => Cached(diesel::update(
            cards::table
                .filter(cards::id.eq(&next.id))
                .filter(cards::version.eq(expected_version)),
        )
        .set(next))
        .execute(conn)
        .await)?;
    Ok(changed == 1)
}

/// Removes a card that was never issued; answers whether it was there.
pub async fn delete_issuing(tx: &mut Tx<'_>, card_id: &CardId) -> StoreResult<bool> {
    let deleted = dispatch!(tx, conn => diesel::delete(
            cards::table
                .filter(cards::id.eq(card_id))
                .filter(cards::status.eq(STATUS_ISSUING)),
        )
        .execute(conn)
        .await)?;
    Ok(deleted == 1)
}

/// Ids of cards still being issued, after `after` in id order: what
/// recovery finishes at start.
pub async fn issuing_page(tx: &mut Tx<'_>, after: &str, limit: i64) -> StoreResult<Vec<String>> {
    let ids = dispatch!(tx, conn => cards::table
        .filter(cards::status.eq(STATUS_ISSUING))
        .filter(cards::id.gt(after))
        .order(cards::id.asc())
        .limit(limit)
        .select(cards::id)
        .load(conn)
        .await)?;
    Ok(ids)
}

pub async fn insert_transaction(tx: &mut Tx<'_>, row: &CardTransactionRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(card_transactions::table).values(row))
        .execute(conn)
        .await)?;
    Ok(())
}

/// The transaction a provider event made, if that event arrived before.
/// Only the provider's ids are looked at: an event Tern made is never a
/// provider event's earlier self.
pub async fn transaction_by_event(
    tx: &mut Tx<'_>,
    provider_event_id: &str,
) -> StoreResult<Option<CardTransactionRow>> {
    let row = dispatch!(tx, conn => card_transactions::table
        .filter(card_transactions::event_source.eq(EventSource::Provider))
        .filter(card_transactions::provider_event_id.eq(provider_event_id))
        .select(CardTransactionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The authorization `authorization_id` of the card.
pub async fn authorization(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    authorization_id: &str,
) -> StoreResult<Option<CardTransactionRow>> {
    let row = dispatch!(tx, conn => card_transactions::table
        .filter(card_transactions::card_id.eq(card_id))
        .filter(card_transactions::authorization_id.eq(authorization_id))
        .filter(card_transactions::kind.eq(CardTransactionKind::Authorization))
        .select(CardTransactionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The card's transaction `id`.
pub async fn transaction(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    id: &str,
) -> StoreResult<Option<CardTransactionRow>> {
    let row = dispatch!(tx, conn => card_transactions::table
        .find(id)
        .filter(card_transactions::card_id.eq(card_id))
        .select(CardTransactionRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// The card's transactions, newest first.
pub async fn transactions(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    limit: i64,
) -> StoreResult<Vec<CardTransactionRow>> {
    let rows = dispatch!(tx, conn => card_transactions::table
        .filter(card_transactions::card_id.eq(card_id))
        .order((card_transactions::created_at.desc(), card_transactions::id.desc()))
        .limit(limit)
        .select(CardTransactionRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// The card's transactions of these kinds, newest first.
pub async fn transactions_of_kinds(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    kinds: &[CardTransactionKind],
    limit: i64,
) -> StoreResult<Vec<CardTransactionRow>> {
    let rows = dispatch!(tx, conn => card_transactions::table
        .filter(card_transactions::card_id.eq(card_id))
        .filter(card_transactions::kind.eq_any(kinds))
        .order((card_transactions::created_at.desc(), card_transactions::id.desc()))
        .limit(limit)
        .select(CardTransactionRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// What the card's authorizations approved since `since` (open or ended:
/// neither a clearing nor a released hold gives the room back, which is
/// also what the card's actor counts in memory), on every channel or on
/// `channel` only. What the daily and monthly limits count.
pub async fn approved_since(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    since: NaiveDateTime,
    channel: Option<Channel>,
) -> StoreResult<MinorUnits> {
    // Approvals past int64 in a window (reversed ones count) must not keep
    // the card from loading: the sum saturates, as the actor's in-memory
    // windows do. PostgreSQL sums a bigint as numeric, exactly; SQLite's
    // SUM would fail on overflow, so it totals in floating point, exact up
    // to 2^53 minor units, far past the largest limit a window is held to.
    let spent_sql = match tx.parts().0 {
        Conn::Sqlite(_) => "CAST(MIN(TOTAL(amount_minor), 9.2e18) AS INTEGER)",
        Conn::Pg(_) => "CAST(LEAST(COALESCE(SUM(amount_minor), 0), 9223372036854775807) AS BIGINT)",
    };
    let spent = dispatch!(tx, conn => {
        let mut query = card_transactions::table
            .filter(card_transactions::card_id.eq(card_id))
            .filter(card_transactions::kind.eq(CardTransactionKind::Authorization))
            .filter(card_transactions::status.eq_any(APPROVED_STATUSES))
            .filter(card_transactions::created_at.ge(since))
            .into_boxed();
        if let Some(channel) = channel {
            query = query.filter(card_transactions::channel.eq(channel));
        }
        query
            .select(sql::<BigInt>(spent_sql))
            .first::<MinorUnits>(conn)
            .await
    })?;
    Ok(spent)
}

/// The amount the card's open authorizations hold.
pub async fn held(tx: &mut Tx<'_>, card_id: &CardId) -> StoreResult<MinorUnits> {
    let held = dispatch!(tx, conn => card_transactions::table
        .filter(card_transactions::card_id.eq(card_id))
        .filter(card_transactions::kind.eq(CardTransactionKind::Authorization))
        .filter(card_transactions::status.eq(CardTransactionStatus::Approved))
        .select(sql::<BigInt>("CAST(COALESCE(SUM(hold_minor), 0) AS BIGINT)"))
        .first::<MinorUnits>(conn)
        .await)?;
    Ok(held)
}

pub async fn insert_wallet_token(tx: &mut Tx<'_>, row: &CardWalletTokenRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(card_wallet_tokens::table)
        .values(row)
        .execute(conn)
        .await)?;
    Ok(())
}

/// The card's wallet tokens, oldest first.
pub async fn wallet_tokens(
    tx: &mut Tx<'_>,
    card_id: &CardId,
) -> StoreResult<Vec<CardWalletTokenRow>> {
    let rows = dispatch!(tx, conn => card_wallet_tokens::table
        .filter(card_wallet_tokens::card_id.eq(card_id))
        .order((card_wallet_tokens::created_at.asc(), card_wallet_tokens::id.asc()))
        .limit(WALLET_TOKENS_PER_CARD_MAX)
        .select(CardWalletTokenRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Sets a token's status; answers whether the card has that token.
pub async fn set_wallet_token_status(
    tx: &mut Tx<'_>,
    card_id: &CardId,
    token_id: &WalletTokenId,
    status: WalletTokenStatus,
    at: NaiveDateTime,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => diesel::update(
            card_wallet_tokens::table
                .filter(card_wallet_tokens::id.eq(token_id))
                .filter(card_wallet_tokens::card_id.eq(card_id)),
        )
        .set((
            card_wallet_tokens::status.eq(status),
            card_wallet_tokens::updated_at.eq(at),
        ))
        .execute(conn)
        .await)?;
    Ok(changed == 1)
}
