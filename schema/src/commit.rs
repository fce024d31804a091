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
//! Closures move no money: the plans' ledger balance moves are written
//! once per account, in id order, just before the commit
//! ([`crate::balances`]). A batch that lost a race its judge could not see
//! has its plans written again without it (see [`commit`]).

use std::panic::AssertUnwindSafe;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, Span};

use crate::balances::Balances;
use crate::db::{establish_sqlite_inline, immediate_transaction, DatabaseUrl, Db, SqliteConn, Tx};
use crate::deferred::Deferred;
use crate::error::{StoreError, StoreResult};
use crate::plan::{self, Plan, PlanError, Written};
use crate::store;
use crate::TRACE_TARGET;

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
    /// The writer's span, which the batch's follows from in a trace.
    span: Span,
}

/// What a writer hands the committer: work to run in the batch's
/// transaction, or a plan (see [`crate::plan`]), which the batch writes
/// with its other plans, set-based, before any work.
enum Job {
    Work(Unit),
    Plan {
        plan: Box<Plan>,
        answer: oneshot::Sender<Result<Written, PlanError>>,
        span: Span,
    },
}

impl Job {
    fn span(&self) -> &Span {
        match self {
            Job::Work(unit) => &unit.span,
            Job::Plan { span, .. } => span,
        }
    }
}

/// A write's span in a trace, from enqueueing to its commit's answer.
fn write_span() -> Span {
    tracing::debug_span!(target: TRACE_TARGET, "db.write")
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
        let span = write_span();
        let (answer, outcome) = oneshot::channel();
        async {
            self.queue
                .send(Job::Plan {
                    plan: Box::new(plan),
                    answer,
                    span: span.clone(),
                })
                .await
                .map_err(|_| StoreError::Unavailable("the committer has stopped".into()))?;
            outcome.await.unwrap_or_else(|_| {
                Err(PlanError::Store(StoreError::Unavailable(
                    "a plan was lost: the committer stopped".into(),
                )))
            })
        }
        .instrument(span.clone())
        .await
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
        let span = write_span();
        async {
            self.queue
                .send(Job::Work(Unit {
                    work,
                    span: span.clone(),
                }))
                .await
                .map_err(|_| {
                    E::from(StoreError::Unavailable("the committer has stopped".into()))
                })?;
            outcome.await.unwrap_or_else(|_| {
                Err(E::from(StoreError::Unavailable(
                    "a write was lost: its unit failed or the committer stopped".into(),
                )))
            })
        }
        .instrument(span.clone())
        .await
    }
}

/// The committer's own connection, opened on its thread so that its I/O
/// (PostgreSQL's connection task included) runs there, not on whichever
/// request thread happened to open a pooled one.
#[allow(
    clippy::large_enum_variant,
    reason = "one lives for the committer's lifetime; boxing would buy nothing"
)]
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
        // One batch serves many traces: its span starts a trace of its own
        // and links each write it commits.
        let span = tracing::debug_span!(target: TRACE_TARGET, parent: None, "db.commit", units = batch.len());
        for job in &batch {
            span.follows_from(job.span());
        }
        commit(&db, &mut writer, &mut deferred, std::mem::take(&mut batch))
            .instrument(span)
            .await;
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
    plans: &[Plan],
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

/// Whether a batch's failure is one plan's, not the batch's: a race with
/// another writer that the judge could not see (a key taken or a row
/// moved since the read, or PostgreSQL breaking a deadlock or a
/// serialization conflict by aborting this transaction), or a row the
/// schema refused (a check, a foreign key, a missing value: the judge does
/// not repeat the schema's constraints). Written again in halves, the
/// plans meet what won, and the plan at fault ends alone.
fn lost_race(error: &StoreError) -> bool {
    use diesel::result::{DatabaseErrorKind, Error as DieselError};
    match error {
        StoreError::UniqueViolation(_) | StoreError::Conflict(_) => true,
        StoreError::Query(DieselError::DatabaseError(
            DatabaseErrorKind::CheckViolation
            | DatabaseErrorKind::ForeignKeyViolation
            | DatabaseErrorKind::NotNullViolation,
            _,
        )) => true,
        other => transient(other),
    }
}

/// Plans waiting for a batch, with their writers' answers.
struct Plans {
    plans: Vec<Plan>,
    answers: Vec<oneshot::Sender<Result<Written, PlanError>>>,
}

