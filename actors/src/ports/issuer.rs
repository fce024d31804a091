//! The card issuer: issues cards, mirrors their status, reveals their
//! secrets on demand, and provisions mobile-wallet tokens. Tern decides
//! authorizations itself (the card's actor); the issuer is where the card
//! number lives, so Tern never stores a PAN or CVV.

use async_trait::async_trait;
use chrono::NaiveDateTime;
use tern_schema::vocabulary::{CardId, UserId};

use super::ProviderError;

pub use tern_schema::vocabulary::{CardNetwork, CardType, Wallet};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRequest {
    /// The provider idempotency key: Tern's card id, the same on every retry.
    pub idempotency_key: String,
    /// Tern's card id, sent as metadata; the issuer's webhooks name it.
    pub card_id: CardId,
    pub user_id: UserId,
    pub program_id: String,
    pub network: CardNetwork,
    pub card_type: CardType,
    pub currency: String,
    pub cardholder: String,
}

/// What the issuer answers for an issued card. Never the PAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCard {
    /// The issuer's own reference for the card.
    pub provider_card_id: String,
    pub last_four: String,
    pub expiry_month: i32,
    pub expiry_year: i32,
}

tern_schema::text_enum! {
    /// The card status the issuer mirrors.
    pub enum IssuerStatus {
        Active = "active",
        Frozen = "frozen",
        Blocked = "blocked",
        Closed = "closed",
    }
}

/// The card's secrets, fetched for one reveal and never stored by Tern.
/// `Debug` is written by hand so they cannot reach a log line.
#[derive(Clone, PartialEq, Eq)]
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedRequest {
    pub provider_card_id: String,
    /// The browser origin the iframe may be framed by (`https://app.example`).
    pub target_origin: String,
    pub expires_at: NaiveDateTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletRequest {
    /// The provider idempotency key: Tern's token id.
    pub idempotency_key: String,
    pub provider_card_id: String,
    /// Tern's card id, echoed in `wallet_token.updated` webhooks.
    pub card_id: CardId,
    pub wallet: Wallet,
    pub device_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalletOutcome {
    /// Accepted; the final status arrives by `wallet_token.updated` webhook.
    Requested { provider_token_id: String },
    /// This issuer cannot provision into that wallet (Tern answers 501).
    NotSupported { reason: String },
}

#[async_trait]
pub trait CardIssuer: Send + Sync {
    /// Issues and activates a card. A repeated key answers the card issued
    /// the first time, without issuing another.
    async fn issue(&self, request: &IssueRequest) -> Result<IssuedCard, ProviderError>;

    /// The card issued under `idempotency_key`, if any: what recovery asks
    /// after an unknown outcome.
    async fn find_issued(&self, idempotency_key: &str)
        -> Result<Option<IssuedCard>, ProviderError>;

    /// Sets the card's status at the issuer. Setting the status it already
    /// has succeeds, so a retry is always safe.
    async fn set_status(
        &self,
        provider_card_id: &str,
        status: IssuerStatus,
    ) -> Result<(), ProviderError>;

    /// The card's PAN, CVV and expiry, for one time-boxed reveal.
    async fn secrets(&self, provider_card_id: &str) -> Result<CardSecrets, ProviderError>;

    /// A provider-signed iframe URL showing the card's details, valid until
    /// `expires_at` and only when framed by `target_origin`.
    async fn embed_url(&self, request: &EmbedRequest) -> Result<String, ProviderError>;

    async fn provision_wallet(
        &self,
        request: &WalletRequest,
    ) -> Result<WalletOutcome, ProviderError>;
}
