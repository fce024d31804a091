//! Idempotency record queries.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::dispatch;
use crate::models::IdempotencyRow;
use crate::schema::idempotency_records;
use crate::vocabulary::MerchantId;
use crate::{StoreResult, Tx};

pub async fn find(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    scope: &str,
    key: &str,
) -> StoreResult<Option<IdempotencyRow>> {
    let row = dispatch!(tx, conn => idempotency_records::table
        .find((merchant_id, scope, key))
        .select(IdempotencyRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}
