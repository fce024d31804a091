//! Row structs. They never double as API bodies.

use chrono::NaiveDateTime;
use diesel::prelude::*;

use crate::ledger::Direction;
use crate::money::MinorUnits;
use crate::schema::{
    api_keys, audit_checkpoints, audit_events, audit_heads, card_transactions, card_wallet_tokens,
    cards, devices, email_tokens, idempotency_records, inbound_events, ledger_accounts,
    ledger_entries, ledger_transactions, mail_outbox, merchants, push_deliveries, push_dispatches,
    quotes, sessions, settlements, transfers, users, webhook_attempts, webhook_endpoints,
    webhook_events,
};
use crate::vocabulary::{
    AccountId, AccountKind, Asset, CardId, CardNetwork, CardStatus, CardTransactionKind,
    CardTransactionStatus, CardType, Decline, DeliveryStatus, DeviceId, DeviceStatus, DispatchId,
    EventId, EventSource, LedgerStatus, LegStatus, MerchantId, MerchantStatus, Network, Platform,
    Purpose, PushStatus, QuoteId, Reversal, SettlementKey, SettlementMethod, SettlementStatus,
    TransferId, TransferStatus, UserId, UserStatus, Wallet, WalletStatus, WalletTokenId,
    WalletTokenStatus,
};

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = merchants, treat_none_as_default_value = false)]
pub struct MerchantRow {
    pub id: MerchantId,
    pub organization_name: String,
    pub status: MerchantStatus,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = api_keys, treat_none_as_default_value = false)]
pub struct ApiKeyRow {
    pub id: String,
    pub merchant_id: MerchantId,
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
#[diesel(table_name = ledger_accounts, treat_none_as_default_value = false)]
pub struct LedgerAccountRow {
    pub id: AccountId,
    pub merchant_id: Option<MerchantId>,
    pub kind: AccountKind,
    pub currency: String,
    pub posted_debits_minor: MinorUnits,
    pub posted_credits_minor: MinorUnits,
    pub pending_debits_minor: MinorUnits,
    pub pending_credits_minor: MinorUnits,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

impl LedgerAccountRow {
    /// Posted credits - posted debits (buckets are never negative, so this
    /// cannot overflow).
    pub fn balance_minor(&self) -> MinorUnits {
        self.posted_credits_minor
            .saturating_sub(self.posted_debits_minor)
    }

    /// Balance - pending debits: what may still be held or spent. Never
    /// below zero on a funding account; a system account's may be as low
    /// as two full buckets, which saturates rather than wraps.
    pub fn available_minor(&self) -> MinorUnits {
        self.balance_minor()
            .saturating_sub(self.pending_debits_minor)
    }
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = ledger_transactions, treat_none_as_default_value = false)]
pub struct LedgerTransactionRow {
    pub id: String,
    pub status: LedgerStatus,
    pub merchant_id: Option<MerchantId>,
    pub settlement_key: Option<SettlementKey>,
    pub description: String,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    /// The hold this transaction resolves (posts or voids), if it does.
    pub pending_id: Option<String>,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = ledger_entries, treat_none_as_default_value = false)]
pub struct LedgerEntryRow {
    pub id: String,
    pub transaction_id: String,
    pub account_id: AccountId,
    pub direction: Direction,
    pub amount_minor: MinorUnits,
    pub currency: String,
    pub created_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_heads, treat_none_as_default_value = false)]
pub struct AuditHeadRow {
    pub merchant_id: MerchantId,
    pub seq: i64,
    pub hash: String,
    pub updated_at: NaiveDateTime,
}

/// Where verification of a merchant's audit chain stands (see
/// [`crate::audit::verify`]).
#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_checkpoints, treat_none_as_default_value = false)]
pub struct AuditCheckpointRow {
    pub merchant_id: MerchantId,
    /// The last event verified, and its hash.
    pub seq: i64,
    pub hash: String,
    /// The last event the rolling rescan re-verified in its current pass;
    /// 0 when the pass starts again at the first event.
    pub rescan_seq: i64,
    /// Bumped by every update, which names the version it read.
    pub version: i64,
    pub verified_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_events, treat_none_as_default_value = false)]
