//! What the card's actor is asked (commands), what it answers (replies)
//! and why it refuses (failures): the card's side of its message protocol.

use tern_schema::audit::AuditActor;
use tern_schema::models::{CardRow, CardWalletTokenRow};
use tern_schema::money::MinorUnits;
use tern_schema::vocabulary::{CardId, WalletTokenId};

use super::holds::Reversal;
use super::machine::{Channel, Decline, Limits, Operation, Refusal};
use super::wallet::Provisioning;
use crate::runtime::TimerFiring;

/// Who asked, for the audit record.
#[derive(Clone, Debug)]
pub struct Origin {
    pub actor: AuditActor,
    pub request_id: String,
}

impl Origin {
    pub(super) fn system(row: &CardRow) -> Origin {
        Origin {
            actor: AuditActor::System,
            request_id: row.request_id.clone(),
        }
    }
}

/// Changes to a card's limits; `None` leaves a field as it is, and
/// `Some(None)` removes an amount limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitsPatch {
    pub per_transaction_minor: Option<Option<MinorUnits>>,
    pub daily_spend_minor: Option<Option<MinorUnits>>,
    pub monthly_spend_minor: Option<Option<MinorUnits>>,
    pub atm_daily_minor: Option<Option<MinorUnits>>,
    pub online_enabled: Option<bool>,
    pub international_enabled: Option<bool>,
    pub atm_enabled: Option<bool>,
}

impl LimitsPatch {
    pub fn merged(&self, limits: Limits) -> Limits {
        Limits {
            per_transaction_minor: self
                .per_transaction_minor
                .unwrap_or(limits.per_transaction_minor),
            daily_spend_minor: self.daily_spend_minor.unwrap_or(limits.daily_spend_minor),
            monthly_spend_minor: self
                .monthly_spend_minor
                .unwrap_or(limits.monthly_spend_minor),
            atm_daily_minor: self.atm_daily_minor.unwrap_or(limits.atm_daily_minor),
            online_enabled: self.online_enabled.unwrap_or(limits.online_enabled),
            international_enabled: self
                .international_enabled
                .unwrap_or(limits.international_enabled),
            atm_enabled: self.atm_enabled.unwrap_or(limits.atm_enabled),
        }
    }
}

/// An `authorization.request` from the card provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationRequest {
    pub event_id: String,
    pub authorization_id: String,
    pub amount_minor: MinorUnits,
    pub currency: String,
    pub merchant: String,
    pub mcc: String,
    pub channel: Channel,
    pub country: String,
}

/// A refund from the card provider: money back onto the card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefundRequest {
    pub event_id: String,
    pub authorization_id: Option<String>,
    pub amount_minor: MinorUnits,
    pub currency: String,
    pub merchant: String,
    pub mcc: String,
}

pub enum CardCommand {
    /// The intent is written: issue the card (the POST that wrote it).
    Issue {
        origin: Origin,
    },
    /// Re-activated while issuing: finish or abandon the issue.
    Resume,
    /// Freeze, unfreeze or close.
    Change {
        operation: Operation,
        origin: Origin,
    },
    /// Block the card and issue a new one in its place.
    Replace {
        reason: Option<String>,
        new_card_id: CardId,
        origin: Origin,
    },
    Update {
        display_name: Option<Option<String>>,
        limits: LimitsPatch,
        origin: Origin,
    },
    ProvisionWallet {
        asked: Provisioning,
        origin: Origin,
    },
    /// A provisioning's intent is due: the issuer's answer was lost.
    FinishProvisioning {
        asked: Provisioning,
        firing: TimerFiring,
    },
    /// The issuer's `wallet_token.updated`.
    WalletUpdated {
        token_id: WalletTokenId,
        status: String,
    },
    Authorize(AuthorizationRequest),
    /// The issuer's `authorization.clearing`.
    Clear {
        event_id: String,
        authorization_id: String,
        amount_minor: Option<MinorUnits>,
    },
    Refund(RefundRequest),
    /// The issuer's `authorization.reversal`.
    Reverse(Reversal),
    Timer(TimerFiring),
    /// A status change's intent is due: finish it if the card is still
    /// where the change left it.
    FinishChange {
        operation: Operation,
        firing: TimerFiring,
    },
    /// An authorization's hold reached its lifetime.
    ExpireHold(TimerFiring),
}

