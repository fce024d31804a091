//! The card actor: one per card, the only writer of the card's row, its
//! transactions and its wallet tokens. It asks the pure machine what an
//! operation or an authorization does, calls the issuer where the card's
//! status must follow, and writes each change in one transaction with its
//! ledger entries and audit record. This module is the runtime's view of
//! it (load, dispatch, timers); the work lives in `issue`, `lifecycle`,
//! `wallet` and `spend`.

use std::sync::Arc;

use chrono::NaiveDateTime;
use tern_schema::models::CardRow;
use tern_schema::store::cards as store;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, CardId, Channel};
use tern_schema::Db;

use super::holds;
use super::issue::{self, TIMER_RESUME_ISSUE};
use super::lifecycle;
use super::machine::{self, Spend, Status};
use super::messages::{CardCommand, CardFailure, CardResult, Origin};
use super::record::status_of;
use super::spend;
use super::standing::StandingCache;
use super::wallet;
use super::write::{answer, Step};
use crate::ports::CardIssuer;
use crate::runtime::{EntityEnv, EntityKind, RuntimeError, RuntimeResult, TimerFiring};

#[derive(Clone)]
pub struct CardContext {
    pub issuer: Arc<dyn CardIssuer>,
    /// Whether each card's merchant and user may spend, shared by all cards.
    pub standing: Arc<StandingCache>,
    /// How long an uncleared authorization holds its funds (TERN_CARD_HOLD_TTL).
    pub hold_ttl: chrono::TimeDelta,
    /// How long an issuer call's intent waits before the card finishes the
    /// call itself ([`super::intent_delay`]).
    pub intent_delay: chrono::TimeDelta,
}

/// The card as stored, plus what the actor keeps to decide quickly.
#[derive(Clone, Debug)]
pub struct CardState {
    pub row: CardRow,
    pub(super) spend: Spend,
    /// The funding account the card spends from, found on first use.
    pub(super) funding_account: Option<AccountId>,
    /// The card was never issued and its intent is gone.
    pub(super) gone: bool,
}

impl CardState {
    /// What the machine knows of the card.
    pub(super) fn machine(&self) -> machine::State {
        machine::State {
            status: status_of(&self.row),
            currency: self.row.currency.clone(),
            limits: self.row.limits,
            spend: self.spend,
            replacing: self.row.replaces_card_id.is_some(),
        }
    }
}

pub struct CardKind;

impl EntityKind for CardKind {
    const NAME: &'static str = "card";
    type State = CardState;
    type Command = CardCommand;
    type Reply = CardResult;
    type Context = CardContext;

    async fn load(env: EntityEnv<CardContext>) -> RuntimeResult<Option<CardState>> {
        let mut pooled = env.db.get().await?;
        let tx = &mut pooled.tx();
        let Some(row) = store::find(tx, &CardId::new(&*env.id)).await? else {
            return Ok(None);
        };
        let now = utc_now();
        let (day_start, month_start) = machine::window_starts(now);
        let spend = Spend {
            day: now.date(),
            day_minor: store::approved_since(tx, &row.id, day_start, None).await?,
            atm_day_minor: store::approved_since(tx, &row.id, day_start, Some(Channel::Atm))
                .await?,
            month_minor: store::approved_since(tx, &row.id, month_start, None).await?,
        };
        Ok(Some(CardState {
            row,
            spend,
            funding_account: None,
            gone: false,
        }))
    }

    async fn handle(env: EntityEnv<CardContext>, state: CardState, command: CardCommand) -> Step {
        if state.gone {
            return answer(state, Err(CardFailure::NotFound));
        }
        match command {
            CardCommand::Issue { origin } => issue::issue(&env, state, origin, None).await,
            CardCommand::Resume => {
                let origin = Origin::system(&state.row);
                issue::issue(&env, state, origin, None).await
            }
            CardCommand::Timer(firing) => {
                let origin = Origin::system(&state.row);
                issue::issue(&env, state, origin, Some(firing)).await
            }
            CardCommand::Change { operation, origin } => {
                lifecycle::change(&env, state, operation, origin).await
            }
            CardCommand::FinishChange { operation, firing } => {
                lifecycle::finish(&env, state, operation, firing).await
            }
            CardCommand::Replace {
                reason,
                new_card_id,
                origin,
            } => issue::replace(&env, state, reason, new_card_id, origin).await,
            CardCommand::Update {
                display_name,
                limits,
                origin,
            } => lifecycle::update(&env, state, display_name, limits, origin).await,
            CardCommand::ProvisionWallet { asked, origin } => {
                wallet::provision(&env, state, asked, origin).await
            }
            CardCommand::FinishProvisioning { asked, firing } => {
                wallet::finish(&env, state, asked, firing).await
            }
            CardCommand::WalletUpdated { token_id, status } => {
                wallet::updated(&env, state, token_id, status).await
            }
            CardCommand::Authorize(request) => spend::authorize(&env, state, request).await,
            CardCommand::Clear {
                event_id,
                authorization_id,
                amount_minor,
            } => spend::clear(&env, state, event_id, authorization_id, amount_minor).await,
            CardCommand::Refund(request) => spend::refund(&env, state, request).await,
            CardCommand::Reverse(reversal) => holds::reverse(&env, state, reversal).await,
            CardCommand::ExpireHold(firing) => holds::expire(&env, state, firing).await,
        }
    }

    fn in_flight_since(state: &CardState) -> Option<NaiveDateTime> {
        (state.row.status == Status::Issuing && !state.gone).then_some(state.row.created_at)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let mut pooled = db.get().await?;
        let after = after.as_deref().unwrap_or("");
        let ids = store::issuing_page(&mut pooled.tx(), after, limit).await?;
        Ok(ids)
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<CardCommand> {
        if firing.payload == TIMER_RESUME_ISSUE {
            Ok(CardCommand::Timer(firing))
        } else if holds::expiring(&firing.payload).is_some() {
            Ok(CardCommand::ExpireHold(firing))
        } else if let Some(operation) = lifecycle::finishing(&firing.payload) {
            Ok(CardCommand::FinishChange { operation, firing })
        } else if let Some(asked) = wallet::finishing(&firing.payload) {
            Ok(CardCommand::FinishProvisioning { asked, firing })
        } else {
            Err(RuntimeError::InvalidTimer {
                reason: format!("unknown payload `{}`", firing.payload),
                id: firing.id,
            })
        }
    }

    /// A live card is not in flight between authorizations, but it is not
    /// done either: it stays in memory until the idle timeout, or every
    /// authorization of a busy card would reload it (its spend windows are
    /// sums over the card's transactions).
    fn passivates_when_quiet(state: &CardState) -> bool {
        state.gone || state.row.status == Status::Closed
    }

    fn on_activate(state: &CardState) -> Option<CardCommand> {
        (state.row.status == Status::Issuing).then_some(CardCommand::Resume)
    }
}
