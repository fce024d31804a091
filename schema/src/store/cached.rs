//! Prepared-statement caching for writes.
//!
//! diesel refuses to cache every UPDATE, and every INSERT with an `Option`
//! column, as a prepared statement: each execution is parsed and planned
//! again, which on PostgreSQL is an extra round trip per statement. Its cache
//! is keyed by the SQL text and bind types whenever a query has no static
//! id, so a statement whose text is fixed is safe to cache; [`Cached`] says
//! so. Use it only for statements whose SQL text takes a bounded number of
//! shapes (no IN lists of varying length, no literals), or the cache grows
//! with every new text.

use diesel::backend::Backend;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::QueryResult;

/// A statement of fixed SQL text, cached by that text.
#[derive(Debug, Clone, Copy)]
pub struct Cached<Q>(pub Q);

impl<Q> QueryId for Cached<Q> {
    // Keyed by SQL text: one Rust type may render several texts.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q, DB> QueryFragment<DB> for Cached<Q>
where
    DB: Backend,
    Q: QueryFragment<DB>,
{
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}