pub struct AuditEventRow {
    pub merchant_id: MerchantId,
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

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = settlements, treat_none_as_null = true, treat_none_as_default_value = false)]
pub struct SettlementRow {
    pub merchant_id: MerchantId,
    pub idempotency_key: SettlementKey,
    pub method: SettlementMethod,
    pub currency: String,
    pub amount_minor: MinorUnits,
    pub asset: Option<Asset>,
    pub source: String,
    pub destination: String,
    pub recipient_name: String,
    pub reference: Option<String>,
    pub status: SettlementStatus,
    pub attempt: i32,
    /// A provider call may have executed without its answer arriving: the
    /// next attempt inquires before sending again.
    pub outcome_unknown: bool,
    pub reversal: Reversal,
    pub next_attempt_at: Option<NaiveDateTime>,
    pub provider_id: Option<String>,
    pub stan: Option<String>,
    pub retrieval_reference_number: Option<String>,
    pub transaction_identifier: Option<String>,
    pub approval_code: Option<String>,
    pub action_code: Option<String>,
    pub failure_reason: Option<String>,
    pub client_secret: Option<String>,
    pub next_action_type: Option<String>,
    pub funding_transaction_id: Option<String>,
    pub ledger_transaction_id: Option<String>,
    pub request_id: String,
    /// The reversal's entry: a refund's reservation, or a push's return.
    pub reversal_transaction_id: Option<String>,
    pub version: i64,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    /// The transfer this settlement is a leg of, which hears of its moves.
    /// A leg's charge is on-session: it may wait for the payer's 3DS
    /// challenge instead of failing with `authentication_required`.
    pub transfer_id: Option<TransferId>,
}

/// What a new settlement is asked to do; everything a provider or a later
/// transition fills in starts empty.
#[derive(Clone, Debug)]
pub struct SettlementIntent {
    pub merchant_id: MerchantId,
    pub idempotency_key: SettlementKey,
    pub method: SettlementMethod,
    pub currency: String,
    pub amount_minor: MinorUnits,
    pub asset: Option<Asset>,
    pub source: String,
    pub destination: String,
    pub recipient_name: String,
    pub reference: Option<String>,
    pub request_id: String,
}

impl SettlementRow {
    /// Whether the payer is present to finish a challenge (decisions §5).
    pub fn on_session(&self) -> bool {
        self.transfer_id.is_some() && self.method == SettlementMethod::CardCharge
    }

    /// The first version of an intent: pending, no attempt, no provider data.
    pub fn pending(intent: SettlementIntent, now: NaiveDateTime) -> SettlementRow {
        SettlementRow {
            merchant_id: intent.merchant_id,
            idempotency_key: intent.idempotency_key,
            method: intent.method,
            currency: intent.currency,
            amount_minor: intent.amount_minor,
            asset: intent.asset,
            source: intent.source,
            destination: intent.destination,
            recipient_name: intent.recipient_name,
            reference: intent.reference,
            status: SettlementStatus::Pending,
            attempt: 0,
            outcome_unknown: false,
            reversal: Reversal::None,
            next_attempt_at: None,
            provider_id: None,
            stan: None,
            retrieval_reference_number: None,
            transaction_identifier: None,
            approval_code: None,
            action_code: None,
            failure_reason: None,
            client_secret: None,
            next_action_type: None,
            funding_transaction_id: None,
            ledger_transaction_id: None,
            request_id: intent.request_id,
            reversal_transaction_id: None,
            version: 1,
            created_at: now,
            updated_at: now,
            transfer_id: None,
        }
    }
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = idempotency_records, treat_none_as_default_value = false)]
pub struct IdempotencyRow {
    pub merchant_id: MerchantId,
    pub scope: String,
    pub idempotency_key: String,
    pub request_sha256: String,
    pub state: String,
    pub response_status: Option<i32>,
    pub response_body: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = inbound_events, treat_none_as_default_value = false)]
