//! Transfer rows. The transfer's actor is their only writer after
//! creation, and every update is a compare-and-swap on `version`.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::one_row;
use crate::models::TransferRow;
use crate::schema::transfers;
use crate::store::cached::Cached;
use crate::vocabulary::{LegStatus, MerchantId, SettlementKey, TransferId, TransferStatus};
use crate::{dispatch, write_behind};
use crate::{StoreResult, Tx};

/// Statuses after which nothing more happens to a transfer.
pub const TERMINAL_STATUSES: [TransferStatus; 2] =
    [TransferStatus::Succeeded, TransferStatus::Failed];

/// A transfer by id, whoever owns it (the actor's load).
pub async fn find(tx: &mut Tx<'_>, id: &TransferId) -> StoreResult<Option<TransferRow>> {
    let row = dispatch!(tx, conn => transfers::table
        .find(id)
        .select(TransferRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// One page of the merchant's transfers, newest first, optionally of one
/// status, and how many match in all.
pub async fn list(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    status: Option<TransferStatus>,
    limit: i64,
    offset: i64,
) -> StoreResult<(Vec<TransferRow>, i64)> {
    // `created_at IS NOT NULL` (always true) is the predicate of the partial
    // listing indexes, which only queries stating it can use.
    let rows = dispatch!(tx, conn => {
        let mut query = transfers::table
            .filter(transfers::merchant_id.eq(merchant_id))
            .filter(transfers::created_at.is_not_null())
            .into_boxed();
        if let Some(status) = status {
            query = query.filter(transfers::status.eq(status));
        }
        query
            .order((transfers::created_at.desc(), transfers::id.desc()))
            .limit(limit)
            .offset(offset)
            .select(TransferRow::as_select())
            .load(conn)
            .await
    })?;
    let total: i64 = dispatch!(tx, conn => {
        let mut query = transfers::table
            .filter(transfers::merchant_id.eq(merchant_id))
            .filter(transfers::created_at.is_not_null())
            .into_boxed();
        if let Some(status) = status {
            query = query.filter(transfers::status.eq(status));
        }
        query.count().get_result(conn).await
    })?;
    Ok((rows, total))
}

/// Writes `next` (with `next.version` already advanced) if the stored row
/// still has `expected_version`, failing with [`StoreError::Conflict`]
/// otherwise. Pipelined inside a group commit on PostgreSQL, where the
/// conflict surfaces when the unit ends and rolls the unit back.
///
/// [`StoreError::Conflict`]: crate::StoreError::Conflict
pub async fn update_at_version(
    tx: &mut Tx<'_>,
    next: &TransferRow,
    expected_version: i64,
) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::update(
            transfers::table
                .filter(transfers::id.eq(&next.id))
                .filter(transfers::version.eq(expected_version)),
        )
        .set(next)
        ).execute(conn), one_row("transfer changed by another writer"))
}

/// Writes `next` (with `next.version` already advanced) if the stored row
/// still has `expected_version`; answers whether it did.
pub async fn update_if_version(
    tx: &mut Tx<'_>,
    next: &TransferRow,
    expected_version: i64,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => Cached(diesel::update(
            transfers::table
                .filter(transfers::id.eq(&next.id))
                .filter(transfers::version.eq(expected_version)),
        )
        .set(next)
        ).execute(conn)
        .await)?;
    Ok(changed == 1)
}

/// Ids of transfers with work left, after `after` in id order, for recovery.
pub async fn with_work_left(
    tx: &mut Tx<'_>,
    after: &str,
    limit: i64,
) -> StoreResult<Vec<TransferId>> {
    let ids = dispatch!(tx, conn => transfers::table
        .filter(transfers::status.ne_all(TERMINAL_STATUSES))
        .filter(transfers::id.gt(after))
        .order(transfers::id.asc())
        .limit(limit)
        .select(transfers::id)
        .load(conn)
        .await)?;
    Ok(ids)
}

/// The leg keys and leg statuses of a transfer with work left.
#[derive(Clone, Debug, PartialEq, Eq, Queryable)]
pub struct LegKeys {
    pub id: TransferId,
    pub merchant_id: MerchantId,
    pub leg1_key: SettlementKey,
    pub leg1_status: LegStatus,
    pub leg2_key: SettlementKey,
    pub leg2_status: LegStatus,
}

/// [`LegKeys`] of transfers with work left whose leg keys may be legacy
/// (UUIDs, from before leg keys took the `tr_<id>.leg1` form), after
/// `after` in id order: the legs not started yet among them may still be
/// created. A UUID never starts with `tr`, so transfers made since are
/// never read.
pub async fn legacy_leg_keys_with_work_left(
    tx: &mut Tx<'_>,
    after: &str,
    limit: i64,
) -> StoreResult<Vec<LegKeys>> {
    let rows = dispatch!(tx, conn => transfers::table
        .filter(transfers::status.ne_all(TERMINAL_STATUSES))
        .filter(transfers::leg1_key.not_like("tr%").or(transfers::leg2_key.not_like("tr%")))
        .filter(transfers::id.gt(after))
        .order(transfers::id.asc())
        .limit(limit)
        .select((
            transfers::id,
            transfers::merchant_id,
            transfers::leg1_key,
            transfers::leg1_status,
            transfers::leg2_key,
            transfers::leg2_status,
        ))
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Open operator alerts: (transfer id, merchant id, alert), oldest first.
pub async fn open_alerts(
    tx: &mut Tx<'_>,
    limit: i64,
) -> StoreResult<Vec<(TransferId, MerchantId, String)>> {
    let rows: Vec<(TransferId, MerchantId, Option<String>)> = dispatch!(tx, conn => transfers::table
        .filter(transfers::alert.is_not_null())
        .filter(transfers::alert_acknowledged_at.is_null())
        .order(transfers::id.asc())
        .limit(limit)
        .select((transfers::id, transfers::merchant_id, transfers::alert))
        .load(conn)
        .await)?;
    Ok(rows
        .into_iter()
        .map(|(id, merchant, alert)| (id, merchant, alert.unwrap_or_default()))
        .collect())
}

/// How many alerts are open.
pub async fn open_alert_count(tx: &mut Tx<'_>) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => transfers::table
        .filter(transfers::alert.is_not_null())
        .filter(transfers::alert_acknowledged_at.is_null())
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}

/// Marks the transfer's alert as seen by an operator; answers whether an
/// open alert was there. The version moves so the actor reloads.
pub async fn acknowledge_alert(
    tx: &mut Tx<'_>,
    id: &TransferId,
    at: chrono::NaiveDateTime,
) -> StoreResult<bool> {
    let changed = dispatch!(tx, conn => diesel::update(
            transfers::table
                .filter(transfers::id.eq(id))
                .filter(transfers::alert.is_not_null())
                .filter(transfers::alert_acknowledged_at.is_null()),
        )
        .set((
            transfers::alert_acknowledged_at.eq(Some(at)),
            transfers::version.eq(transfers::version + 1),
        ))
        .execute(conn)
        .await)?;
    Ok(changed == 1)
}
