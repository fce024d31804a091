//! Group commit: many small write transactions share one database
//! transaction and so one fsync.
//!
//! One committer per [`Db`] runs on its own thread. Writers hand it a unit of
//! work and await the outcome; it takes every unit queued (up to
//! [`BATCH_UNITS_MAX`]), runs each inside its own savepoint of one
//! transaction (a failing unit rolls back alone), commits once, and only then
//! answers each writer. A unit's effects are therefore durable exactly when
//! its writer hears `Ok`, as with a transaction of its own, and nothing is
//! traded for speed: SQLite stays `synchronous = FULL`, PostgreSQL keeps
//! synchronous commit. A single writer also means SQLite writers never
//! contend for its lock (the busy handler's sleeps are what make contended
//! SQLite slow), and PostgreSQL writers never deadlock on each other's rows.
//!
//! On PostgreSQL the one connection would spend most of its time waiting
//! for answers, one round trip per statement. So a unit's writes whose only
//! answer is a changed-row count are pipelined (see [`crate::db::Behind`]):
//! sent without waiting and judged when the unit ends, before its savepoint
//! is released. Work that cannot fail on its own account (an actor's
//! transition its machine has already judged) may run without a savepoint
//! ([`Rollback::WithBatch`]); its writes are then not waited for at all
//! before the next unit starts, and if it fails after all the whole batch
//! rolls back and every writer in it is told.
//!
//! Two more things keep the PostgreSQL connection busy rather than waiting.
//! Ledger balances are moved in memory and written once per account before
//! the commit ([`crate::balances`]). And a unit whose writes are one
//! all-or-nothing statement, a settlement's creation claiming its key, runs
//! as a claim ([`Rollback::Claim`]): no savepoint, no wait, and a refused
//! claim is cancelled while its batch commits.

use std::panic::AssertUnwindSafe;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

use crate::balances::Balances;
use crate::db::{establish_sqlite_inline, immediate_transaction, DatabaseUrl, Db, SqliteConn, Tx};
use crate::deferred::Deferred;
use crate::error::{StoreError, StoreResult};
use crate::store;

/// Units of work committed together at most.
pub const BATCH_UNITS_MAX: usize = 256;
/// Units waiting for the committer before writers wait to enqueue.
pub const QUEUE_UNITS_MAX: usize = 4_096;

/// What a unit reports once its savepoint is released or rolled back: whether
/// it succeeded, and how to answer its writer once the commit's fate is known.
type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
type Work = Box<dyn for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, (bool, Answer)> + Send>;

/// What a unit's failure rolls back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rollback {
    /// The unit alone: it runs in a savepoint of its own.
    Alone,
    /// The whole batch: for work that cannot fail on its own account (see
    /// [`Committer::write_without_savepoint`]).
    WithBatch,
    /// Nothing, on PostgreSQL: work whose writes are one statement that
    /// makes all of them or none (a claim, such as a settlement's creation
    /// under its Idempotency-Key). It needs no savepoint, and nothing waits
    /// for its answer before the next unit starts: if the statement
    /// refuses ([`crate::StoreError::Refused`], having written nothing),
    /// the unit's deferred writes and balance moves are undone and its
    /// writer gets the refusal, while the rest of the batch commits. Work
    /// that fails before sending any write fails alone; a failure after
    /// that fails the batch. On SQLite, the same as [`Rollback::Alone`].
    Claim,
}

/// One writer's work, and whether it gets a savepoint of its own.
struct Unit {
    work: Work,
    /// With a savepoint ([`Rollback::Alone`]), a failing unit rolls back
    /// alone. Without one (see [`Committer::write_without_savepoint`]) a
    /// failure fails the whole batch; the unit costs two statements less
    /// and, on PostgreSQL, its writes need not be answered before the next
    /// unit starts. A claim is in between (see [`Rollback::Claim`]).
    rollback: Rollback,
}

/// The writers' side of the committer.
#[derive(Clone)]
pub struct Committer {
    queue: mpsc::Sender<Unit>,
}

