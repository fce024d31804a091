//! One database handle over two backends.
//!
//! Every query is written once in `store/` against [`Tx`] and expanded for
//! each backend by [`dispatch!`](crate::dispatch); writes run in
//! [`write_tx!`](crate::write_tx), which opens `BEGIN IMMEDIATE` on SQLite (a
//! deferred transaction that later needs the write lock fails with "database
//! is locked" under concurrency) and an ordinary transaction on PostgreSQL.

use std::path::Path;
use std::time::Duration;

use deadpool::managed::{PoolError, Timeouts};
use deadpool::Runtime;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
// A checkout does not ping: `Fast` recycling still drops a connection that
// is broken or closed, and a ping per checkout was a round trip per request
// and per group commit.
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;

mod sqlite;

pub(crate) use sqlite::establish_sqlite_inline;
pub use sqlite::{
    immediate_transaction, PooledSqlite, SqliteCheckout, SqliteConn, SqliteManager, SqliteRunner,
};

use crate::commit::Committer;
use crate::deferred::Deferred;

use crate::error::{StoreError, StoreResult};
use crate::plan::{Fence, Plan, PlanError, Written};

/// How long a caller waits for a pooled connection before the database is
/// reported unavailable (503 at the edge) instead of queueing without bound.
pub const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits for the write lock before failing a statement.
pub const SQLITE_BUSY_TIMEOUT_MS: u32 = 10_000;
/// WAL pages a commit leaves before SQLite checkpoints them into the
/// database file (SQLite's default is 1,000). A checkpoint copies each page
/// the WAL holds once, however many commits rewrote it, so spacing them
/// out copies the hot pages (a busy account's row, the right edge of every
/// index) far fewer times, and it runs on the committer's thread, inside
/// the serial write path. Durability does not depend on it: a commit is
/// durable once its WAL frames are synced (`synchronous = FULL`). The WAL
/// grows to about this many pages (4 KiB each, so ~40 MiB) before it is
/// reused.
pub const SQLITE_WAL_AUTOCHECKPOINT_PAGES: u32 = 10_000;
pub const SQLITE_POOL_SIZE_MAX: usize = 8;
pub const POSTGRES_POOL_SIZE_MAX: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Where the database lives, parsed from `TERN_DATABASE_URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A file path; `:memory:` is refused because each pooled connection
    /// would get a database of its own.
    Sqlite(String),
    Postgres(String),
}

impl DatabaseUrl {
    pub fn parse(url: &str) -> StoreResult<Self> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() || path.contains(":memory:") {
                return Err(StoreError::Url(
                    "sqlite:// needs a file path (in-memory databases are per connection)".into(),
                ));
            }
            return Ok(DatabaseUrl::Sqlite(path.to_owned()));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(url.to_owned()));
        }
        Err(StoreError::Url(
            "expected sqlite://PATH or postgres://...".into(),
        ))
    }

    pub fn backend(&self) -> Backend {
        match self {
            DatabaseUrl::Sqlite(_) => Backend::Sqlite,
            DatabaseUrl::Postgres(_) => Backend::Postgres,
        }
    }
}

#[derive(Clone)]
enum DbPool {
    Sqlite(deadpool::managed::Pool<SqliteManager>),
    Pg(Pool<AsyncPgConnection>),
}

/// A cloneable handle to the connection pool of either backend, and to its
/// group committer (see [`crate::commit`]).
#[derive(Clone)]
pub struct Db {
    pool: DbPool,
    url: DatabaseUrl,
    /// `None` only on the committer's own handle.
    committer: Option<Committer>,
    /// The ownership every plan committed through this handle carries
    /// (see [`Db::fenced`]).
    fence: Option<Fence>,
}

/// A connection checked out of the pool.
#[allow(
    clippy::large_enum_variant,
    reason = "it lives briefly on one stack frame per request; boxing the larger variant would add an allocation to every checkout for no gain"
)]
pub enum Pooled {
    Sqlite(SqliteCheckout),
    Pg(Object<AsyncPgConnection>),
}

/// A borrowed connection, inside or outside a transaction: what every store
/// function takes, so that an actor can compose one transaction per transition.
pub struct Tx<'a> {
    conn: Conn<'a>,
    /// Inside a group commit, the writes its batch makes once for all its
    /// units (see [`crate::deferred`]); `None` elsewhere, where they are made
    /// at once.
    deferred: Option<&'a mut Deferred>,
    /// Writes sent without waiting for their answers (see [`Behind`]).
    behind: Behind<'a>,
}

/// The concrete connection a [`Tx`] borrows. PostgreSQL's is shared: its
/// statements may be pipelined, several in flight at once, in order.
pub enum Conn<'a> {
    Sqlite(&'a mut SqliteConn),
    Pg(&'a AsyncPgConnection),
}

/// Writes whose only answer is how many rows they changed, sent to
/// PostgreSQL without waiting for that answer: a unit of a group commit
/// otherwise waits one round trip per statement, and the committer's one
/// connection spends most of its time waiting. Each write's answer is
/// checked when the unit ends ([`Behind::await_writes`]), before its savepoint is
/// released; a write whose check fails fails the unit, which then rolls back
/// whole. PostgreSQL runs a connection's statements in the order they were
/// sent, so a later read in the same unit sees every earlier write.
///
/// Only a group commit on PostgreSQL turns this on. Elsewhere (SQLite, or
/// an ordinary transaction) a write is made and checked at once, so the
/// same store function serves both.
pub struct Behind<'a> {
    enabled: bool,
    /// Whether writes sent now belong to a unit with a savepoint, whose
    /// failure fails only that unit; otherwise a failure fails the batch.
    in_unit: bool,
    sent: FuturesUnordered<BoxFuture<'a, (u64, Scope, StoreResult<()>)>>,
    /// Writes sent so far, numbering them: of several failures in one unit
    /// the one sent first is reported, whatever order the answers are
    /// collected in.
    sequence: u64,
    failed: Option<(u64, StoreError)>,
    batch_failed: Option<String>,
}

/// Whom a failed write fails.
#[derive(Clone, Copy)]
enum Scope {
    /// Its unit, which has a savepoint.
    Unit,
    Batch,
}

impl<'a> Behind<'a> {
    fn new(enabled: bool) -> Self {
        Behind {
            enabled,
            in_unit: false,
            sent: FuturesUnordered::new(),
            sequence: 0,
            failed: None,
            batch_failed: None,
        }
    }

    /// Sends `write`, whose changed-row count `check` judges; with pipelining
    /// off, waits for it and answers the check.
    pub async fn send<C>(
        &mut self,
        write: BoxFuture<'a, diesel::QueryResult<usize>>,
        check: C,
    ) -> StoreResult<()>
    where
        C: FnOnce(usize) -> StoreResult<()> + Send + 'a,
    {
        if !self.enabled {
            return check(write.await?);
        }
        let scope = match self.in_unit {
            true => Scope::Unit,
            false => Scope::Batch,
        };
        let sequence = self.sequence;
        self.sequence += 1;
        self.sent.push(Box::pin(async move {
            let judged = match write.await {
                Ok(changed) => check(changed),
                Err(error) => Err(error.into()),
            };
            (sequence, scope, judged)
        }));
        // Polled once now, so that the statement is sent in program order
        // (a statement waiting to be prepared holds the connection's
        // statement cache, which later statements queue for in order).
        self.collect(&mut std::task::Context::from_waker(
            futures_util::task::noop_waker_ref(),
        ));
        Ok(())
    }

    /// Awaits `work` (a statement whose answer the unit needs) while
    /// driving the writes sent before it: one of them may hold what `work`
    /// waits for.
    pub async fn drive<T>(&mut self, work: impl std::future::Future<Output = T>) -> T {
        if self.sent.is_empty() {
            return work.await;
        }
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            self.collect(cx);
            work.as_mut().poll(cx)
        })
        .await
    }

    /// Waits for every write sent; the first failure, if any (a failure
    /// that fails the batch first).
    pub async fn await_writes(&mut self) -> StoreResult<()> {
        std::future::poll_fn(|cx| {
            self.collect(cx);
            if self.sent.is_empty() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        if let Some(failure) = &self.batch_failed {
            return Err(StoreError::Unavailable(failure.clone()));
        }
        self.failed.take().map_or(Ok(()), |(_, error)| Err(error))
    }

    fn collect(&mut self, cx: &mut std::task::Context<'_>) {
        while let std::task::Poll::Ready(Some((sequence, scope, answer))) =
            self.sent.poll_next_unpin(cx)
        {
            match (answer, scope) {
                (Ok(()), _) => {}
                (Err(error), Scope::Unit) => {
                    if self
                        .failed
                        .as_ref()
                        .is_none_or(|(first, _)| sequence < *first)
                    {
                        self.failed = Some((sequence, error));
                    }
                }
                (Err(error), _) => {
                    self.batch_failed.get_or_insert(error.to_string());
                }
            }
        }
    }
}

/// The check of a write that must change exactly one row.
pub fn one_row(what: &'static str) -> impl FnOnce(usize) -> StoreResult<()> + Send {
    rows(1, what)
}

/// The check of a write that must change exactly `expected` rows.
pub fn rows(expected: usize, what: &'static str) -> impl FnOnce(usize) -> StoreResult<()> + Send {
    move |changed| {
        if changed == expected {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!(
                "{what}: {changed} rows changed, not {expected}"
            )))
        }
    }
}

impl Pooled {
    pub fn tx(&mut self) -> Tx<'_> {
        match self {
            Pooled::Sqlite(conn) => Tx::sqlite(conn),
            Pooled::Pg(conn) => Tx::pg(conn),
        }
    }
}

impl<'a> Tx<'a> {
    pub fn sqlite(conn: &'a mut SqliteConn) -> Self {
        Tx {
            conn: Conn::Sqlite(conn),
            deferred: None,
            behind: Behind::new(false),
        }
    }

    pub fn pg(conn: &'a AsyncPgConnection) -> Self {
        Tx {
            conn: Conn::Pg(conn),
            deferred: None,
            behind: Behind::new(false),
        }
    }

    /// A unit of a group commit on PostgreSQL: writes sent through
    /// [`write_behind!`](crate::write_behind) are pipelined.
    pub(crate) fn pipelined(conn: &'a AsyncPgConnection) -> Self {
        Tx {
            conn: Conn::Pg(conn),
            deferred: None,
            behind: Behind::new(true),
        }
    }

    /// The connection and the writes sent ahead on it, for the macros.
    pub fn parts(&mut self) -> (&mut Conn<'a>, &mut Behind<'a>) {
        (&mut self.conn, &mut self.behind)
    }

    /// Waits for the writes sent ahead; the first failure, if any.
    pub async fn await_writes(&mut self) -> StoreResult<()> {
        self.behind.await_writes().await
    }

    /// Writes sent from now on belong to a unit with a savepoint: their
    /// failure fails that unit alone.
    pub(crate) fn open_unit(&mut self) {
        self.behind.in_unit = true;
    }

    pub(crate) fn close_unit(&mut self) {
        self.behind.in_unit = false;
    }

    /// Why the batch cannot commit, if a write outside any savepoint failed.
    pub(crate) fn batch_failure(&self) -> Option<String> {
        self.behind.batch_failed.clone()
    }

    pub(crate) fn mark(&self) -> Option<crate::deferred::Mark> {
        self.deferred.as_deref().map(Deferred::mark)
    }

    pub(crate) fn roll_back_to(&mut self, mark: Option<crate::deferred::Mark>) {
        if let (Some(deferred), Some(mark)) = (self.deferred.as_deref_mut(), mark) {
            deferred.roll_back_to(mark);
        }
    }

    /// Sends a statement of the batch's own (a savepoint) ahead of the
    /// unit's; its failure fails the batch.
    pub(crate) async fn send_batch_statement(&mut self, sql: &'static str) -> StoreResult<()> {
        let Conn::Pg(conn) = &self.conn else {
            return Err(StoreError::Unavailable(
                "pipelining needs PostgreSQL".into(),
            ));
        };
        let mut sender: &'a AsyncPgConnection = conn;
        let write: BoxFuture<'a, diesel::QueryResult<usize>> =
            Box::pin(async move { sender.batch_execute(sql).await.map(|()| 0) });
        let in_unit = std::mem::replace(&mut self.behind.in_unit, false);
        let sent = self.behind.send(write, |_| Ok(())).await;
        self.behind.in_unit = in_unit;
        sent
    }

    /// Runs a statement of the batch's own now, after the writes sent.
    pub(crate) async fn execute_batch_now(&mut self, sql: &'static str) -> StoreResult<()> {
        match self.parts() {
            (Conn::Pg(conn), behind) => {
                let mut sender: &AsyncPgConnection = conn;
                behind.drive(sender.batch_execute(sql)).await?;
            }
            (Conn::Sqlite(conn), _) => conn.batch_execute(sql).await?,
        }
        Ok(())
    }

    /// A unit of a group commit, whose batch-wide writes go to `deferred`.
    pub(crate) fn with_deferred(mut self, deferred: &'a mut Deferred) -> Self {
        self.deferred = Some(deferred);
        self
    }

    /// The concrete connection, for a query written per backend. Writes
    /// sent ahead are answered first, as a statement run through it would
    /// not drive them.
    pub async fn conn(&mut self) -> StoreResult<&mut Conn<'a>> {
        self.behind.await_writes().await?;
        Ok(&mut self.conn)
    }

    pub(crate) fn deferred(&mut self) -> Option<&mut Deferred> {
        self.deferred.as_deref_mut()
    }

    /// What the group committer remembers of immutable rows; `None`
    /// outside a group commit, where every read goes to the database.
    pub(crate) fn known(&mut self) -> Option<&mut crate::known::Known> {
        self.deferred
            .as_deref_mut()
            .map(|deferred| &mut deferred.known)
    }

    /// The batch's ledger balance moves, kept in memory inside a group
    /// commit on PostgreSQL (see [`crate::balances`]); `None` elsewhere,
    /// where every line is an UPDATE of its own.
    pub(crate) fn balances(&mut self) -> Option<&mut crate::balances::Balances> {
        if !self.behind.enabled {
            return None;
        }
        self.deferred
            .as_deref_mut()
            .map(|deferred| &mut deferred.balances)
    }

    /// Whether checked writes are pipelined (see [`Behind`]): their
    /// failures then surface when the unit ends, not at the call.
    pub fn pipelined_writes(&self) -> bool {
        self.behind.enabled
    }

    pub fn backend(&self) -> Backend {
        match self.conn {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Pg(_) => Backend::Postgres,
        }
    }
}

/// Runs one query body against whichever backend `tx` holds; the body is
/// type-checked once per backend. `$conn` is bound to the concrete connection.
#[macro_export]
macro_rules! dispatch {
    ($tx:expr, $conn:ident => $body:expr) => {
        match $crate::db::Tx::parts($tx) {
            ($crate::db::Conn::Sqlite(inner), _) => {
                let $conn = &mut **inner;
                $body
            }
            ($crate::db::Conn::Pg(inner), behind) => {
                behind
                    .drive(async {
                        let $conn = inner;
                        $body
                    })
                    .await
            }
        }
    };
}

/// Runs one write, built once per backend like [`dispatch!`], whose answer
/// is only its changed-row count, judged by `$check`
/// (`FnOnce(usize) -> StoreResult<()>`, e.g. [`one_row`]). `$body` is the
/// write's future, not awaited. Inside a group commit on PostgreSQL the
/// write is pipelined and judged when the unit ends (see [`Behind`]);
/// elsewhere it is made and judged at once. Evaluates to `StoreResult<()>`.
#[macro_export]
macro_rules! write_behind {
    ($tx:expr, $conn:ident => $body:expr, $check:expr) => {
        match $crate::db::Tx::parts($tx) {
            ($crate::db::Conn::Sqlite(inner), _) => {
                let $conn = &mut **inner;
                match $body.await {
                    Ok(changed) => ($check)(changed),
                    Err(error) => Err($crate::StoreError::from(error)),
                }
            }
            ($crate::db::Conn::Pg(inner), behind) => {
                let $conn = inner;
                let write = $body;
                behind.send(write, $check).await
            }
        }
    };
}

/// Runs `$body` (an expression of type `Result<T, E>` with
/// `E: From<StoreError> + From<diesel::result::Error>`) in one write
/// transaction, with `$tx: &mut Tx` in scope. Commits on `Ok`, rolls back on
/// `Err`. A dropped future leaves the connection marked broken, and the pool
/// discards it rather than reuse an open transaction.
#[macro_export]
macro_rules! write_tx {
    ($db:expr, |$tx:ident| $body:expr) => {{
        use $crate::__private::AsyncConnection as _;
        match $db.get().await {
            Err(error) => Err(error.into()),
            Ok(mut pooled) => match &mut pooled {
                $crate::db::Pooled::Sqlite(conn) => {
                    $crate::db::immediate_transaction(&mut **conn, async |conn| {
                        let $tx = &mut $crate::db::Tx::sqlite(conn);
                        $body
                    })
                    .await
                }
                $crate::db::Pooled::Pg(conn) => {
                    conn.transaction(async |conn| {
                        let $tx = &mut $crate::db::Tx::pg(&*conn);
                        $body
                    })
                    .await
                }
            },
        }
    }};
}

/// Longest a PostgreSQL session may sit idle inside a transaction before
/// the server ends it: far above any pause between one transaction's
/// statements here, short beside a failover.
pub const IDLE_IN_TRANSACTION_MAX_MS: u64 = 10_000;

impl Db {
    /// Opens a pool. Does not run migrations (see [`crate::migrate`]).
    pub async fn connect(url: &str) -> StoreResult<Db> {
        let parsed = DatabaseUrl::parse(url)?;
        let size_max = match parsed.backend() {
            Backend::Sqlite => SQLITE_POOL_SIZE_MAX,
            Backend::Postgres => POSTGRES_POOL_SIZE_MAX,
        };
        let mut db = Db {
            pool: open_pool(&parsed, size_max)?,
            url: parsed,
            committer: None,
            fence: None,
        };
        // Fail fast on a wrong URL instead of at the first request.
        db.ping().await?;
        db.committer = Some(Committer::start(db.clone()).map_err(|error| {
            StoreError::Unavailable(format!("starting the committer: {error}"))
        })?);
        Ok(db)
    }

    /// A handle on a pool of its own, of at most `size_max` connections,
    /// for work that must not wait behind the requests' pool: the cluster
    /// heartbeat, which a node saturated with requests must still renew.
    /// It reads and writes directly; it has no group committer.
    pub async fn dedicated(&self, size_max: usize) -> StoreResult<Db> {
        let db = Db {
            pool: open_pool(&self.url, size_max)?,
            url: self.url.clone(),
            committer: None,
            fence: None,
        };
        db.ping().await?;
        Ok(db)
    }

    pub fn backend(&self) -> Backend {
        self.url.backend()
    }

    /// This handle, whose plans are written only while `fence` holds: the
    /// handle an entity's actor writes through where several nodes share
    /// the database, so that a node that lost the entity's slot writes
    /// nothing for it ([`PlanError::Fenced`]).
    pub fn fenced(&self, fence: Fence) -> Db {
        Db {
            fence: Some(fence),
            ..self.clone()
        }
    }

    /// The ownership this handle's plans carry, if any.
    pub fn fence(&self) -> Option<Fence> {
        self.fence
    }

    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// Runs `work` in a write transaction committed together with other
    /// writers' work (group commit); see [`Committer::write`]. Write it as
    /// `db.write(move |tx| Box::pin(async move { ... })).await`.
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: for<'t, 'c> FnOnce(&'t mut Tx<'c>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        match &self.committer {
            Some(committer) => committer.write(work).await,
            None => Err(E::from(StoreError::Unavailable(
                "the committer cannot enqueue work for itself".into(),
            ))),
        }
    }

    /// Writes a transition's [`Plan`] in a group commit: durable when this
    /// answers `Ok`, and nothing of it written when it answers `Err`. The
    /// store writes it with the other plans of its batch, set-based (see
    /// [`crate::plan`]); a refused plan never fails the plans beside it.
    pub async fn commit(&self, plan: Plan) -> Result<Written, PlanError> {
        let mut plan = plan;
        if plan.fence.is_none() {
            plan.fence = self.fence;
        }
        match &self.committer {
            Some(committer) => committer.commit_plan(plan).await,
            None => Err(PlanError::Store(StoreError::Unavailable(
                "the committer cannot enqueue work for itself".into(),
            ))),
        }
    }

    pub async fn get(&self) -> StoreResult<Pooled> {
        let started = std::time::Instant::now();
        let pooled = match &self.pool {
            DbPool::Sqlite(pool) => pool
                .get()
                .await
                .map(|object| Pooled::Sqlite(SqliteCheckout::new(object)))
                .map_err(pool_error),
            DbPool::Pg(pool) => pool.get().await.map(Pooled::Pg).map_err(pool_error),
        };
        metrics::histogram!("tern_db_pool_wait_seconds").record(started.elapsed().as_secs_f64());
        if pooled.is_err() {
            metrics::counter!("tern_db_pool_failures_total").increment(1);
        }
        pooled
    }

    /// A round trip to the database, for readiness.
    pub async fn ping(&self) -> StoreResult<()> {
        let mut pooled = self.get().await?;
        let tx = &mut pooled.tx();
        dispatch!(tx, conn => conn.batch_execute("SELECT 1").await)?;
        Ok(())
    }

    /// Closes the pool: every later `get` fails. Used at shutdown, and by
    /// tests that simulate a database outage.
    pub fn close(&self) {
        match &self.pool {
            DbPool::Sqlite(pool) => pool.close(),
            DbPool::Pg(pool) => pool.close(),
        }
    }
}

fn open_pool(url: &DatabaseUrl, size_max: usize) -> StoreResult<DbPool> {
    Ok(match url {
        DatabaseUrl::Sqlite(path) => {
            ensure_parent_dir(path)?;
            let manager = SqliteManager { path: path.clone() };
            DbPool::Sqlite(build_pool(
                deadpool::managed::Pool::builder(manager),
                size_max,
            )?)
        }
        DatabaseUrl::Postgres(url) => {
            let mut config = ManagerConfig::<AsyncPgConnection>::default();
            config.recycling_method = RecyclingMethod::Fast;
            config.custom_setup = Box::new(|url| {
                let url = url.to_owned();
                Box::pin(async move {
                    use diesel_async::AsyncConnection;
                    let mut conn = AsyncPgConnection::establish(&url).await?;
                    // A process frozen inside a transaction (SIGSTOP, a
                    // stall) would hold its locks, among them a batch's
                    // FOR SHARE on its slots, for as long as it stays
                    // frozen: the server ends such a session instead, so
                    // another node can take the slots over.
                    conn.batch_execute(&format!(
                        "SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MAX_MS}"
                    ))
                    .await
                    .map_err(|error| diesel::ConnectionError::BadConnection(error.to_string()))?;
                    Ok(conn)
                })
            });
            let manager =
                AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
            DbPool::Pg(build_pool(Pool::builder(manager), size_max)?)
        }
    })
}

fn build_pool<M: deadpool::managed::Manager>(
    builder: deadpool::managed::PoolBuilder<M>,
    size_max: usize,
) -> StoreResult<deadpool::managed::Pool<M>> {
    builder
        .max_size(size_max)
        .timeouts(Timeouts {
            wait: Some(POOL_WAIT_TIMEOUT),
            create: Some(POOL_WAIT_TIMEOUT),
            recycle: Some(POOL_WAIT_TIMEOUT),
        })
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|error| StoreError::Unavailable(error.to_string()))
}

fn pool_error<E: std::fmt::Display>(error: PoolError<E>) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// SQLite creates the file but not its folder (`data/` on a fresh checkout).
pub(crate) fn ensure_parent_dir(path: &str) -> StoreResult<()> {
    if let Some(parent) = Path::new(path).parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|error| {
                StoreError::Unavailable(format!("{}: {error}", parent.display()))
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_parse_by_scheme() {
        assert_eq!(
            DatabaseUrl::parse("sqlite://data/tern.db").ok(),
            Some(DatabaseUrl::Sqlite("data/tern.db".into()))
        );
        assert_eq!(
            DatabaseUrl::parse("postgres://u@h/db")
                .map(|u| u.backend())
                .ok(),
            Some(Backend::Postgres)
        );
        assert!(DatabaseUrl::parse("sqlite://:memory:").is_err());
        assert!(DatabaseUrl::parse("sqlite://").is_err());
        assert!(DatabaseUrl::parse("mysql://h/db").is_err());
    }
}
