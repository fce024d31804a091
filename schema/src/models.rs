//! Row structs. They never double as API bodies.

use chrono::NaiveDateTime;
use diesel::prelude::*;

use crate::schema::{
    api_keys, audit_events, audit_heads, ledger_accounts, ledger_entries, ledger_transactions,
    merchants,
};

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

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = ledger_accounts)]
pub struct LedgerAccountRow {
    pub id: String,
    pub merchant_id: Option<String>,
    pub kind: String,
    pub currency: String,
    pub posted_debits_minor: i64,
    pub posted_credits_minor: i64,
    pub pending_debits_minor: i64,
    pub pending_credits_minor: i64,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

impl LedgerAccountRow {
    /// Posted credits - posted debits.
    pub fn balance_minor(&self) -> i64 {
        self.posted_credits_minor - self.posted_debits_minor
    }

    /// Balance - pending debits: what may still be held or spent.
    pub fn available_minor(&self) -> i64 {
        self.balance_minor() - self.pending_debits_minor
    }
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = ledger_transactions)]
pub struct LedgerTransactionRow {
    pub id: String,
    pub status: String,
    pub merchant_id: Option<String>,
    pub settlement_key: Option<String>,
    pub description: String,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = ledger_entries)]
pub struct LedgerEntryRow {
    pub id: String,
    pub transaction_id: String,
    pub account_id: String,
    pub direction: String,
    pub amount_minor: i64,
    pub currency: String,
    pub created_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_heads)]
pub struct AuditHeadRow {
    pub merchant_id: String,
    pub seq: i64,
    pub hash: String,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_events)]
pub struct AuditEventRow {
    pub merchant_id: String,
    pub seq: i64,
    pub id: String,
    pub occurred_at: NaiveDateTime,
    pub actor_type: String,
    pub actor_id: String,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub request_id: String,
    pub data: String,
    pub prev_hash: String,
    pub hash: String,
}