impl Committer {
    /// Starts the committer's thread for `db` (a handle without a committer
    /// of its own, so that the thread ends when every writer's handle is gone).
    pub(crate) fn start(db: Db) -> std::io::Result<Committer> {
        let (queue, units) = mpsc::channel(QUEUE_UNITS_MAX);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("tern-committer".into())
            .spawn(move || runtime.block_on(run(db, units)))?;
        Ok(Committer { queue })
    }

    /// Runs `work` in a write transaction shared with other writers' work.
    /// `Err` from `work` rolls back only its own changes.
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.enqueue(work, Rollback::Alone).await
    }

    /// Runs `work`, which cannot fail on its own account (an actor's
    /// transition already judged by its machine: only a database failure or
    /// a concurrent writer, both of which doom its batch anyway, can stop
    /// it), in a write transaction shared with other writers' work, without
    /// a savepoint of its own. If it fails after all, the whole batch rolls
    /// back and every writer in it is told so.
    pub async fn write_without_savepoint<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.enqueue(work, Rollback::WithBatch).await
    }

    /// Runs `work` as a claim (see [`Rollback::Claim`]).
    pub async fn write_claim<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.enqueue(work, Rollback::Claim).await
    }

    async fn enqueue<T, E, F>(&self, work: F, rollback: Rollback) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (answer, outcome) = oneshot::channel::<Result<T, E>>();
        let work: Work = Box::new(move |tx| {
            Box::pin(async move {
                let result = work(tx).await;
                let succeeded = result.is_ok();
                let reply: Answer = Box::new(move |committed: Result<(), StoreError>| {
                    let _ = answer.send(committed.map_err(E::from).and(result));
                });
                (succeeded, reply)
            })
        });
        self.queue
            .send(Unit { work, rollback })
            .await
            .map_err(|_| E::from(StoreError::Unavailable("the committer has stopped".into())))?;
        outcome.await.unwrap_or_else(|_| {
            Err(E::from(StoreError::Unavailable(
                "a write was lost: its unit failed or the committer stopped".into(),
            )))
        })
    }
}

/// The committer's own connection, opened on its thread so that its I/O
/// (PostgreSQL's connection task included) runs there, not on whichever
/// request thread happened to open a pooled one.
// One lives for the committer's lifetime; boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Writer {
    Sqlite(SqliteConn),
    Pg(AsyncPgConnection),
}

impl Writer {
    async fn open(url: &DatabaseUrl) -> StoreResult<Writer> {
        match url {
            DatabaseUrl::Sqlite(path) => Ok(Writer::Sqlite(establish_sqlite_inline(path).await?)),
            DatabaseUrl::Postgres(url) => Ok(Writer::Pg(AsyncPgConnection::establish(url).await?)),
        }
    }
}

async fn run(db: Db, mut units: mpsc::Receiver<Unit>) {
    let mut writer: Option<Writer> = None;
    let mut deferred = Deferred::default();
    let mut batch = Vec::with_capacity(BATCH_UNITS_MAX);
    while units.recv_many(&mut batch, BATCH_UNITS_MAX).await > 0 {
        commit(&db, &mut writer, &mut deferred, std::mem::take(&mut batch)).await;
    }
}

/// Releasing the previous unit's savepoint and opening the next one: a
/// single round trip, not two.
const NEXT_SAVEPOINT: &str = "RELEASE SAVEPOINT tern_unit; SAVEPOINT tern_unit";
const FIRST_SAVEPOINT: &str = "SAVEPOINT tern_unit";
const ROLLBACK_UNIT: &str = "ROLLBACK TO SAVEPOINT tern_unit";

/// Runs `work` guarded against panics: a unit that panicked is rolled back,
/// and its writer's channel closes unanswered, which reports the loss.
async fn run_work(work: Work, tx: &mut Tx<'_>) -> (bool, Answer) {
    match AssertUnwindSafe(work(tx)).catch_unwind().await {
        Ok(ran) => ran,
        Err(_) => {
            tracing::error!("a unit of a group commit panicked; it is rolled back");
            (false, Box::new(|_| {}))
        }
    }
}