pub struct InboundEventRow {
    pub provider: String,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    pub request_id: String,
    pub received_at: NaiveDateTime,
    pub processed_at: Option<NaiveDateTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = quotes, treat_none_as_default_value = false)]
pub struct QuoteRow {
    /// `qt_` + a UUID v7: opaque and time-sortable.
    pub id: QuoteId,
    pub merchant_id: MerchantId,
    pub send_currency: String,
    pub send_amount_minor: MinorUnits,
    pub receive_asset: Asset,
    pub receive_network: Network,
    /// Send currency -> receive asset, as the exact decimal it was priced with.
    pub rate: String,
    pub platform_fee_minor: MinorUnits,
    pub network_fee_minor: MinorUnits,
    /// Six decimals of the asset.
    pub receive_amount_minor: MinorUnits,
    pub request_id: String,
    pub created_at: NaiveDateTime,
    pub expires_at: NaiveDateTime,
}

impl QuoteRow {
    /// A quote is usable strictly before `expires_at`; from then on reads
    /// and transfers answer 410, and the row stays for audit.
    pub fn is_expired_at(&self, now: NaiveDateTime) -> bool {
        now >= self.expires_at
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = transfers, treat_none_as_null = true, treat_none_as_default_value = false)]
pub struct TransferRow {
    /// `tr_` + a UUID v7: opaque and time-sortable.
    pub id: TransferId,
    pub merchant_id: MerchantId,
    pub idempotency_key: String,
    pub flow: String,
    pub quote_id: QuoteId,
    pub card_pm: String,
    pub wallet: String,
    pub send_currency: String,
    pub send_amount_minor: MinorUnits,
    pub receive_asset: Asset,
    pub receive_network: Network,
    /// Six decimals of the asset.
    pub receive_amount_minor: MinorUnits,
    pub rate: String,
    pub platform_fee_minor: MinorUnits,
    pub network_fee_minor: MinorUnits,
    pub status: TransferStatus,
    /// Settlement key of leg 1 (card_charge), chosen at creation.
    pub leg1_key: SettlementKey,
    pub leg1_status: LegStatus,
    pub leg1_client_secret: Option<String>,
    pub leg1_next_action_type: Option<String>,
    /// Settlement key of leg 2 (on_chain), chosen at creation.
    pub leg2_key: SettlementKey,
    pub leg2_status: LegStatus,
    pub failure_reason: Option<String>,
    pub conversion_transaction_id: Option<String>,
    pub compensation_attempt: i32,
    pub next_attempt_at: Option<NaiveDateTime>,
    pub alert: Option<String>,
    pub alert_acknowledged_at: Option<NaiveDateTime>,
    pub request_id: String,
    pub version: i64,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = webhook_endpoints, treat_none_as_default_value = false)]
pub struct WebhookEndpointRow {
    pub merchant_id: MerchantId,
    pub url: String,
    /// The signing secret as the merchant gave it.
    pub secret: String,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = webhook_events, treat_none_as_default_value = false)]
