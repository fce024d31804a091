//! Reads of many statements that must agree with each other.
//!
//! Outside a transaction every statement sees the database as of its own
//! start, so a read made of several statements (a head, then pages of rows)
//! can mix states from before and after a commit that landed between them:
//! a sound chain or ledger then looks broken. These reads run in one
//! read-only snapshot instead: REPEATABLE READ on PostgreSQL, a deferred
//! transaction on SQLite (which keeps the snapshot of its first read and,
//! reading only, never takes the write lock, so writers are not held up).

use diesel::connection::{AnsiTransactionManager, TransactionManager as _};
use diesel_async::SimpleAsyncConnection;

use crate::db::{Conn, Tx};
use crate::{dispatch, StoreResult};

/// Starts a read-only snapshot on `tx`'s connection; end it with [`end`]
/// whatever the reads answered:
///
/// ```ignore
/// snapshot::begin(tx).await?;
/// let read = reads(tx).await;
/// snapshot::end(tx, read).await
/// ```
///
/// The caller must let the future finish: dropped midway, it would leave
/// the connection inside the transaction (see the stack notes on cancelled
/// transactions), so callers on a request path run it in a task of its own.
pub async fn begin(tx: &mut Tx<'_>) -> StoreResult<()> {
    match tx.parts() {
        // Through diesel's transaction manager, so that a connection left
        // inside the snapshot is known to be and is not pooled again.
        (Conn::Sqlite(conn), _) => {
            conn.spawn_blocking(|inner| {
                AnsiTransactionManager::begin_transaction_sql(inner, "BEGIN DEFERRED")
            })
            .await?;
        }
        (Conn::Pg(_), _) => {
            dispatch!(tx, conn => conn
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await)?;
        }
    }
    Ok(())
}

/// Ends the snapshot [`begin`] started, and answers what was read in it.
pub async fn end<T>(tx: &mut Tx<'_>, read: StoreResult<T>) -> StoreResult<T> {
    // Read only: nothing to keep.
    let ended = match tx.parts() {
        (Conn::Sqlite(conn), _) => {
            conn.spawn_blocking(AnsiTransactionManager::rollback_transaction)
                .await
        }
        (Conn::Pg(_), _) => dispatch!(tx, conn => conn.batch_execute("ROLLBACK").await),
    };
    let value = read?;
    ended?;
    Ok(value)
}
