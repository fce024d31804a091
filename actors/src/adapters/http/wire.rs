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

// ---- card issuer ----
//
// Card requests carry no settlement, so no metadata: Tern's card id travels
// in the body. Issuing and wallet provisioning carry the Idempotency-Key
// header (Tern's card id, Tern's wallet token id); status changes are
// idempotent by nature and carry none. Path segments are percent-encoded.

pub const PATH_ISSUER_CARDS: &str = "/issuer/cards";
/// Error code of a wallet provisioning the issuer does not offer.
pub const CODE_WALLET_NOT_SUPPORTED: &str = "wallet_not_supported";

/// `/issuer/cards/by-key/{idempotency_key}`: the card issued under a key.
pub fn path_issued_by_key(key_segment: &str) -> String {
    format!("/issuer/cards/by-key/{key_segment}")
}

/// `/issuer/cards/{provider_card_id}/{action}`: `status`, `secrets`,
/// `embed` or `wallets`.
pub fn path_issuer_card(card_segment: &str, action: &str) -> String {
    format!("/issuer/cards/{card_segment}/{action}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueCardRequest {
    /// Tern's card id; the issuer's webhooks name it.
    pub card_id: String,
    pub user_id: String,
    pub program_id: String,
    /// `visa` or `mastercard`.
    pub network: String,
    /// `virtual` or `physical`.
    #[serde(rename = "type")]
    pub card_type: String,
    pub currency: String,
    pub cardholder: String,
}

/// An issued card as the issuer shows it: never the PAN or CVV.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedCard {
    /// The issuer's card id, `ic_...`.
    pub id: String,
    pub card_id: String,
    /// `active`, `frozen`, `blocked` or `closed`.
    pub status: String,
    pub network: String,
    pub last_four: String,
    pub expiry_month: i32,
    pub expiry_year: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardStatusRequest {
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardStatus {
    pub id: String,
    pub status: String,
}

/// `Debug` is written by hand so a PAN or CVV cannot reach a log line.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardSecrets {
    pub pan: String,
    pub cvv: String,
    pub expiry_month: i32,
    pub expiry_year: i32,
}

impl std::fmt::Debug for CardSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardSecrets")
            .field("pan", &"[redacted]")
            .field("cvv", &"[redacted]")
            .field("expiry_month", &self.expiry_month)
            .field("expiry_year", &self.expiry_year)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedUrlRequest {
    /// A browser origin, `scheme://host[:port]`, exactly as serialised.
    pub target_origin: String,
    /// Unix seconds.
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedUrl {
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalletTokenRequest {
    /// Tern's card id, echoed in `wallet_token.updated` webhooks.
    pub card_id: String,
    /// `apple_pay` or `google_pay`.
    pub wallet: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// Provisioning was accepted; the outcome arrives by webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalletToken {
    /// Always `requested`.
    pub status: String,
    pub provider_token_id: String,
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
    /// `payment_method`, `destination`, `wallet`, `user_id`, `card_id`,
    /// `settlement_key`, `operation`. Empty matches all.
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

/// Card-network events the control API plays against Tern: each is sent as
/// a signed webhook at once and Tern's answer is returned.
pub const PATH_CONTROL_AUTHORIZATIONS: &str = "/control/authorizations";
pub const PATH_CONTROL_CLEARINGS: &str = "/control/clearings";
pub const PATH_CONTROL_REFUNDS: &str = "/control/refunds";
pub const PATH_CONTROL_REVERSALS: &str = "/control/reversals";

/// A card swipe: sent to Tern as `authorization.request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationControl {
    /// Tern's card id.
    pub card_id: String,
    pub amount_minor: i64,
    pub currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcc: Option<String>,
    /// `online`, `pos` (the default) or `atm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// ISO 3166 alpha-2; `US` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
}

/// Sent to Tern as `authorization.clearing`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearingControl {
    pub authorization_id: String,
    pub card_id: String,
    /// The authorized amount when omitted and the simulator sent that
    /// authorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_minor: Option<i64>,
    pub currency: String,
}

/// Sent to Tern as `authorization.reversal` (decisions §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReversalControl {
    pub authorization_id: String,
    pub card_id: String,
    /// What the reversal releases; omitted, it releases the rest of the
    /// hold (the event then carries no amount).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_minor: Option<i64>,
}

/// A merchant refund to a card: sent to Tern as `refund.succeeded` whose
/// data carries `card_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardRefundControl {
    pub card_id: String,
    pub amount_minor: i64,
    pub currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<String>,
}

/// What Tern answered to one played event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardEventSent {
    pub event_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refund_id: Option<String>,
    /// Tern's HTTP status.
    pub status: u16,
    /// Tern's answer: its JSON, or its text as a string when not JSON.
    pub decision: serde_json::Value,
}
