//! Idempotency record queries.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::one_row;
use crate::models::IdempotencyRow;
use crate::schema::idempotency_records;
use crate::store::cached::Cached;
use crate::{dispatch, write_behind};
use crate::{Refusal, StoreError, StoreResult, Tx};

/// Inserts the record unless the key is taken; answers whether it inserted.
/// On PostgreSQL a concurrent insert of the same key waits for the first
/// transaction and then does nothing, so the loser reads the winner's record.
pub async fn insert_if_absent(tx: &mut Tx<'_>, row: &IdempotencyRow) -> StoreResult<bool> {
    let inserted = dispatch!(tx, conn => Cached(diesel::insert_into(idempotency_records::table)
        .values(row)
        .on_conflict_do_nothing()
        ).execute(conn)
        .await)?;
    Ok(inserted == 1)
}

/// Inserts a record already answered, refused with
/// [`Refusal::KeyTaken`] if the key is taken; pipelined inside a group
/// commit on PostgreSQL.
pub async fn insert_answered(tx: &mut Tx<'_>, row: &IdempotencyRow) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::insert_into(idempotency_records::table)
    .values(row)
    .on_conflict_do_nothing()
    ).execute(conn), |inserted| match inserted {
        1 => Ok(()),
        _ => Err(StoreError::Refused(Refusal::KeyTaken)),
    })
}

pub async fn find(
    tx: &mut Tx<'_>,
    merchant_id: &str,
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

pub async fn complete(
    tx: &mut Tx<'_>,
    (merchant_id, scope, key): (&str, &str, &str),
    response_status: i32,
    response_body: &str,
    at: NaiveDateTime,
) -> StoreResult<()> {
    write_behind!(tx, conn => Cached(diesel::update(idempotency_records::table.find((merchant_id, scope, key)))
        .set((
            idempotency_records::state.eq("completed"),
            idempotency_records::response_status.eq(Some(response_status)),
            idempotency_records::response_body.eq(Some(response_body)),
            idempotency_records::updated_at.eq(at),
        ))
        ).execute(conn), one_row("idempotency record completion"))
}