impl CardCommand {
    /// The command's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            CardCommand::Issue { .. } => "issue",
            CardCommand::Resume => "resume",
            CardCommand::Change { .. } => "change",
            CardCommand::Replace { .. } => "replace",
            CardCommand::Update { .. } => "update",
            CardCommand::ProvisionWallet { .. } => "provision_wallet",
            CardCommand::FinishProvisioning { .. } => "finish_provisioning",
            CardCommand::WalletUpdated { .. } => "wallet_updated",
            CardCommand::Authorize(_) => "authorize",
            CardCommand::Clear { .. } => "clear",
            CardCommand::Refund(_) => "refund",
            CardCommand::Reverse(_) => "reverse",
            CardCommand::Timer(_) => "timer",
            CardCommand::FinishChange { .. } => "finish_change",
            CardCommand::ExpireHold(_) => "expire_hold",
        }
    }
}

/// The answer to an authorization request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub reason: Option<Decline>,
    /// The card transaction that records it; `None` for a request refused
    /// without a record (a reused authorization id).
    pub transaction_id: Option<String>,
    /// The event was decided before; this is that decision again.
    pub duplicate: bool,
}

/// The actor's one reply type, as the runtime carries it. Each command
/// answers one of these shapes; callers ask through [`super::Cards`],
/// which gives each command's answer its own type.
#[derive(Debug)]
pub enum CardReply {
    Card(Box<CardRow>),
    Token(Box<CardWalletTokenRow>),
    Decision(Decision),
    /// A provider event was recorded, or had been (`duplicate`), or named
    /// nothing the card knows (`ignored`).
    Recorded {
        duplicate: bool,
        ignored: bool,
    },
}

/// Why the card did not do what was asked; each maps to one problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardFailure {
    Refused(Refusal),
    /// The user already has a live virtual card (409 ACTIVE_CARD_ALREADY_EXISTS).
    LiveCardExists,
    /// The issuer failed; nothing was changed (502).
    Issuer(String),
    /// The issuer's answer was lost: the call's intent finishes it once the
    /// issuer confirms (502, saying so).
    IssuerUnconfirmed(String),
    /// The issuer cannot provision into that wallet (501).
    WalletNotSupported(String),
    /// Limits out of bounds or out of order (422), per field.
    InvalidLimits(Vec<(&'static str, String)>),
    /// The card holds its maximum of wallet tokens (409).
    WalletTokenLimit,
    /// The card does not exist (never issued, or its issue was abandoned).
    NotFound,
    /// A provider event names what the card cannot record yet (a wallet
    /// token whose provisioning the issuer cannot confirm now): 503, send
    /// it again.
    NotYet,
    /// The ledger refuses for good the entry an event's `field` asks for
    /// (an amount that would overflow a balance): 422, nothing recorded,
    /// so the provider stops re-sending it.
    EntryRefused {
        field: &'static str,
        reason: String,
    },
}

pub type CardResult = Result<CardReply, CardFailure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limits_patch_merges_field_by_field() {
        let limits = Limits {
            per_transaction_minor: Some(MinorUnits::new(100)),
            daily_spend_minor: Some(MinorUnits::new(1_000)),
            monthly_spend_minor: None,
            atm_daily_minor: Some(MinorUnits::new(5)),
            online_enabled: true,
            international_enabled: false,
            atm_enabled: false,
        };
        let patch = LimitsPatch {
            daily_spend_minor: Some(Some(MinorUnits::new(2_000))),
            atm_daily_minor: Some(None),
            atm_enabled: Some(true),
            ..LimitsPatch::default()
        };
        assert_eq!(
            patch.merged(limits),
            Limits {
                daily_spend_minor: Some(MinorUnits::new(2_000)),
                atm_daily_minor: None,
                atm_enabled: true,
                ..limits
            }
        );
        assert_eq!(LimitsPatch::default().merged(limits), limits);
    }
}
