//! The card's row as the machine and the audit trail see it: its status
//! and limits, its successor at the next version, and its audit records.

use chrono::NaiveDateTime;
use tern_schema::audit::AuditRecord;
use tern_schema::models::CardRow;
use tern_schema::plan::RowWrite;

use super::machine::{Limits, Status};
use super::messages::Origin;
use crate::runtime::version::next_version;

pub fn status_of(row: &CardRow) -> Status {
    // The column's CHECK admits only these; an unknown one is treated as
    // closed, the status that accepts nothing.
    Status::parse(&row.status).unwrap_or(Status::Closed)
}

pub fn limits_of(row: &CardRow) -> Limits {
    Limits {
        per_transaction_minor: row.per_transaction_minor,
        daily_spend_minor: row.daily_spend_minor,
        monthly_spend_minor: row.monthly_spend_minor,
        atm_daily_minor: row.atm_daily_minor,
        online_enabled: row.online_enabled,
        international_enabled: row.international_enabled,
        atm_enabled: row.atm_enabled,
    }
}

pub(super) fn with_limits(mut row: CardRow, limits: Limits) -> CardRow {
    row.per_transaction_minor = limits.per_transaction_minor;
    row.daily_spend_minor = limits.daily_spend_minor;
    row.monthly_spend_minor = limits.monthly_spend_minor;
    row.atm_daily_minor = limits.atm_daily_minor;
    row.online_enabled = limits.online_enabled;
    row.international_enabled = limits.international_enabled;
    row.atm_enabled = limits.atm_enabled;
    row
}

/// The row's successor: the same card at the next version.
pub(super) fn successor(row: &CardRow, now: NaiveDateTime) -> CardRow {
    CardRow {
        version: next_version(row.version),
        updated_at: now,
        ..row.clone()
    }
}

/// The card written whole over the version it was read at.
pub(super) fn moved(next: &CardRow, held: i64) -> RowWrite {
    RowWrite::Card {
        row: next.clone(),
        expected_version: held,
    }
}

pub(super) fn record(
    row: &CardRow,
    origin: &Origin,
    action: &'static str,
    data: serde_json::Value,
) -> AuditRecord {
    AuditRecord {
        merchant_id: row.merchant_id.clone(),
        actor: origin.actor.clone(),
        action,
        resource_type: "card",
        resource_id: row.id.clone(),
        request_id: origin.request_id.clone(),
        data,
    }
}