pub struct WebhookEventRow {
    /// `evt_` + a UUID v7; the `webhook-id` of every attempt.
    pub id: EventId,
    pub merchant_id: MerchantId,
    pub transfer_id: TransferId,
    /// Orders the transfer's events: the rank of its status in the saga.
    pub seq: i32,
    /// `transfer.<status>`.
    pub event_type: String,
    /// The exact body delivered and signed.
    pub payload: String,
    /// X-Request-ID of the request that started the transfer.
    pub request_id: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub round: i32,
    pub next_attempt_at: Option<NaiveDateTime>,
    pub last_attempt_at: Option<NaiveDateTime>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub delivered_at: Option<NaiveDateTime>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

/// What an attempt changes of its event: the delivery columns only, so the
/// payload is not written again on every attempt.
#[derive(Clone, Debug, PartialEq, Eq, AsChangeset)]
#[diesel(table_name = webhook_events, treat_none_as_null = true)]
pub struct WebhookDeliveryChange {
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub next_attempt_at: Option<NaiveDateTime>,
    pub last_attempt_at: Option<NaiveDateTime>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub delivered_at: Option<NaiveDateTime>,
    pub updated_at: NaiveDateTime,
}

impl From<&WebhookEventRow> for WebhookDeliveryChange {
    fn from(event: &WebhookEventRow) -> Self {
        WebhookDeliveryChange {
            status: event.status,
            attempts: event.attempts,
            next_attempt_at: event.next_attempt_at,
            last_attempt_at: event.last_attempt_at,
            last_status_code: event.last_status_code,
            last_error: event.last_error.clone(),
            delivered_at: event.delivered_at,
            updated_at: event.updated_at,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = webhook_attempts, treat_none_as_default_value = false)]
pub struct WebhookAttemptRow {
    pub event_id: EventId,
    pub attempt: i32,
    pub round: i32,
    pub attempted_at: NaiveDateTime,
    /// The receiver's status, when it answered.
    pub status_code: Option<i32>,
    /// Why the attempt failed, when it did: a refusal, timeout or non-2xx.
    pub error: Option<String>,
    pub duration_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = users, treat_none_as_default_value = false)]
pub struct UserRow {
    pub id: UserId,
    pub merchant_id: MerchantId,
    /// Trimmed and lowercased.
    pub email: String,
    pub name: String,
    /// argon2id PHC string.
    pub password_hash: String,
    pub status: UserStatus,
    pub email_verified_at: Option<NaiveDateTime>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = sessions, treat_none_as_default_value = false)]
pub struct SessionRow {
    pub id: String,
    /// Hex SHA-256 of the cookie token; the token itself is never stored.
    pub token_sha256: String,
    pub user_id: UserId,
    pub created_at: NaiveDateTime,
    pub expires_at: NaiveDateTime,
    pub revoked_at: Option<NaiveDateTime>,
    /// Last use, written at most once per resolution (see the session
    /// store), so it may lag the real last use by that much.
    pub last_seen_at: NaiveDateTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = email_tokens, treat_none_as_default_value = false)]
pub struct EmailTokenRow {
    /// Hex SHA-256 of the mailed token.
    pub token_sha256: String,
    pub user_id: UserId,
    pub purpose: Purpose,
    pub created_at: NaiveDateTime,
    pub expires_at: NaiveDateTime,
    pub used_at: Option<NaiveDateTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = devices, treat_none_as_default_value = false)]
pub struct DeviceRow {
    /// `dev_` + a UUID v7 (time-sortable).
    pub id: DeviceId,
    pub merchant_id: MerchantId,
    pub user_id: UserId,
    pub platform: Platform,
    pub token: String,
    /// Hex SHA-256 of `token`; what uniqueness and lookups use.
    pub token_sha256: String,
    pub status: DeviceStatus,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub revoked_at: Option<NaiveDateTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = push_dispatches, treat_none_as_default_value = false)]
pub struct PushDispatchRow {
    /// `psh_` + a UUID v7.
    pub id: DispatchId,
    pub merchant_id: MerchantId,
    pub user_id: UserId,
    pub title: String,
    pub body: String,
    /// A JSON object as text.
    pub data: Option<String>,
    pub request_id: String,
    pub created_at: NaiveDateTime,
    /// SHA-256 of what the request's signature covers (timestamp and
    /// body): a replay of the same signed request finds this dispatch.
    pub replay_sha256: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = push_deliveries, treat_none_as_default_value = false)]
pub struct PushDeliveryRow {
    pub dispatch_id: DispatchId,
    pub device_id: DeviceId,
    pub status: PushStatus,
    pub attempts: i32,
    pub last_error: Option<String>,
    /// The gateway's id of the message, once delivered.
    pub provider_message_id: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub delivered_at: Option<NaiveDateTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable, AsChangeset)]