/// How one unit ended: its success and answer, and whether it dooms the
/// batch (a unit without a savepoint failed).
struct Ran {
    succeeded: bool,
    answer: Answer,
    dooms_batch: bool,
}

const DOOMED: &str = "a unit without a savepoint failed, so its batch was rolled back";

/// Runs one unit of the open SQLite transaction, in a savepoint if it has
/// one; a unit that rolls back takes its deferred writes with it. `held`
/// says whether the previous unit's savepoint is still open. A savepoint
/// statement that fails leaves the transaction in doubt, so it fails the
/// batch.
async fn sqlite_unit(
    conn: &mut SqliteConn,
    deferred: &mut Deferred,
    held: &mut bool,
    unit: Unit,
) -> StoreResult<Ran> {
    if unit.rollback == Rollback::WithBatch {
        let (succeeded, answer) =
            run_work(unit.work, &mut Tx::sqlite(conn).with_deferred(deferred)).await;
        return Ok(Ran {
            succeeded,
            answer,
            dooms_batch: !succeeded,
        });
    }
    let mark = deferred.mark();
    conn.batch_execute(if *held {
        NEXT_SAVEPOINT
    } else {
        FIRST_SAVEPOINT
    })
    .await?;
    *held = true;
    let (succeeded, answer) =
        run_work(unit.work, &mut Tx::sqlite(conn).with_deferred(deferred)).await;
    if !succeeded {
        deferred.roll_back_to(mark);
        conn.batch_execute(ROLLBACK_UNIT).await?;
    }
    Ok(Ran {
        succeeded,
        answer,
        dooms_batch: false,
    })
}

/// The same on PostgreSQL, pipelined through the batch's one [`Tx`]: a
/// savepoint is sent with the unit's first statements, the unit's checked
/// writes are sent without waiting (see [`crate::db::Behind`]), and a unit
/// with a savepoint has its writes answered before the next unit starts. A
/// write whose check fails fails its unit, which is then rolled back and
/// told why. A unit without a savepoint is not waited for at all: its
/// writes are answered with a later unit's, or at the end of the batch, and
/// a failure among them fails the batch.
async fn pg_unit(tx: &mut Tx<'_>, held: &mut bool, unit: Unit, number: usize) -> StoreResult<Ran> {
    match unit.rollback {
        Rollback::Alone => {}
        Rollback::WithBatch => {
            let (succeeded, answer) = run_work(unit.work, tx).await;
            return Ok(Ran {
                succeeded,
                answer,
                dooms_batch: !succeeded,
            });
        }
        Rollback::Claim => {
            let (mark, sent) = (tx.mark(), tx.writes_sent());
            tx.claim_unit(Some(number));
            let (succeeded, answer) = run_work(unit.work, tx).await;
            tx.claim_unit(None);
            let wrote = tx.writes_sent() != sent;
            if succeeded {
                tx.record_claim(number, mark);
            } else if !wrote {
                tx.roll_back_to(mark);
            }
            return Ok(Ran {
                succeeded,
                answer,
                dooms_batch: !succeeded && wrote,
            });
        }
    }
    let mark = tx.mark();
    tx.send_batch_statement(if *held {
        NEXT_SAVEPOINT
    } else {
        FIRST_SAVEPOINT
    })
    .await?;
    *held = true;
    tx.open_unit();
    let (succeeded, answer) = run_work(unit.work, tx).await;
    let refused = tx.settle().await.err();
    tx.close_unit();
    if let Some(failure) = tx.batch_failure() {
        return Err(StoreError::Unavailable(failure));
    }
    if succeeded && refused.is_none() {
        return Ok(Ran {
            succeeded,
            answer,
            dooms_batch: false,
        });
    }
    tx.roll_back_to(mark);
    tx.execute_batch_now(ROLLBACK_UNIT).await?;
    // A pipelined write that failed is the cause even when the work failed
    // too: PostgreSQL refuses every statement after it ("current
    // transaction is aborted"), which may be how the work failed.
    let answer: Answer = match refused {
        Some(error) => {
            tracing::warn!(%error, "a pipelined write failed its check; its unit is rolled back");
            Box::new(move |_| answer(Err(error)))
        }
        None => answer,
    };
    Ok(Ran {
        succeeded: false,
        answer,
        dooms_batch: false,
    })
}