/// Commits a batch. A batch that lost a race before its commit (a
/// statement the judge could not foresee: a key taken or a row moved by
/// another node between the read and the write) wrote nothing; its plans,
/// being data, are written again without it: halved while more than one,
/// so that the race reaches the writer of the plan that lost it alone,
/// with its own cause. Closures run once: theirs is the batch's failure.
async fn commit(db: &Db, writer: &mut Option<Writer>, deferred: &mut Deferred, jobs: Vec<Job>) {
    let started = std::time::Instant::now();
    metrics::histogram!("tern_commit_batch_size").record(jobs.len() as f64);
    let mut units = Vec::with_capacity(jobs.len());
    let mut first = Plans {
        plans: Vec::new(),
        answers: Vec::new(),
    };
    for job in jobs {
        match job {
            Job::Work(unit) => units.push(unit),
            Job::Plan { plan, answer, .. } => {
                first.plans.push(*plan);
                first.answers.push(answer);
            }
        }
    }
    // Enough to single out two plans at fault; a failure every part of the
    // batch shares (a constraint a migration got wrong) would otherwise
    // cost twice as many transactions as the batch has plans.
    let mut splits_left = 2 * (usize::BITS - first.plans.len().leading_zeros()) + 2;
    let mut pending = vec![(first, units)];
    while let Some((plans, units)) = pending.pop() {
        let alone = plans.plans.len() == 1 && units.is_empty();
        let Some((failed, error)) = commit_once(db, writer, deferred, plans, units, alone).await
        else {
            continue;
        };
        let Plans {
            mut plans,
            mut answers,
        } = failed;
        if splits_left == 0 {
            tracing::error!(%error, plans = plans.len(), "batches keep failing before their commit; their writers are told");
            for answer in answers {
                let _ = answer.send(Err(PlanError::Store(StoreError::Unavailable(
                    error.to_string(),
                ))));
            }
            continue;
        }
        splits_left -= 1;
        tracing::warn!(%error, plans = plans.len(), "a batch failed before its commit; its plans are written again without it");
        if plans.len() > 1 {
            let half = plans.len() / 2;
            let later = Plans {
                plans: plans.split_off(half),
                answers: answers.split_off(half),
            };
            pending.push((later, Vec::new()));
        }
        pending.push((Plans { plans, answers }, Vec::new()));
    }
    metrics::histogram!("tern_commit_duration_seconds").record(started.elapsed().as_secs_f64());
}

/// One transaction for one batch, one savepoint per unit, through the
/// committer's own connection (opened on first use, reopened after a
/// failed commit). Answers every writer, except, when the batch failed
/// before its commit and its plans may be written again (it was more than
/// `alone`), the plans' writers: those plans come back with the failure.
async fn commit_once(
    db: &Db,
    writer: &mut Option<Writer>,
    deferred: &mut Deferred,
    batch_plans: Plans,
    batch: Vec<Unit>,
    alone: bool,
) -> Option<(Plans, StoreError)> {
    let started = std::time::Instant::now();
    let units = batch.len() + batch_plans.plans.len();
    let Plans {
        plans,
        answers: plan_answers,
    } = batch_plans;
    let mut verdicts = Vec::new();
    let mut answers: Vec<(bool, Answer)> = Vec::with_capacity(batch.len());
    // Whether every statement before the commit succeeded: a failure after
    // it leaves the batch's outcome unknown, and nothing is written again.
    let mut reached_commit = false;
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
                verdicts = write_plans(&mut tx, &plans).await?;
                drop(tx);
                let mut held = false;
                for unit in batch {
                    let ran = sqlite_unit(conn, deferred, &mut held, unit).await?;
                    answers.push((ran.succeeded, ran.answer));
                }
                deferred.flush(&mut Tx::sqlite(conn)).await?;
                reached_commit = true;
                Ok(())
            })
            .await
        }
        Some(Writer::Pg(conn)) => {
            conn.transaction(async |conn| {
                let conn: &AsyncPgConnection = conn;
                let mut held = false;
                let mut tx = Tx::pipelined(conn).with_deferred(&mut *deferred);
                verdicts = write_plans(&mut tx, &plans).await?;
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
                deferred.flush(&mut Tx::pg(conn)).await?;
                reached_commit = true;
                Ok(())
            })
            .await
        }
    };
    deferred.end_batch(committed.is_ok());
    // A lost race is a statement's refusal, rolled back with the batch:
    // the connection stays good. Anything else may have broken it.
    let race = !reached_commit && committed.as_ref().err().is_some_and(lost_race);
    if committed.is_err() && !race {
        *writer = None;
    }
    match &committed {
        Err(error) if race => tracing::info!(%error, units, "a batch lost a race"),
        Err(error) => tracing::error!(%error, units, "a group commit failed; its writers are told"),
        Ok(()) => {}
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
    let error = match committed {
        Ok(()) => {
            // A plan's verdict stands only if its batch committed.
            let mut verdicts = verdicts.into_iter();
            for answer in plan_answers {
                let _ = answer.send(verdicts.next().unwrap_or_else(|| {
                    Err(PlanError::Store(StoreError::Unavailable(
                        "a plan's batch ended without its verdict".into(),
                    )))
                }));
            }
            return None;
        }
        Err(error) => error,
    };
    if race && !alone && !plans.is_empty() {
        return Some((
            Plans {
                plans,
                answers: plan_answers,
            },
            error,
        ));
    }
    // Alone, a lost race is the plan's own answer: a key or a row another
    // node took or moved, or a row the schema refused (no retry mends it).
    // A deadlock broken on it, an outage, or a failure once the commit was
    // sent (whose outcome nobody knows) is unavailable: retry.
    let own = race && alone && !transient(&error);
    let text = error.to_string();
    let mut own_error = own.then_some(error);
    for answer in plan_answers {
        let answered = own_error
            .take()
            .unwrap_or_else(|| StoreError::Unavailable(text.clone()));
        let _ = answer.send(Err(PlanError::Store(answered)));
    }
    None
}

/// A lost race that goes away by itself: PostgreSQL aborting a deadlock or
/// a serialization conflict. Alone, its plan hears "unavailable, retry".
fn transient(error: &StoreError) -> bool {
    use diesel::result::{DatabaseErrorKind, Error as DieselError};
    match error {
        StoreError::Query(DieselError::DatabaseError(
            DatabaseErrorKind::SerializationFailure,
            _,
        )) => true,
        StoreError::Query(DieselError::DatabaseError(_, info)) => {
            info.message().contains("deadlock detected")
        }
        _ => false,
    }
}
