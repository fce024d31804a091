//! Where verification of each audit chain stands (see
//! [`crate::audit::verify`]).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Tx;
use crate::dispatch;
use crate::models::AuditCheckpointRow;
use crate::schema::audit_checkpoints;
use crate::vocabulary::MerchantId;
use crate::StoreResult;

pub async fn find(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<Option<AuditCheckpointRow>> {
    let row = dispatch!(tx, conn => audit_checkpoints::table
        .find(merchant_id)
        .select(AuditCheckpointRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Makes the chain's first checkpoint unless another call made one first;
/// answers whether this one was made.
pub async fn insert_first(tx: &mut Tx<'_>, row: &AuditCheckpointRow) -> StoreResult<bool> {
    let inserted = dispatch!(tx, conn => diesel::insert_into(audit_checkpoints::table)
        .values(row)
        .on_conflict_do_nothing()
        .execute(conn)
        .await)?;
    Ok(inserted == 1)
}

/// Moves the checkpoint to `row` if it is still at `read_version`, the
/// version the verification started from, and bumps its version; answers
/// whether it moved. A concurrent verification that moved it first wins,
/// so the checkpoint never goes back to an older verification's result.
pub async fn advance(
    tx: &mut Tx<'_>,
    row: &AuditCheckpointRow,
    read_version: i64,
) -> StoreResult<bool> {
    let updated = dispatch!(tx, conn => diesel::update(
            audit_checkpoints::table
                .find(&row.merchant_id)
                .filter(audit_checkpoints::version.eq(read_version)),
        )
        .set((
            audit_checkpoints::seq.eq(row.seq),
            audit_checkpoints::hash.eq(&row.hash),
            audit_checkpoints::rescan_seq.eq(row.rescan_seq),
            audit_checkpoints::version.eq(read_version + 1),
            audit_checkpoints::verified_at.eq(row.verified_at),
        ))
        .execute(conn)
        .await)?;
    Ok(updated == 1)
}