/// One transaction for the whole batch, one savepoint per unit, through
/// the committer's own connection (opened on first use, reopened after a
/// failed commit).
async fn commit(db: &Db, writer: &mut Option<Writer>, deferred: &mut Deferred, batch: Vec<Unit>) {
    let started = std::time::Instant::now();
    let units = batch.len();
    let mut answers: Vec<(bool, Answer)> = Vec::with_capacity(batch.len());
    if writer.is_none() {
        match Writer::open(db.url()).await {
            Ok(opened) => *writer = Some(opened),
            Err(error) => tracing::error!(%error, "the committer cannot open its connection"),
        }
    }
    let committed = match writer.as_mut() {
        None => Err(StoreError::Unavailable(
            "the committer has no database connection".into(),
        )),
        Some(Writer::Sqlite(conn)) => {
            immediate_transaction(conn, async |conn| {
                let mut held = false;
                for unit in batch {
                    let ran = sqlite_unit(conn, deferred, &mut held, unit).await?;
                    let doomed = ran.dooms_batch;
                    answers.push((ran.succeeded, ran.answer));
                    if doomed {
                        return Err(StoreError::Unavailable(DOOMED.into()));
                    }
                }
                deferred.flush(&mut Tx::sqlite(conn)).await
            })
            .await
        }
        Some(Writer::Pg(conn)) => {
            conn.transaction(async |conn| {
                let conn: &AsyncPgConnection = conn;
                let mut held = false;
                let mut tx = Tx::pipelined(conn).with_deferred(&mut *deferred);
                for unit in batch {
                    let ran = pg_unit(&mut tx, &mut held, unit, answers.len()).await?;
                    let doomed = ran.dooms_batch;
                    answers.push((ran.succeeded, ran.answer));
                    if doomed {
                        return Err(StoreError::Unavailable(DOOMED.into()));
                    }
                }
                // Every unit's writes answered: a refused claim's moves are
                // undone before the balances are written.
                tx.settle().await?;
                if let Some(failure) = tx.batch_failure() {
                    return Err(StoreError::Unavailable(failure));
                }
                tx.cancel_refused_claims();
                // The batch's balance moves, one UPDATE per account; any
                // failure among them fails the batch.
                let moves = tx.balances().map(Balances::take).unwrap_or_default();
                for (account_id, moved) in moves {
                    store::ledger::apply_moves(&mut tx, &account_id, moved).await?;
                }
                tx.settle().await?;
                if let Some(failure) = tx.batch_failure() {
                    return Err(StoreError::Unavailable(failure));
                }
                drop(tx);
                deferred.flush(&mut Tx::pg(conn)).await
            })
            .await
        }
    };
    // A refused claim wrote nothing: its writer hears the refusal whatever
    // became of the batch.
    for (unit, refusal) in deferred.take_cancelled() {
        if let Some(slot) = answers.get_mut(unit) {
            let (_, answer) = std::mem::replace(slot, (false, Box::new(|_| {})));
            *slot = (false, Box::new(move |_| answer(Err(refusal))));
        }
    }
    deferred.end_batch(committed.is_ok());
    if committed.is_err() {
        *writer = None;
    }
    if let Err(error) = &committed {
        tracing::error!(%error, units = answers.len(), "a group commit failed; its writers are told");
    }
    tracing::debug!(
        units,
        elapsed_us = started.elapsed().as_micros() as u64,
        "group commit"
    );
    for (succeeded, answer) in answers {
        // A failed unit's own error is its answer, whatever the commit did.
        answer(match (&committed, succeeded) {
            (Err(error), true) => Err(StoreError::Unavailable(error.to_string())),
            _ => Ok(()),
        });
    }
}
