//! Persisted timers of the actor runtime: rows due at a time, claimed by one
//! node at a time under an expiring lease, deleted once handled.
//!
//! Several Tern processes may poll the same PostgreSQL, so the guard against
//! firing a timer twice is in the database, never in memory: a claim is a
//! conditional UPDATE that only succeeds on a row whose lease is free or
//! expired, and completion deletes the row only under the claimant's token.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::db::Conn;
use crate::dispatch;
use crate::schema::actor_timers;
use crate::store::cached::Cached;
use crate::{StoreResult, Tx};

/// Most rows one claim may take, whatever the caller asks for, so a poll
/// holds a bounded number of locks and leases.
pub const CLAIM_BATCH_MAX: i64 = 500;

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = actor_timers, treat_none_as_default_value = false)]
pub struct TimerRow {
    /// Chosen by the scheduler; deriving it from the entity and the purpose
    /// (`"<entity>:retry:3"`) makes scheduling idempotent.
    pub id: String,
    /// The actor kind the timer is delivered to (`"transfer"`, ...).
    pub kind: String,
    pub entity_id: String,
    pub due_at: NaiveDateTime,
    /// Opaque to the runtime; the kind decodes it into a message.
    pub payload: String,
    /// Fresh per claim; `None` while unclaimed.
    pub claim_token: Option<String>,
    /// End of the current claim's lease (UTC); after it the row is claimable again.
    pub claimed_until: Option<NaiveDateTime>,
    /// How many times the row has been claimed.
    pub attempts: i32,
    pub created_at: NaiveDateTime,
    /// The cluster slot of its entity (see [`crate::store::cluster`]): the
    /// node owning the slot claims it. Filled by the store from the plan
    /// that writes the timer; 0 where one process runs everything.
    pub slot: i32,
}

/// Schedules a timer. A second row with the same id is a unique violation,
/// which callers that derive ids treat as "already scheduled".
pub async fn insert(tx: &mut Tx<'_>, row: &TimerRow) -> StoreResult<()> {
    dispatch!(tx, conn => Cached(diesel::insert_into(actor_timers::table).values(row)).execute(conn).await)?;
    Ok(())
}

pub async fn find(tx: &mut Tx<'_>, timer_id: &str) -> StoreResult<Option<TimerRow>> {
    let row = dispatch!(tx, conn => actor_timers::table
        .find(timer_id)
        .select(TimerRow::as_select())
        .first(conn)
        .await
        .optional())?;
    Ok(row)
}

