//! SQLite connections: where their statements run, how they are opened, and
//! how the pool takes one back.

use deadpool::managed::{Manager, Metrics, RecycleError, RecycleResult};
use diesel::connection::{AnsiTransactionManager, TransactionManager as _};
use diesel::SqliteConnection;
use diesel_async::sync_connection_wrapper::{SpawnBlocking, SyncConnectionWrapper};
use diesel_async::{AsyncConnection, SimpleAsyncConnection};
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
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteRunner {
    inline: bool,
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
        tokio::task::spawn_blocking(task)
            .map_err(|error| Box::new(error) as Box<dyn std::error::Error + Send + Sync>)
            .boxed()
    }

    fn get_runtime() -> Self {
        SqliteRunner { inline: false }
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
    let mut conn = SqliteConn::with_runtime(conn, SqliteRunner { inline: true });
    sqlite_pragmas(&mut conn).await?;
    Ok(conn)
}

/// Durable and concurrent SQLite: WAL with full fsync on commit, a busy
/// timeout so writers queue for the lock, and enforced foreign keys.
async fn establish_sqlite(path: String) -> diesel::ConnectionResult<SqliteConn> {
    let mut conn = SqliteConn::establish(&path).await?;
    sqlite_pragmas(&mut conn).await?;
    Ok(conn)
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

/// The pool's keeper of SQLite connections.
///
/// diesel-async's own manager asks a returning connection whether it was
/// left inside a transaction by taking the connection exclusively, and
/// panics when it cannot: a future dropped while its statement ran (a
/// client that hung up, a timed-out readiness check) leaves that statement
/// running on the blocking pool, holding the connection. The next request
/// to check the connection out then panicked with a 500 in place of its
/// answer. This keeper asks through the connection's own lock instead, so
/// it waits for the orphaned statement to finish, and then drops the
/// connection if the statement left a transaction open.
pub struct SqliteManager {
    pub(super) path: String,
}

impl Manager for SqliteManager {
    type Type = SqliteConn;
    type Error = diesel::ConnectionError;

    async fn create(&self) -> Result<SqliteConn, diesel::ConnectionError> {
        establish_sqlite(self.path.clone()).await
    }

    async fn recycle(
        &self,
        conn: &mut SqliteConn,
        _: &Metrics,
    ) -> RecycleResult<diesel::ConnectionError> {
        let left_open = conn
            .spawn_blocking(|inner| {
                Ok(AnsiTransactionManager::is_broken_transaction_manager(inner))
            })
            .await;
        match left_open {
            Ok(false) => Ok(()),
            Ok(true) => Err(RecycleError::message(
                "connection returned inside a transaction",
            )),
            Err(error) => Err(RecycleError::message(error.to_string())),
        }
    }
}
