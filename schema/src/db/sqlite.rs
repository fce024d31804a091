//! SQLite connections: where their statements run, how they are opened, and
//! how the pool takes one back.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deadpool::managed::{Manager, Metrics, Object, RecycleError, RecycleResult};
use diesel::connection::AnsiTransactionManager;
use diesel::SqliteConnection;
use diesel_async::pooled_connection::PoolableConnection;
use diesel_async::sync_connection_wrapper::{SpawnBlocking, SyncConnectionWrapper};
use diesel_async::SimpleAsyncConnection;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, TryFutureExt};

use super::{SQLITE_BUSY_TIMEOUT_MS, SQLITE_WAL_AUTOCHECKPOINT_PAGES};

pub type SqliteConn = SyncConnectionWrapper<SqliteConnection, SqliteRunner>;

/// Where a SQLite connection runs its statements. Pooled connections hand
/// each one to tokio's blocking pool, so request threads never block on the
/// database. The committer's own connection runs them inline on the
/// committer's thread, which exists to block on them: a hop to another
/// thread and back per statement cost more than the statement itself, and
/// left the committer waiting on context switches instead of committing.
#[derive(Clone, Debug, Default)]
pub struct SqliteRunner {
    inline: bool,
    /// Statements handed to the blocking pool and not finished, counting
    /// those whose caller gave up on them: each holds the connection until
    /// it ends, whoever holds the connection's handle.
    busy: Arc<AtomicUsize>,
}

/// One statement of [`SqliteRunner::busy`]; ends when dropped, after the
/// statement's task (and the connection it captured) is gone.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn start(count: &Arc<AtomicUsize>) -> Busy {
        count.fetch_add(1, Ordering::AcqRel);
        Busy(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SpawnBlocking for SqliteRunner {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, Result<R, Box<dyn std::error::Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        if self.inline {
            let result = task();
            return Box::pin(async move { Ok(result) });
        }
        let busy = Busy::start(&self.busy);
        tokio::task::spawn_blocking(move || {
            // `task` is consumed by the call: what it captured is dropped
            // before `busy` ends.
            let result = task();
            drop(busy);
            result
        })
        .map_err(|error| Box::new(error) as Box<dyn std::error::Error + Send + Sync>)
        .boxed()
    }

    fn get_runtime() -> Self {
        SqliteRunner::default()
    }
}

/// `BEGIN IMMEDIATE`, then `f`, then commit on `Ok` or roll back on `Err`:
/// diesel-async's own `immediate_transaction` exists only for its default
/// runner, and a deferred transaction that later needs the write lock fails
/// with "database is locked" under concurrency.
pub async fn immediate_transaction<R, E, F>(conn: &mut SqliteConn, f: F) -> Result<R, E>
where
    F: AsyncFnOnce(&mut SqliteConn) -> Result<R, E>,
    E: From<diesel::result::Error>,
{
    use diesel_async::sync_connection_wrapper::SyncTransactionManagerWrapper;
    use diesel_async::TransactionManager;
    type Manager = SyncTransactionManagerWrapper<AnsiTransactionManager>;
    conn.spawn_blocking(|inner| {
        AnsiTransactionManager::begin_transaction_sql(inner, "BEGIN IMMEDIATE")
    })
    .await?;
    match f(&mut *conn).await {
        Ok(value) => {
            Manager::commit_transaction(conn).await?;
            Ok(value)
        }
        Err(error) => {
            Manager::rollback_transaction(conn).await?;
            Err(error)
        }
    }
}

/// The committer's own SQLite connection, whose statements run inline on
/// the committer's thread (see [`SqliteRunner`]).
pub(crate) async fn establish_sqlite_inline(path: &str) -> diesel::ConnectionResult<SqliteConn> {
    use diesel::Connection as _;
    let conn = SqliteConnection::establish(path)?;
    let mut conn = SqliteConn::with_runtime(
        conn,
        SqliteRunner {
            inline: true,
            ..SqliteRunner::default()
        },
    );
    sqlite_pragmas(&mut conn).await?;
    Ok(conn)
}

/// Durable and concurrent SQLite: WAL with full fsync on commit, a busy
/// timeout so writers queue for the lock, and enforced foreign keys.
async fn establish_sqlite(path: String) -> diesel::ConnectionResult<PooledSqlite> {
    use diesel::Connection as _;
    let mut runner = SqliteRunner::default();
    let busy = runner.busy.clone();
    let conn = runner
        .spawn_blocking(move || SqliteConnection::establish(&path))
        .await
        .map_err(|error| diesel::ConnectionError::BadConnection(error.to_string()))??;
    let mut conn = SqliteConn::with_runtime(conn, runner);
    sqlite_pragmas(&mut conn).await?;
    Ok(PooledSqlite { conn, busy })
}

