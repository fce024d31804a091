//! Tern's persistence: tables, rows, and the one store that runs every query
//! on SQLite and on PostgreSQL. Knows nothing of HTTP or actors.

// The non-test build of this crate still denies string slices.
#![cfg_attr(test, allow(clippy::string_slice, reason = "a test may panic"))]

pub mod audit;
pub mod balances;
pub mod commit;
pub mod db;
pub mod deferred;
pub mod error;
pub mod idempotency;
pub mod known;
pub mod ledger;
pub mod migrate;
pub mod models;
pub mod money;
pub mod plan;
pub mod schema;
pub mod snapshot;
pub mod store;
#[cfg(feature = "testing")]
#[allow(
    clippy::expect_used,
    clippy::panic,
    clippy::string_slice,
    reason = "test support only: a test database that cannot be set up is a failed test"
)]
pub mod testing;
pub mod types;
pub mod vocabulary;

pub use db::{Backend, Conn, Db, Pooled, Tx};
pub use diesel::result::{DatabaseErrorKind, Error as DieselError};
pub use error::{Persistence, Refusal, StoreError, StoreResult};
pub use plan::{Fence, Plan, PlanError, RowWrite, Written};

/// The target of spans recorded only for traces (debug level, so that logs
/// leave them out and, with no trace exporter, nothing records them).
pub const TRACE_TARGET: &str = "tern::trace";

/// Items the exported macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use diesel;
    pub use diesel_async::AsyncConnection;
    pub use serde;
    pub use uuid;
}
