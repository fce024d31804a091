//! Embedded migrations, one tree per backend under identical names.

use diesel::connection::SimpleConnection;
use diesel::migration::MigrationVersion;
use diesel::pg::Pg;
use diesel::{Connection, SqliteConnection};
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::AsyncPgConnection;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

use crate::db::DatabaseUrl;
use crate::error::{StoreError, StoreResult};

pub const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../migrations/sqlite");
pub const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../migrations/postgres");

/// The advisory lock PostgreSQL migrations run under ("tern" in ASCII).
const MIGRATION_LOCK: i64 = 0x7465_726e;

/// Applies every pending migration and returns the versions applied.
///
/// Runs on a blocking thread: the harness is synchronous, and on PostgreSQL
/// it drives the async connection through `AsyncConnectionWrapper`.
pub async fn run_pending(url: &str) -> StoreResult<Vec<String>> {
    let parsed = DatabaseUrl::parse(url)?;
    tokio::task::spawn_blocking(move || match parsed {
        DatabaseUrl::Sqlite(path) => {
            crate::db::ensure_parent_dir(&path)?;
            let mut conn = SqliteConnection::establish(&path)?;
            // The operator commands migrate first, while a server may be
            // writing: without a busy timeout, the migration table's check
            // fails at once with "database is locked" instead of waiting.
            conn.batch_execute(&format!(
                "PRAGMA busy_timeout = {};",
                crate::db::SQLITE_BUSY_TIMEOUT_MS
            ))?;
            apply(&mut conn, SQLITE_MIGRATIONS)
        }
        DatabaseUrl::Postgres(url) => {
            let mut conn: AsyncConnectionWrapper<AsyncPgConnection> =
                AsyncConnectionWrapper::establish(&url)?;
            // Several nodes starting at once on one database: one migrates,
            // the others wait for it and then find nothing pending. The
            // lock is the session's, released when the connection closes.
            conn.batch_execute(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))?;
            let applied = apply::<Pg, _>(&mut conn, POSTGRES_MIGRATIONS);
            conn.batch_execute(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))?;
            applied
        }
    })
    .await
    .map_err(|error| StoreError::Migration(error.to_string()))?
}

fn apply<DB: diesel::backend::Backend, C: MigrationHarness<DB>>(
    conn: &mut C,
    migrations: EmbeddedMigrations,
) -> StoreResult<Vec<String>> {
    let applied: Vec<MigrationVersion<'_>> = conn
        .run_pending_migrations(migrations)
        .map_err(|error| StoreError::Migration(error.to_string()))?;
    Ok(applied.iter().map(ToString::to_string).collect())
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_missing_data_folder_is_created() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("data").join("nested").join("tern.db");
        let url = format!("sqlite://{}", path.display());
        let applied = super::run_pending(&url)
            .await
            .expect("migrations run on a fresh folder");
        assert!(!applied.is_empty());
        assert!(path.is_file());
    }
}
