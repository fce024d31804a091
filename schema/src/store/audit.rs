//! Audit chain queries.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::{Conn, Tx};
use crate::dispatch;
use crate::models::{AuditEventRow, AuditHeadRow};
use crate::schema::{audit_events, audit_heads};
use crate::store::cached::Cached;
use crate::vocabulary::MerchantId;
use crate::StoreResult;

pub async fn insert_head(tx: &mut Tx<'_>, row: &AuditHeadRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(audit_heads::table).values(row)).execute(conn).await)?;
    Ok(())
}

/// The merchant's chain head, locked until the transaction ends so that
/// appends to one chain take turns while other chains proceed. PostgreSQL
/// needs FOR UPDATE for that; SQLite already holds the database's write lock
/// in every write transaction (BEGIN IMMEDIATE) and has no FOR UPDATE.
pub async fn lock_head(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Option<AuditHeadRow>> {
    let row = match tx.conn().await? {
        Conn::Sqlite(conn) => audit_heads::table
            .find(merchant_id)
            .select(AuditHeadRow::as_select())
            .first(&mut **conn)
            .await
            .optional()?,
        Conn::Pg(conn) => audit_heads::table
            .find(merchant_id)
            .select(AuditHeadRow::as_select())
            .for_update()
            .first(conn)
            .await
            .optional()?,
    };
    Ok(row)
}

pub async fn find_head(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Option<AuditHeadRow>> {
    let row = dispatch!(tx, conn => audit_heads::table
        .find(merchant_id)
        .select(AuditHeadRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

pub async fn update_head(tx: &mut Tx<'_>, row: &AuditHeadRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::update(audit_heads::table.find(&row.merchant_id))
        .set((audit_heads::seq.eq(row.seq), audit_heads::hash.eq(&row.hash), audit_heads::updated_at.eq(row.updated_at)))
        ).execute(conn)
        .await)?;
    Ok(())
}

/// Rows per INSERT on PostgreSQL: 13 binds a row stays far below its
/// 65,535 bind parameters per statement.
const INSERT_ROWS_MAX: usize = 1_000;

/// Inserts `rows`: on PostgreSQL in as few statements (round trips) as the
/// bind limit allows; on SQLite, which has no round trips to save, one
/// cached statement per row (diesel-async cannot build SQLite's multi-row
/// INSERT: diesel_async#277).
pub async fn insert_events(tx: &mut Tx<'_>, rows: &[AuditEventRow]) -> StoreResult<()> {
    match tx.conn().await? {
        Conn::Pg(conn) if rows.len() > 1 => {
            for chunk in rows.chunks(INSERT_ROWS_MAX) {
                diesel::insert_into(audit_events::table)
                    .values(chunk)
                    .execute(conn)
                    .await?;
            }
        }
        _ => {
            for row in rows {
                dispatch!(tx, conn => Cached(diesel::insert_into(audit_events::table).values(row)).execute(conn).await)?;
            }
        }
    }
    Ok(())
}

/// Events with seq > `after_seq`, oldest first.
pub async fn events_after(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    after_seq: i64,
    limit: i64,
) -> StoreResult<Vec<AuditEventRow>> {
    let rows = dispatch!(tx, conn => audit_events::table
        .filter(audit_events::merchant_id.eq(merchant_id))
        .filter(audit_events::seq.gt(after_seq))
        .order(audit_events::seq.asc())
        .limit(limit)
        .select(AuditEventRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Events with `after_seq` < seq <= `through_seq`, oldest first.
pub async fn events_between(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    after_seq: i64,
    through_seq: i64,
    limit: i64,
) -> StoreResult<Vec<AuditEventRow>> {
    let rows = dispatch!(tx, conn => audit_events::table
        .filter(audit_events::merchant_id.eq(merchant_id))
        .filter(audit_events::seq.gt(after_seq))
        .filter(audit_events::seq.le(through_seq))
        .order(audit_events::seq.asc())
        .limit(limit)
        .select(AuditEventRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// The event at `seq`, if there is one.
pub async fn event(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    seq: i64,
) -> StoreResult<Option<AuditEventRow>> {
    let row = dispatch!(tx, conn => audit_events::table
        .find((merchant_id, seq))
        .select(AuditEventRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Events with seq < `before_seq` (all when `None`), newest first.
pub async fn events_before(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    before_seq: Option<i64>,
    limit: i64,
) -> StoreResult<Vec<AuditEventRow>> {
    let rows = dispatch!(tx, conn => audit_events::table
        .filter(audit_events::merchant_id.eq(merchant_id))
        .filter(audit_events::seq.lt(before_seq.unwrap_or(i64::MAX)))
        .order(audit_events::seq.desc())
        .limit(limit)
        .select(AuditEventRow::as_select())
        .load(conn)
        .await)?;
    Ok(rows)
}

/// Merchant ids with a chain, after `after` in id order.
pub async fn chains_after(
    tx: &mut Tx<'_>,
    after: &str,
    limit: i64,
) -> StoreResult<Vec<MerchantId>> {
    let ids = dispatch!(tx, conn => audit_heads::table
        .filter(audit_heads::merchant_id.gt(after))
        .order(audit_heads::merchant_id.asc())
        .limit(limit)
        .select(audit_heads::merchant_id)
        .load(conn)
        .await)?;
    Ok(ids)
}
