//! Row structs. They never double as API bodies.

use chrono::NaiveDateTime;
use diesel::prelude::*;

use crate::schema::{api_keys, merchants};

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = merchants)]
pub struct MerchantRow {
    pub id: String,
    pub organization_name: String,
    pub status: String,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = api_keys)]
pub struct ApiKeyRow {
    pub id: String,
    pub merchant_id: String,
    pub prefix: String,
    /// Hex SHA-256 of the secret part; the secret itself is never stored.
    pub secret_sha256: String,
    pub name: Option<String>,
    /// Space-separated scope names.
    pub scopes: String,
    pub created_at: NaiveDateTime,
    pub last_used_at: Option<NaiveDateTime>,
    pub expires_at: Option<NaiveDateTime>,
    pub revoked_at: Option<NaiveDateTime>,
}
