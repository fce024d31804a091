//! Mail waiting to be sent: written in the transaction of the change that
//! causes it, claimed by one sender at a time, deleted once sent.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Conn;
use crate::dispatch;
use crate::models::MailOutboxRow;
use crate::schema::mail_outbox;
use crate::{StoreResult, Tx};

/// Most rows one claim takes.
pub const CLAIM_BATCH_MAX: i64 = 64;
/// Longest error text kept on a row.
pub const ERROR_CHARS_MAX: usize = 500;

pub async fn insert(tx: &mut Tx<'_>, row: &MailOutboxRow) -> StoreResult<()> {
    dispatch!(tx, conn => diesel::insert_into(mail_outbox::table).values(row).execute(conn).await)?;
    Ok(())
}

/// Claims up to `limit` due rows until `lease_until` under `claim_token`
/// and answers them. Run it in a write transaction.
///
/// Both backends end in the same guarded UPDATE (unclaimed or lease
/// lapsed), which makes the claim exclusive: PostgreSQL re-checks the WHERE
/// clause after taking each row lock, and SQLite's write transaction holds
/// the database lock. Only the candidate SELECT differs: on PostgreSQL
/// `FOR UPDATE SKIP LOCKED` lets senders on several nodes take disjoint
/// rows instead of queueing behind each other; SQLite has no row locks
/// (and diesel refuses the clause there).
pub async fn claim_due(
    tx: &mut Tx<'_>,
    now: NaiveDateTime,
    lease_until: NaiveDateTime,
    claim_token: &str,
    limit: i64,
) -> StoreResult<Vec<MailOutboxRow>> {
    let limit = limit.clamp(0, CLAIM_BATCH_MAX);
    if limit == 0 {
        return Ok(Vec::new());
    }
    let candidates = mail_outbox::table
        .filter(mail_outbox::failed_at.is_null())
        .filter(mail_outbox::due_at.le(now))
        .filter(
            mail_outbox::claimed_until
                .is_null()
                .or(mail_outbox::claimed_until.lt(now)),
        )
        .order((mail_outbox::due_at.asc(), mail_outbox::id.asc()))
        .limit(limit)
        .select(mail_outbox::id);
    let ids: Vec<String> = match tx.conn().await? {
        Conn::Pg(conn) => candidates.for_update().skip_locked().load(conn).await?,
        Conn::Sqlite(conn) => candidates.load(&mut **conn).await?,
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let claimed = dispatch!(tx, conn => diesel::update(
            mail_outbox::table
                .filter(mail_outbox::id.eq_any(&ids))
                .filter(mail_outbox::failed_at.is_null())
                .filter(mail_outbox::claimed_until.is_null().or(mail_outbox::claimed_until.lt(now))),
        )
        .set((
            mail_outbox::claim_token.eq(claim_token),
            mail_outbox::claimed_until.eq(lease_until),
            mail_outbox::attempts.eq(mail_outbox::attempts + 1),
        ))
        .returning(MailOutboxRow::as_returning())
        .get_results(conn)
        .await)?;
    Ok(claimed)
}

/// Deletes a sent row while `claim_token` still holds it; answers whether
/// it did (`false`: the lease lapsed and another sender took the row).
pub async fn complete(tx: &mut Tx<'_>, id: &str, claim_token: &str) -> StoreResult<bool> {
    let deleted = dispatch!(tx, conn => diesel::delete(
            mail_outbox::table
                .filter(mail_outbox::id.eq(id))
                .filter(mail_outbox::claim_token.eq(claim_token)),
        )
        .execute(conn)
        .await)?;
    Ok(deleted == 1)
}

/// Releases a row whose send failed: due again at `retry_at`, or, with
/// `retry_at` `None`, given up (failed_at set, body emptied).
pub async fn release(
    tx: &mut Tx<'_>,
    id: &str,
    claim_token: &str,
    error: &str,
    retry_at: Option<NaiveDateTime>,
    now: NaiveDateTime,
) -> StoreResult<()> {
    let error: String = error.chars().take(ERROR_CHARS_MAX).collect();
    let held = mail_outbox::table
        .filter(mail_outbox::id.eq(id))
        .filter(mail_outbox::claim_token.eq(claim_token));
    match retry_at {
        Some(at) => {
            dispatch!(tx, conn => diesel::update(held)
                .set((
                    mail_outbox::due_at.eq(at),
                    mail_outbox::claimed_until.eq(None::<NaiveDateTime>),
                    mail_outbox::claim_token.eq(None::<String>),
                    mail_outbox::last_error.eq(&error),
                ))
                .execute(conn)
                .await)?;
        }
        None => {
            dispatch!(tx, conn => diesel::update(held)
                .set((
                    mail_outbox::failed_at.eq(Some(now)),
                    mail_outbox::body.eq(""),
                    mail_outbox::claimed_until.eq(None::<NaiveDateTime>),
                    mail_outbox::claim_token.eq(None::<String>),
                    mail_outbox::last_error.eq(&error),
                ))
                .execute(conn)
                .await)?;
        }
    }
    Ok(())
}

/// Rows not yet sent and not given up: for tests and operators.
pub async fn count_unsent(tx: &mut Tx<'_>) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => mail_outbox::table
        .filter(mail_outbox::failed_at.is_null())
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}
