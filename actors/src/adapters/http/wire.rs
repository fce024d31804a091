//! The provider HTTP protocol: paths, headers and JSON bodies. The adapters
//! speak it as clients; the simulator (`tern::sandbox`) serves it, so both
//! sides compile against one definition.
//!
//! Every executing request carries the `Idempotency-Key` header and
//! `metadata.settlement_key`. Errors are `{"error": {"code", "message"}}`
//! with a 4xx (the request is wrong: permanent) or 5xx (retry under the same
//! key) status. Lookups answer 404 with code `not_found` when the provider
//! never executed the key.

use serde::{Deserialize, Serialize};

pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
/// Query parameter of the lookup and inquiry endpoints.
pub const IDEMPOTENCY_KEY_QUERY: &str = "idempotency_key";
/// Error code of a lookup for a key the provider never executed.
pub const CODE_NOT_FOUND: &str = "not_found";
/// Error code of a key reused with different parameters.
pub const CODE_IDEMPOTENCY_CONFLICT: &str = "idempotency_key_reused";

pub const PATH_CHARGES: &str = "/acquirer/charges";
pub const PATH_CHARGE_LOOKUP: &str = "/acquirer/charges/lookup";
pub const PATH_REFUNDS: &str = "/acquirer/refunds";
pub const PATH_REFUND_LOOKUP: &str = "/acquirer/refunds/lookup";
pub const PATH_PUSHES: &str = "/card_push/pushes";
pub const PATH_PUSH_INQUIRY: &str = "/card_push/pushes/inquiry";
pub const PATH_REVERSALS: &str = "/card_push/reversals";
pub const PATH_REVERSAL_INQUIRY: &str = "/card_push/reversals/inquiry";

/// `/custodian/{network}/payouts`.
pub fn path_payouts(network: &str) -> String {
    format!("/custodian/{network}/payouts")
}

/// `/custodian/{network}/payouts/status`.
pub fn path_payout_status(network: &str) -> String {
    format!("/custodian/{network}/payouts/status")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub settlement_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

// ---- acquirer ----

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChargeRequest {
    pub amount_minor: i64,
    pub currency: String,
    pub payment_method: String,
    pub off_session: bool,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    Succeeded,
    RequiresAction,
    Declined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    #[serde(rename = "type")]
    pub kind: String,
    pub redirect_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    pub id: String,
    pub status: ChargeStatus,
    pub amount_minor: i64,
    pub currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<NextAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefundRequest {
    pub charge_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    Succeeded,
    Pending,
    Declined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    pub id: String,
    pub status: RefundStatus,
    pub charge_id: String,
    pub amount_minor: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
}

// ---- card push ----

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    pub amount_minor: i64,
    pub currency: String,
    pub destination: String,
    pub recipient_name: String,
    pub metadata: Metadata,
}

/// Card-push answers carry an ISO 8583 action code; `91` means "try again".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    pub action_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stan: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_reference_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReversalRequest {
    pub original_transaction_identifier: String,
    pub amount_minor: i64,
    pub currency: String,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReversalStatus {
    Approved,
    Pending,
    Declined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reversal {
    pub status: ReversalStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// ---- custodian ----

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayoutRequest {
    pub wallet: String,
    pub asset: String,
    pub amount_minor: i64,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayoutStatus {
    Confirmed,
    Pending,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payout {
    pub id: String,
    pub status: PayoutStatus,
    pub network: String,
    pub asset: String,
    pub amount_minor: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// ---- push gateway ----

pub const PATH_PUSH_MESSAGES: &str = "/push/messages";

/// One notification to one device. No settlement is involved, so it has
/// no metadata; its key is `push_{dispatch_id}_{device_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushMessageRequest {
    /// `ios` or `android`.
    pub platform: String,
    pub token: String,
    pub user_id: String,
    pub title: String,
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushMessageAccepted {
    pub id: String,
}

// ---- control (simulator only) ----

pub const PATH_FAULTS: &str = "/control/faults";
pub const PATH_EXECUTIONS: &str = "/control/executions";
/// The push messages the simulator received, filterable with `?user_id=`.
pub const PATH_RECEIVED_PUSHES: &str = "/control/pushes";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `acquirer`, `card_push`, `custodian`, `issuer` or `push`.
    pub target: String,
    /// Request fields that must all be equal for the fault to apply:
    /// `payment_method`, `destination`, `wallet`, `user_id`. Empty matches all.
    #[serde(default, rename = "match")]
    pub matches: std::collections::BTreeMap<String, String>,
    /// `decline`, `fail`, `transient`, `timeout_after_success`, `slow`,
    /// `reversal_pending`.
    pub mode: String,
    /// How many matching calls it applies to; `None` until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub key: String,
    pub target: String,
    pub operation: String,
    pub settlement_key: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionList {
    pub data: Vec<Execution>,
}

/// A push message as the simulator received it, once per key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceivedPush {
    pub key: String,
    pub platform: String,
    pub token: String,
    pub user_id: String,
    pub title: String,
    pub body: String,
    pub data: Option<serde_json::Value>,
    pub received_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceivedPushList {
    pub data: Vec<ReceivedPush>,
}
