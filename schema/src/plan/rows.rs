//! A batch's [`RowWrite`]s: one statement each, in plan order, after the
//! batch's set-based writes.

use std::collections::BTreeMap;

use crate::audit;
use crate::db::Tx;
use crate::error::{StoreError, StoreResult};
use crate::store::{cards, quotes, timers, webhooks};

use super::RowWrite;

/// Writes each (plan, write) pair; answers how many events each plan
/// re-armed, by plan.
pub(super) async fn write(
    tx: &mut Tx<'_>,
    writes: Vec<(usize, RowWrite)>,
) -> StoreResult<BTreeMap<usize, usize>> {
    let mut rearmed = BTreeMap::new();
    for (plan, write) in writes {
        match write {
            RowWrite::Card {
                row,
                expected_version,
            } => {
                if !cards::update_if_version(tx, &row, expected_version).await? {
                    return Err(StoreError::Conflict(format!(
                        "card {} moved from version {expected_version}",
                        row.id
                    )));
                }
            }
            RowWrite::NewCard(row) => cards::insert(tx, &row).await?,
            RowWrite::IssuingCardDropped { card_id } => {
                // Already gone is the same outcome: a repeat of the drop.
                cards::delete_issuing(tx, &card_id).await?;
            }
            RowWrite::NewWalletToken(row) => cards::insert_wallet_token(tx, &row).await?,
            RowWrite::WalletTokenStatus {
                card_id,
                token_id,
                status,
                at,
            } => {
                if !cards::set_wallet_token_status(tx, &card_id, &token_id, status, at).await? {
                    return Err(StoreError::Conflict(format!(
                        "card {card_id} has no wallet token {token_id}"
                    )));
                }
            }
            RowWrite::WebhookEndpoint(row) => webhooks::put_endpoint(tx, &row).await?,
            RowWrite::WebhookEndpointRemoved { merchant_id, audit } => {
                if webhooks::delete_endpoint(tx, &merchant_id).await? {
                    audit::append(tx, audit).await?;
                }
            }
            RowWrite::PendingEventsSkipped { merchant_id, at } => {
                // An endpoint another writer stored since keeps them.
                if webhooks::endpoint(tx, &merchant_id).await?.is_none() {
                    webhooks::skip_pending(tx, &merchant_id, at).await?;
                }
            }
            RowWrite::Attempt {
                next,
                attempt,
                retry,
            } => {
                if webhooks::record_attempt(tx, &next, &attempt).await? {
                    if let Some(timer) = retry {
                        timers::insert(tx, &timer).await?;
                    }
                }
            }
            RowWrite::EventsRearmed {
                merchant_id,
                transfer_id,
                at,
            } => {
                let count = webhooks::rearm(tx, &merchant_id, &transfer_id, at).await?;
                *rearmed.entry(plan).or_default() += count;
            }
            RowWrite::NewQuote(row) => quotes::insert(tx, &row).await?,
        }
    }
    Ok(rearmed)
}
