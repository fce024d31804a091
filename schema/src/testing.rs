//! A database of its own for each test, on the backend the environment
//! chooses: a SQLite file in a temporary directory, or, when
//! `TERN_TEST_DATABASE_URL` names a PostgreSQL server, a fresh database on it
//! that is dropped when the test ends. Tests therefore run in parallel.
//!
//! Test support only: compiled with the crate's `testing` feature, which
//! only the workspace's dev-dependencies enable.

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

/// The variable that switches the test suite to PostgreSQL. Its value is an
/// administrative URL (`postgres://postgres@127.0.0.1:5432/postgres`).
pub const TEST_DATABASE_URL_VAR: &str = "TERN_TEST_DATABASE_URL";

pub struct TestDatabase {
    url: String,
    postgres: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDatabase {
    /// Creates an empty database (no migrations applied).
    pub async fn create() -> TestDatabase {
        match std::env::var(TEST_DATABASE_URL_VAR)
            .ok()
            .filter(|url| !url.is_empty())
        {
            Some(admin_url) => Self::create_postgres(admin_url).await,
            None => Self::create_sqlite(),
        }
    }

    /// An empty SQLite database, whatever the environment says.
    pub fn create_sqlite() -> TestDatabase {
        let dir = tempfile::tempdir().expect("temporary directory for a test database");
        let url = format!("sqlite://{}", dir.path().join("tern.db").display());
        TestDatabase {
            url,
            postgres: None,
            _dir: Some(dir),
        }
    }

    /// An empty PostgreSQL database when `TERN_TEST_DATABASE_URL` names a
    /// server, for tests that compare the backends.
    pub async fn create_postgres_if_configured() -> Option<TestDatabase> {
        let admin_url = std::env::var(TEST_DATABASE_URL_VAR)
            .ok()
            .filter(|url| !url.is_empty())?;
        Some(Self::create_postgres(admin_url).await)
    }

    async fn create_postgres(admin_url: String) -> TestDatabase {
        let name = format!("tern_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = AsyncPgConnection::establish(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("{TEST_DATABASE_URL_VAR} is not reachable: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let url = with_database(&admin_url, &name);
        TestDatabase {
            url,
            postgres: Some((admin_url, name)),
            _dir: None,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some((admin_url, name)) = self.postgres.take() else {
            return;
        };
        // Drop may run inside a runtime, which cannot be blocked on: use a
        // thread with a runtime of its own. FORCE ends connections a pool
        // still holds.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut admin = AsyncPgConnection::establish(&admin_url).await.ok()?;
                admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("warning: test database {} was not dropped", self.url);
        }
    }
}

/// Replaces the database name of a PostgreSQL URL, keeping any query string.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{root}/{name}?{query}"),
        None => format!("{root}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_name_is_replaced() {
        assert_eq!(
            with_database("postgres://p@h:5432/postgres", "x"),
            "postgres://p@h:5432/x"
        );
        assert_eq!(
            with_database("postgres://p@h:5432", "x"),
            "postgres://p@h:5432/x"
        );
        assert_eq!(
            with_database("postgres://p@h/db?sslmode=disable", "x"),
            "postgres://p@h/x?sslmode=disable"
        );
    }
}