/// Claims up to `limit` due timers of the given kinds for the lease ending at
/// `lease_until`, marking them with `claim_token`, and answers the claimed rows.
///
/// Run it inside a write transaction. Both backends end in the same
/// conditional UPDATE (`claimed_until IS NULL OR claimed_until < now`), which
/// is what makes a claim exclusive: on PostgreSQL under READ COMMITTED the
/// UPDATE re-checks its WHERE clause after taking each row lock, on SQLite the
/// write transaction holds the database lock. The candidate SELECT differs:
/// PostgreSQL adds `FOR UPDATE SKIP LOCKED` so that concurrent pollers on other
/// nodes take disjoint rows instead of queueing behind each other's locks;
/// SQLite has no row locks (and diesel refuses the clause there).
///
/// `slots`, where several nodes share the database, keeps the claim to
/// the timers of the slots this node owns; `None` claims any.
pub async fn claim_due(
    tx: &mut Tx<'_>,
    kinds: &[String],
    slots: Option<&[i32]>,
    now: NaiveDateTime,
    lease_until: NaiveDateTime,
    claim_token: &str,
    limit: i64,
) -> StoreResult<Vec<TimerRow>> {
    let limit = limit.clamp(0, CLAIM_BATCH_MAX);
    if kinds.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let every: Vec<i32>;
    let slots = match slots {
        Some([]) => return Ok(Vec::new()),
        Some(slots) => slots,
        None => {
            every = (0..crate::store::cluster::SLOTS).collect();
            &every
        }
    };
    let candidates = actor_timers::table
        .filter(actor_timers::kind.eq_any(kinds))
        .filter(actor_timers::slot.eq_any(slots))
        .filter(actor_timers::due_at.le(now))
        .filter(
            actor_timers::claimed_until
                .is_null()
                .or(actor_timers::claimed_until.lt(now)),
        )
        .order((actor_timers::due_at.asc(), actor_timers::id.asc()))
        .limit(limit)
        .select(actor_timers::id);
    let ids: Vec<String> = match tx.conn().await? {
        Conn::Pg(conn) => candidates.for_update().skip_locked().load(conn).await?,
        Conn::Sqlite(conn) => candidates.load(&mut **conn).await?,
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let claimed = dispatch!(tx, conn => diesel::update(
            actor_timers::table
                .filter(actor_timers::id.eq_any(&ids))
                .filter(actor_timers::claimed_until.is_null().or(actor_timers::claimed_until.lt(now))),
        )
        .set((
            actor_timers::claim_token.eq(claim_token),
            actor_timers::claimed_until.eq(lease_until),
            actor_timers::attempts.eq(actor_timers::attempts + 1),
        ))
        .returning(TimerRow::as_returning())
        .get_results(conn)
        .await)?;
    Ok(claimed)
}

/// Files a claimed timer under `slot` and frees its claim, due as it was:
/// the entity lives in that slot, whose owner claims it next. Answers
/// `false` when the claim was lost.
pub async fn reslot(
    tx: &mut Tx<'_>,
    timer_id: &str,
    claim_token: &str,
    slot: i32,
) -> StoreResult<bool> {
    let updated = dispatch!(tx, conn => diesel::update(
            actor_timers::table
                .filter(actor_timers::id.eq(timer_id))
                .filter(actor_timers::claim_token.eq(claim_token)),
        )
        .set((
            actor_timers::slot.eq(slot),
            actor_timers::claim_token.eq(None::<String>),
            actor_timers::claimed_until.eq(None::<chrono::NaiveDateTime>),
        ))
        .execute(conn)
        .await)?;
    Ok(updated == 1)
}

/// Deletes a handled timer, but only while `claim_token` still holds it:
/// answers `false` when the lease was lost (another node may be firing it).
/// Call it in the transaction of the transition the timer caused, so the
/// effect and the deletion commit together.
pub async fn complete(tx: &mut Tx<'_>, timer_id: &str, claim_token: &str) -> StoreResult<bool> {
    let deleted = dispatch!(tx, conn => Cached(diesel::delete(
            actor_timers::table
                .filter(actor_timers::id.eq(timer_id))
                .filter(actor_timers::claim_token.eq(claim_token)),
        )
        ).execute(conn)
        .await)?;
    Ok(deleted == 1)
}

/// Gives a claimed timer back after a failed delivery, due again at `retry_at`.
/// Answers `false` when the claim had already been lost.
pub async fn release(
    tx: &mut Tx<'_>,
    timer_id: &str,
    claim_token: &str,
    retry_at: NaiveDateTime,
) -> StoreResult<bool> {
    let released = dispatch!(tx, conn => Cached(diesel::update(
            actor_timers::table
                .filter(actor_timers::id.eq(timer_id))
                .filter(actor_timers::claim_token.eq(claim_token)),
        )
        .set((
            actor_timers::claim_token.eq(None::<String>),
            actor_timers::claimed_until.eq(None::<NaiveDateTime>),
            actor_timers::due_at.eq(retry_at),
        ))
        ).execute(conn)
        .await)?;
    Ok(released == 1)
}

/// Deletes one timer whatever its claim (what it would do is already done
/// or moot); answers whether it was there. A claimant that fires it anyway
/// finds it gone when it completes.
pub async fn delete(tx: &mut Tx<'_>, timer_id: &str) -> StoreResult<bool> {
    let deleted = dispatch!(tx, conn => Cached(diesel::delete(
            actor_timers::table.filter(actor_timers::id.eq(timer_id)),
        )
        ).execute(conn)
        .await)?;
    Ok(deleted == 1)
}

/// Deletes every timer of one entity (it reached a terminal state); answers
/// how many were deleted.
pub async fn cancel_for_entity(tx: &mut Tx<'_>, kind: &str, entity_id: &str) -> StoreResult<usize> {
    let deleted = dispatch!(tx, conn => Cached(diesel::delete(
            actor_timers::table
                .filter(actor_timers::kind.eq(kind))
                .filter(actor_timers::entity_id.eq(entity_id)),
        )
        ).execute(conn)
        .await)?;
    Ok(deleted)
}

/// How many timers of one entity have a payload starting with `prefix`
/// (no `%` or `_` in it): work of one sort it still has to do.
pub async fn count_for_entity(
    tx: &mut Tx<'_>,
    kind: &str,
    entity_id: &str,
    prefix: &str,
) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => actor_timers::table
        .filter(actor_timers::kind.eq(kind))
        .filter(actor_timers::entity_id.eq(entity_id))
        .filter(actor_timers::payload.like(format!("{prefix}%")))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}

/// Timers of one kind due at `now` or earlier, claimed or not: what an
/// operator (and a teardown check) calls overdue work.
pub async fn count_due(tx: &mut Tx<'_>, kind: &str, now: NaiveDateTime) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => actor_timers::table
        .filter(actor_timers::kind.eq(kind))
        .filter(actor_timers::due_at.le(now))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}

pub async fn count_for_kind(tx: &mut Tx<'_>, kind: &str) -> StoreResult<i64> {
    let count = dispatch!(tx, conn => actor_timers::table
        .filter(actor_timers::kind.eq(kind))
        .count()
        .get_result(conn)
        .await)?;
    Ok(count)
}
