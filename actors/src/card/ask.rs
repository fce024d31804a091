//! The card actors asked one command at a time, each answered in the type
//! its command replies with. Callers never see the actor's reply enum, so
//! no call site can mistake one reply for another: the command and its
//! answer's shape are paired here, once.

use tern_schema::models::{CardRow, CardWalletTokenRow};
use tern_schema::money::MinorUnits;
use tern_schema::vocabulary::{CardId, WalletTokenId};

use super::holds::Reversal;
use super::kind::CardKind;
use super::machine::Operation;
use super::messages::{
    AuthorizationRequest, CardCommand, CardFailure, CardReply, Decision, LimitsPatch, Origin,
    RefundRequest,
};
use super::wallet::Provisioning;
use crate::ports::Wallet;
use crate::runtime::{EntityKind, Registry, RuntimeError, RuntimeResult};

/// What the card's actor answers a command: the command's own answer, or
/// why the card refused it; outside, why the runtime could not deliver it.
pub type Answer<T> = RuntimeResult<Result<T, CardFailure>>;

/// A provider event the card recorded, had recorded before (`duplicate`),
/// or that named nothing the card knows (`ignored`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub duplicate: bool,
    pub ignored: bool,
}

/// The card actors, asked through typed commands.
#[derive(Clone, Copy)]
pub struct Cards<'a> {
    registry: &'a Registry<CardKind>,
}

impl<'a> Cards<'a> {
    pub fn new(registry: &'a Registry<CardKind>) -> Self {
        Cards { registry }
    }

    pub fn registry(&self) -> &'a Registry<CardKind> {
        self.registry
    }

    /// Issues the card whose intent was just written.
    pub async fn issue(&self, card_id: &CardId, origin: Origin) -> Answer<CardRow> {
        self.card(card_id, CardCommand::Issue { origin }).await
    }

    /// Freezes, unfreezes or closes the card.
    pub async fn change(
        &self,
        card_id: &CardId,
        operation: Operation,
        origin: Origin,
    ) -> Answer<CardRow> {
        self.card(card_id, CardCommand::Change { operation, origin })
            .await
    }

    /// Blocks the card and issues a new one in its place (its id in the
    /// old card's slot, [`super::create::new_card_id_beside`]); answers the
    /// new card.
    pub async fn replace(
        &self,
        card_id: &CardId,
        reason: Option<String>,
        origin: Origin,
    ) -> Answer<CardRow> {
        let new_card_id = super::create::new_card_id_beside(card_id);
        let command = CardCommand::Replace {
            reason,
            new_card_id,
            origin,
        };
        self.card(card_id, command).await
    }

    /// Renames the card (`Some(None)` removes its name) and patches its
    /// limits.
    pub async fn update(
        &self,
        card_id: &CardId,
        display_name: Option<Option<String>>,
        limits: LimitsPatch,
        origin: Origin,
    ) -> Answer<CardRow> {
        let command = CardCommand::Update {
            display_name,
            limits,
            origin,
        };
        self.card(card_id, command).await
    }

    /// Provisions the card into a wallet; answers the new token.
    pub async fn provision_wallet(
        &self,
        card_id: &CardId,
        wallet: Wallet,
        device_id: Option<String>,
        token_id: WalletTokenId,
        origin: Origin,
    ) -> Answer<CardWalletTokenRow> {
        let asked = Provisioning {
            token_id,
            wallet,
            device_id,
        };
        let command = CardCommand::ProvisionWallet { asked, origin };
        self.ask(card_id, command, |reply| match reply {
            CardReply::Token(token) => Ok(*token),
            other => Err(other),
        })
        .await
    }

    /// Decides an authorization request.
    pub async fn authorize(
        &self,
        card_id: &CardId,
        request: AuthorizationRequest,
    ) -> Answer<Decision> {
        self.ask(
            card_id,
            CardCommand::Authorize(request),
            |reply| match reply {
                CardReply::Decision(decision) => Ok(decision),
                other => Err(other),
            },
        )
        .await
    }

    /// The issuer's `authorization.clearing`.
    pub async fn clear(
        &self,
        card_id: &CardId,
        event_id: String,
        authorization_id: String,
        amount_minor: Option<MinorUnits>,
    ) -> Answer<Recorded> {
        let command = CardCommand::Clear {
            event_id,
            authorization_id,
            amount_minor,
        };
        self.recorded(card_id, command).await
    }

    /// The issuer's `authorization.reversal`.
    pub async fn reverse(&self, card_id: &CardId, reversal: Reversal) -> Answer<Recorded> {
        self.recorded(card_id, CardCommand::Reverse(reversal)).await
    }

    /// A refund onto the card.
    pub async fn refund(&self, card_id: &CardId, request: RefundRequest) -> Answer<Recorded> {
        self.recorded(card_id, CardCommand::Refund(request)).await
    }

    /// The issuer's `wallet_token.updated`.
    pub async fn wallet_updated(
        &self,
        card_id: &CardId,
        token_id: WalletTokenId,
        status: String,
    ) -> Answer<Recorded> {
        let command = CardCommand::WalletUpdated { token_id, status };
        self.recorded(card_id, command).await
    }

    async fn card(&self, card_id: &CardId, command: CardCommand) -> Answer<CardRow> {
        self.ask(card_id, command, |reply| match reply {
            CardReply::Card(row) => Ok(*row),
            other => Err(other),
        })
        .await
    }

    async fn recorded(&self, card_id: &CardId, command: CardCommand) -> Answer<Recorded> {
        self.ask(card_id, command, |reply| match reply {
            CardReply::Recorded { duplicate, ignored } => Ok(Recorded { duplicate, ignored }),
            other => Err(other),
        })
        .await
    }

    /// Sends `command` and takes its answer out of the actor's reply. The
    /// actor answers each command with one reply shape (see its
    /// dispatch); another shape is a bug in the card's module, reported as
    /// the actor's failure rather than a panic in the caller.
    async fn ask<T>(
        &self,
        card_id: &CardId,
        command: CardCommand,
        answer: impl FnOnce(CardReply) -> Result<T, CardReply>,
    ) -> Answer<T> {
        let command_name = command.name();
        match self.registry.call(card_id.as_str(), command).await? {
            Ok(reply) => answer(reply).map(Ok).map_err(|other| {
                RuntimeError::Refused(format!(
                    "{} {card_id} answered {other:?} to {command_name}",
                    CardKind::NAME
                ))
            }),
            Err(failure) => Ok(Err(failure)),
        }
    }
}
