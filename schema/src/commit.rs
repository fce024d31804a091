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

use std::panic::AssertUnwindSafe;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

use crate::db::{establish_sqlite_inline, immediate_transaction, DatabaseUrl, Db, SqliteConn, Tx};
use crate::deferred::Deferred;
use crate::error::{StoreError, StoreResult};

/// Units of work committed together at most.
pub const BATCH_UNITS_MAX: usize = 256;
/// Units waiting for the committer before writers wait to enqueue.
pub const QUEUE_UNITS_MAX: usize = 4_096;

/// What a unit reports once its savepoint is released or rolled back: whether
/// it succeeded, and how to answer its writer once the commit's fate is known.
type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
type Unit = Box<dyn for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, (bool, Answer)> + Send>;

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
        let (answer, outcome) = oneshot::channel::<Result<T, E>>();
        let unit: Unit = Box::new(move |tx| {
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
            .send(unit)
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
    let mut batch = Vec::with_capacity(BATCH_UNITS_MAX);
    while units.recv_many(&mut batch, BATCH_UNITS_MAX).await > 0 {
        commit(&db, &mut writer, std::mem::take(&mut batch)).await;
    }
}

/// Runs one unit in a savepoint of the open transaction on `$conn`; a unit
/// that rolls back takes its deferred writes with it. `$held` says whether
/// the previous unit's savepoint is still open: releasing it and opening
/// the next one is then a single round trip, not two. A savepoint statement
/// that fails leaves the transaction in doubt, so it fails the batch.
macro_rules! savepoint {
    ($conn:ident, $deferred:ident, $held:ident, $unit:ident, $tx:path) => {{
        let mark = $deferred.mark();
        $conn
            .batch_execute(if $held {
                "RELEASE SAVEPOINT tern_unit; SAVEPOINT tern_unit"
            } else {
                "SAVEPOINT tern_unit"
            })
            .await?;
        $held = true;
        let tx = &mut $tx(&mut *$conn).with_deferred(&mut $deferred);
        let (succeeded, answer): (bool, Answer) =
            match AssertUnwindSafe($unit(tx)).catch_unwind().await {
                Ok(ran) => ran,
                Err(_) => {
                    tracing::error!("a unit of a group commit panicked; it is rolled back");
                    // Its writer's channel closes unanswered and reports the loss.
                    (false, Box::new(|_| {}))
                }
            };
        if !succeeded {
            $deferred.roll_back_to(mark);
            $conn
                .batch_execute("ROLLBACK TO SAVEPOINT tern_unit")
                .await?;
        }
        (succeeded, answer)
    }};
}

/// One transaction for the whole batch, one savepoint per unit, through
/// the committer's own connection (opened on first use, reopened after a
/// failed commit).
async fn commit(db: &Db, writer: &mut Option<Writer>, batch: Vec<Unit>) {
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
                let (mut deferred, mut held) = (Deferred::default(), false);
                for unit in batch {
                    answers.push(savepoint!(conn, deferred, held, unit, Tx::sqlite));
                }
                deferred.flush(&mut Tx::sqlite(conn)).await
            })
            .await
        }
        Some(Writer::Pg(conn)) => {
            conn.transaction(async |conn| {
                let (mut deferred, mut held) = (Deferred::default(), false);
                for unit in batch {
                    answers.push(savepoint!(conn, deferred, held, unit, Tx::pg));
                }
                deferred.flush(&mut Tx::pg(conn)).await
            })
            .await
        }
    };
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
