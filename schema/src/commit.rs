//! Group commit: many small write transactions share one database
//! transaction and so one fsync.
//!
//! One committer per [`Db`] runs on its own thread with its own
//! connection. Writers hand it jobs and await the outcome; it takes every
//! job queued (up to [`BATCH_UNITS_MAX`]) as one batch, in one transaction:
//! first the batch's plans, judged one by one and written together with
//! set-based statements (see [`crate::plan`]), then each closure ("work")
//! in a savepoint of its own, so that a failing one rolls back alone. It
//! commits once and only then answers each writer. A writer's effects are
//! therefore durable exactly when it hears `Ok`, as with a transaction of
//! its own, and nothing is traded for speed: SQLite stays
//! `synchronous = FULL`, PostgreSQL keeps synchronous commit. A single
//! writer also means SQLite writers never contend for its lock, and
//! PostgreSQL writers on one node never deadlock on each other's rows.
//!
//! On PostgreSQL a closure's writes whose only answer is a changed-row
//! count are pipelined (see [`crate::db::Behind`]): sent without waiting
//! and judged when the closure ends, before its savepoint is released.
//! Ledger balances a closure moves are moved in memory and written once per
//! account before the commit ([`crate::balances`]).

use std::panic::AssertUnwindSafe;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

use crate::balances::Balances;
use crate::db::{establish_sqlite_inline, immediate_transaction, DatabaseUrl, Db, SqliteConn, Tx};
use crate::deferred::Deferred;
use crate::error::{StoreError, StoreResult};
use crate::plan::{self, Plan, PlanError, Written};
use crate::store;

/// Units of work committed together at most.
pub const BATCH_UNITS_MAX: usize = 256;
/// Units waiting for the committer before writers wait to enqueue.
pub const QUEUE_UNITS_MAX: usize = 4_096;

/// What a unit reports once its savepoint is released or rolled back: whether
/// it succeeded, and how to answer its writer once the commit's fate is known.
type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
type Work = Box<dyn for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, (bool, Answer)> + Send>;

/// One writer's work, run in a savepoint of its own.
struct Unit {
    work: Work,
}

/// What a writer hands the committer: work to run in the batch's
/// transaction, or a plan (see [`crate::plan`]), which the batch writes
/// with its other plans, set-based, before any work.
enum Job {
    Work(Unit),
    Plan {
        plan: Box<Plan>,
        answer: oneshot::Sender<Result<Written, PlanError>>,
    },
}

/// The writers' side of the committer.
#[derive(Clone)]
pub struct Committer {
    queue: mpsc::Sender<Job>,
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

    /// Writes `plan` with the other plans of its batch: durable when this
    /// answers `Ok`; refused alone, having written nothing, when it answers
    /// a refusal.
    pub async fn commit_plan(&self, plan: Plan) -> Result<Written, PlanError> {
        let (answer, outcome) = oneshot::channel();
        self.queue
            .send(Job::Plan {
                plan: Box::new(plan),
                answer,
            })
            .await
            .map_err(|_| StoreError::Unavailable("the committer has stopped".into()))?;
        outcome.await.unwrap_or_else(|_| {
            Err(PlanError::Store(StoreError::Unavailable(
                "a plan was lost: the committer stopped".into(),
            )))
        })
    }

    /// Runs `work` in a write transaction shared with other writers' work.
    /// `Err` from `work` rolls back only its own changes.
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.enqueue(work).await
    }

    async fn enqueue<T, E, F>(&self, work: F) -> Result<T, E>
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
            .send(Job::Work(Unit { work }))
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

