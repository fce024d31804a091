//! The card's row as the machine and the audit trail see it: its status
//! and limits, and its audit records.

use tern_schema::audit::AuditRecord;
use tern_schema::models::CardRow;

use super::machine::{Limits, Status};
use super::messages::Origin;

pub fn status_of(row: &CardRow) -> Status {
    row.status
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
        resource_id: row.id.to_string(),
        request_id: origin.request_id.clone(),
        data,
    }
}