// `treat_none_as_null`: an update writes every column, so a limit or a
// replacement link set to `None` is cleared, not left as it was.
#[diesel(table_name = cards, treat_none_as_default_value = false, treat_none_as_null = true)]
pub struct CardRow {
    /// `card_` + a UUID v7 (time-sortable).
    pub id: CardId,
    pub merchant_id: MerchantId,
    pub user_id: UserId,
    pub program_id: String,
    pub card_type: CardType,
    /// `issuing`, `active`, `frozen`, `blocked` or `closed`.
    pub status: CardStatus,
    pub network: CardNetwork,
    pub currency: String,
    pub cardholder: String,
    pub display_name: Option<String>,
    pub card_art: String,
    pub theme: String,
    pub provider_card_id: Option<String>,
    pub last_four: Option<String>,
    pub expiry_month: Option<i32>,
    pub expiry_year: Option<i32>,
    pub wallet_status: WalletStatus,
    #[diesel(embed)]
    pub limits: CardLimits,
    pub replaces_card_id: Option<CardId>,
    pub replaces_status: Option<CardStatus>,
    pub replaced_by_card_id: Option<CardId>,
    pub request_id: String,
    pub version: i64,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub closed_at: Option<NaiveDateTime>,
    /// The amount limits the merchant set, by column name, comma-separated;
    /// the others follow the program's defaults (decisions §10).
    pub limits_set: String,
}

/// A card's controls (decisions §10): amount limits in minor units (`None`
/// is no limit) and the channels it may be used on. The card's machine
/// decides with them; the card's row stores them as its own columns.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Queryable, Selectable, Insertable, AsChangeset,
)]
#[diesel(table_name = cards, treat_none_as_default_value = false, treat_none_as_null = true)]
pub struct CardLimits {
    pub per_transaction_minor: Option<MinorUnits>,
    pub daily_spend_minor: Option<MinorUnits>,
    pub monthly_spend_minor: Option<MinorUnits>,
    pub atm_daily_minor: Option<MinorUnits>,
    pub online_enabled: bool,
    pub international_enabled: bool,
    pub atm_enabled: bool,
}

impl CardLimits {
    /// No amount limit, every channel on.
    pub const OPEN: CardLimits = CardLimits {
        per_transaction_minor: None,
        daily_spend_minor: None,
        monthly_spend_minor: None,
        atm_daily_minor: None,
        online_enabled: true,
        international_enabled: true,
        atm_enabled: true,
    };
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = card_transactions, treat_none_as_default_value = false)]
pub struct CardTransactionRow {
    /// `ctx_` + a UUID v7.
    pub id: String,
    pub card_id: CardId,
    pub merchant_id: MerchantId,
    pub provider_event_id: String,
    pub authorization_id: String,
    pub kind: CardTransactionKind,
    pub status: CardTransactionStatus,
    pub amount_minor: MinorUnits,
    pub currency: String,
    pub merchant_name: String,
    pub mcc: String,
    /// A [`crate::vocabulary::Channel`] code for an authorization and what releases or clears
    /// it; empty for a refund, which names none.
    pub channel: String,
    pub country: String,
    pub decline_reason: Option<Decline>,
    pub ledger_transaction_id: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    /// What an open authorization still holds (its amount less what partial
    /// reversals released); 0 once it ended, and for every other kind.
    pub hold_minor: MinorUnits,
    /// Whose id `provider_event_id` is. Ids are unique per source, so no
    /// inbound id can take one Tern makes.
    pub event_source: EventSource,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = card_wallet_tokens, treat_none_as_default_value = false)]
pub struct CardWalletTokenRow {
    /// `wtk_` + a UUID v7; also the issuer's idempotency key.
    pub id: WalletTokenId,
    pub card_id: CardId,
    pub merchant_id: MerchantId,
    pub wallet: Wallet,
    pub status: WalletTokenStatus,
    pub device_id: Option<String>,
    pub provider_token_id: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = mail_outbox, treat_none_as_default_value = false)]
pub struct MailOutboxRow {
    /// `mail_` + a UUID v7.
    pub id: String,
    pub recipient: String,
    pub subject: String,
    /// The plain-text body; emptied when the row gives up.
    pub body: String,
    pub attempts: i32,
    pub due_at: NaiveDateTime,
    pub claimed_until: Option<NaiveDateTime>,
    pub claim_token: Option<String>,
    pub last_error: Option<String>,
    pub created_at: NaiveDateTime,
    pub failed_at: Option<NaiveDateTime>,
}