async fn run(db: Db, mut jobs: mpsc::Receiver<Job>) {
    let mut writer: Option<Writer> = None;
    let mut deferred = Deferred::default();
    let mut batch = Vec::with_capacity(BATCH_UNITS_MAX);
    while jobs.recv_many(&mut batch, BATCH_UNITS_MAX).await > 0 {
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

/// Writes the batch's plans, guarded against panics: a plan that made the
/// judge panic fails its batch, not the committer.
async fn write_plans(
    tx: &mut Tx<'_>,
    plans: Vec<Plan>,
) -> StoreResult<Vec<Result<Written, PlanError>>> {
    match AssertUnwindSafe(plan::write(tx, plans))
        .catch_unwind()
        .await
    {
        Ok(written) => written,
        Err(_) => {
            tracing::error!("writing a batch's plans panicked; the batch is rolled back");
            Err(StoreError::Unavailable(
                "writing a batch's plans failed".into(),
            ))
        }
    }
}

/// How one unit ended: its success, and how to answer its writer.
struct Ran {
    succeeded: bool,
    answer: Answer,
}

/// Runs one unit of the open SQLite transaction in a savepoint; a unit
/// that rolls back takes its deferred writes with it. `held` says whether
/// the previous unit's savepoint is still open. A savepoint statement that
/// fails leaves the transaction in doubt, so it fails the batch.
async fn sqlite_unit(
    conn: &mut SqliteConn,
    deferred: &mut Deferred,
    held: &mut bool,
    unit: Unit,
) -> StoreResult<Ran> {
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
    Ok(Ran { succeeded, answer })
}

/// The same on PostgreSQL, pipelined through the batch's one [`Tx`]: the
/// savepoint is sent with the unit's first statements, the unit's checked
/// writes are sent without waiting (see [`crate::db::Behind`]) and answered
/// before the next unit starts. A write whose check fails fails its unit,
/// which is then rolled back and told why.
async fn pg_unit(tx: &mut Tx<'_>, held: &mut bool, unit: Unit) -> StoreResult<Ran> {
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
    let refused = tx.await_writes().await.err();
    tx.close_unit();
    if let Some(failure) = tx.batch_failure() {
        return Err(StoreError::Unavailable(failure));
    }
    if succeeded && refused.is_none() {
        return Ok(Ran { succeeded, answer });
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
    })
}

/// One transaction for the whole batch, one savepoint per unit, through
/// the committer's own connection (opened on first use, reopened after a
/// failed commit).
async fn commit(db: &Db, writer: &mut Option<Writer>, deferred: &mut Deferred, jobs: Vec<Job>) {
    let started = std::time::Instant::now();
    let units = jobs.len();
    let mut batch = Vec::with_capacity(jobs.len());
    let (mut plans, mut plan_answers) = (Vec::new(), Vec::new());
    for job in jobs {
        match job {
            Job::Work(unit) => batch.push(unit),
            Job::Plan { plan, answer } => {
                plans.push(*plan);
                plan_answers.push(answer);
            }
        }
    }
    let mut verdicts = Vec::new();
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
                let mut tx = Tx::sqlite(conn).with_deferred(deferred);
                verdicts = write_plans(&mut tx, plans).await?;
                drop(tx);
                let mut held = false;
                for unit in batch {
                    let ran = sqlite_unit(conn, deferred, &mut held, unit).await?;
                    answers.push((ran.succeeded, ran.answer));
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
                verdicts = write_plans(&mut tx, plans).await?;
                for unit in batch {
                    let ran = pg_unit(&mut tx, &mut held, unit).await?;
                    answers.push((ran.succeeded, ran.answer));
                }
                // The batch's balance moves, one UPDATE per account; any
                // failure among them fails the batch.
                let moves = tx.balances().map(Balances::take).unwrap_or_default();
                for (account_id, moved) in moves {
                    store::ledger::apply_moves(&mut tx, &account_id, moved).await?;
                }
                tx.await_writes().await?;
                if let Some(failure) = tx.batch_failure() {
                    return Err(StoreError::Unavailable(failure));
                }
                drop(tx);
                deferred.flush(&mut Tx::pg(conn)).await
            })
            .await
        }
    };
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
    // A plan's verdict stands only if its batch committed.
    for (index, answer) in plan_answers.into_iter().enumerate() {
        let verdict = match &committed {
            Ok(()) => verdicts.get_mut(index).map(|verdict| {
                std::mem::replace(
                    verdict,
                    Err(PlanError::Store(StoreError::Unavailable(String::new()))),
                )
            }),
            Err(_) => None,
        };
        let _ = answer.send(verdict.unwrap_or_else(|| {
            let error = committed.as_ref().err().map(ToString::to_string);
            Err(PlanError::Store(StoreError::Unavailable(
                error.unwrap_or_else(|| "a plan's batch ended without its verdict".into()),
            )))
        }));
    }
    for (succeeded, answer) in answers {
        // A failed unit's own error is its answer, whatever the commit did.
        answer(match (&committed, succeeded) {
            (Err(error), true) => Err(StoreError::Unavailable(error.to_string())),
            _ => Ok(()),
        });
    }
}
