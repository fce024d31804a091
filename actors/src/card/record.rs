//! The card's row as the machine and the audit trail see it: its status
//! (its limits are the row's own `limits`), and its audit records.

use tern_schema::audit::AuditRecord;
use tern_schema::models::CardRow;

use super::machine::Status;
use super::messages::Origin;

pub fn status_of(row: &CardRow) -> Status {
    row.status
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