/// `temp_store = MEMORY`: every unit of a group commit runs in a savepoint,
/// and SQLite journals the pages a savepoint changes in a temporary file
/// unless told to keep them in memory; the file's writes cost the committer
/// more than its statements did. A sub-journal never outlives its
/// transaction, so memory holds it for a batch at most. For
/// `wal_autocheckpoint` see [`SQLITE_WAL_AUTOCHECKPOINT_PAGES`].
/// `recursive_triggers = ON`: a REPLACE's implicit delete then fires the
/// append-only ledger's DELETE triggers too.
async fn sqlite_pragmas(conn: &mut SqliteConn) -> diesel::ConnectionResult<()> {
    let pragmas = format!(
        "PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}; PRAGMA journal_mode = WAL; \
         PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; \
         PRAGMA recursive_triggers = ON; PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES};"
    );
    conn.batch_execute(&pragmas)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)
}

/// A pooled SQLite connection, with the count of its statements still
/// running.
pub struct PooledSqlite {
    conn: SqliteConn,
    busy: Arc<AtomicUsize>,
}

impl PooledSqlite {
    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }
}

impl Deref for PooledSqlite {
    type Target = SqliteConn;

    fn deref(&self) -> &SqliteConn {
        &self.conn
    }
}

impl DerefMut for PooledSqlite {
    fn deref_mut(&mut self) -> &mut SqliteConn {
        &mut self.conn
    }
}

/// A SQLite connection checked out of the pool.
///
/// A caller may give up on a statement mid-flight: a client that hangs up
/// drops its request's future, a readiness check drops its ping at its
/// deadline. The statement still runs on the blocking pool and holds the
/// connection; one of a write transaction may go on to take SQLite's write
/// lock (`BEGIN IMMEDIATE` waits for it) and keep it. Such a connection is
/// not handed back to the pool, where it would hold the lock while idle
/// and where diesel-async's checks panic on a connection still shared:
/// it is detached, and closes (rolling back whatever it began) when its
/// last statement ends.
pub struct SqliteCheckout(Option<Object<SqliteManager>>);

impl SqliteCheckout {
    pub(super) fn new(object: Object<SqliteManager>) -> SqliteCheckout {
        SqliteCheckout(Some(object))
    }
}

impl Deref for SqliteCheckout {
    type Target = SqliteConn;

    fn deref(&self) -> &SqliteConn {
        // Present until dropped.
        match &self.0 {
            Some(object) => object,
            None => unreachable!("a checkout holds its connection until dropped"),
        }
    }
}

impl DerefMut for SqliteCheckout {
    fn deref_mut(&mut self) -> &mut SqliteConn {
        match &mut self.0 {
            Some(object) => object,
            None => unreachable!("a checkout holds its connection until dropped"),
        }
    }
}

impl Drop for SqliteCheckout {
    fn drop(&mut self) {
        let Some(mut object) = self.0.take() else {
            return;
        };
        if object.busy() || std::thread::panicking() || broken(&mut object.conn) {
            drop(Object::take(object));
        }
    }
}

/// Whether the connection was left inside a transaction, or its lock was
/// poisoned by a statement that panicked (diesel-async's check panics on
/// that). Only the holder starts statements, so a connection not
/// [`PooledSqlite::busy`] stays so, and diesel-async may take it
/// exclusively.
fn broken(conn: &mut SqliteConn) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        PoolableConnection::is_broken(conn)
    }))
    .unwrap_or(true)
}

/// The pool's keeper of SQLite connections: opens them, and takes one back
/// only if nothing still runs on it and it holds no transaction (see
/// [`SqliteCheckout`], which detaches such a connection before it gets
/// here).
pub struct SqliteManager {
    pub(super) path: String,
}

impl Manager for SqliteManager {
    type Type = PooledSqlite;
    type Error = diesel::ConnectionError;

    async fn create(&self) -> Result<PooledSqlite, diesel::ConnectionError> {
        establish_sqlite(self.path.clone()).await
    }

    async fn recycle(
        &self,
        pooled: &mut PooledSqlite,
        _: &Metrics,
    ) -> RecycleResult<diesel::ConnectionError> {
        if pooled.busy() {
            return Err(RecycleError::message("a statement still runs on it"));
        }
        if broken(&mut pooled.conn) {
            return Err(RecycleError::message(
                "connection returned inside a transaction",
            ));
        }
        Ok(())
    }
}
