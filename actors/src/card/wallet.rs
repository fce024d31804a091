//! The card's wallet tokens: provisioning one at the issuer, and following
//! the issuer's token updates. The card's version guards its tokens, as a
//! change to one moves the card's wallet status. A provisioning's intent
//! (`intent`) is written before the issuer is asked, so a token the issuer
//! made is recorded even when its answer was lost or the process died.

use serde_json::json;
use tern_schema::models::CardWalletTokenRow;
use tern_schema::plan::RowWrite;
use tern_schema::store::cards as store;
use tern_schema::store::timers;
use tern_schema::vocabulary::{CardId, WalletStatus, WalletTokenId, WalletTokenStatus};

use super::intent::{self, Intent};
use super::kind::{CardContext, CardKind, CardState};
use super::lifecycle::issuer_failure;
use super::machine::{Effect, Event, Operation, Refusal, Token};
use super::messages::{CardFailure, CardReply, Origin};
use super::record::record;
use super::write::{
    answer, commit_step, decided, recorded, refusal, rejected, runtime_error, unexpected, Step,
};
use crate::ports::{ProviderError, Wallet, WalletOutcome, WalletRequest};
use crate::runtime::{self, EntityEnv, EntityKind, RuntimeError, TimerFiring};

/// The card's wallet status from its tokens: active when any token is,
/// otherwise the newest token's status, `none` without tokens.
pub fn wallet_status_of(tokens: &[CardWalletTokenRow]) -> WalletStatus {
    if tokens
        .iter()
        .any(|token| token.status == WalletTokenStatus::Active)
    {
        return WalletStatus::Active;
    }
    tokens
        .iter()
        .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
        .map_or(WalletStatus::None, |token| token.status.into())
}

/// Payload prefix of the timer that finishes a provisioning: `wallet:`
/// then the [`Provisioning`] as JSON.
const TIMER_FINISH_PROVISIONING: &str = "wallet:";

/// A token asked of the issuer, as its intent remembers it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Provisioning {
    /// Tern's token id: the issuer's idempotency key.
    pub token_id: WalletTokenId,
    pub wallet: Wallet,
    pub device_id: Option<String>,
}

/// The provisioning a finishing timer's payload names.
pub(super) fn finishing(payload: &str) -> Option<Provisioning> {
    let json = payload.strip_prefix(TIMER_FINISH_PROVISIONING)?;
    serde_json::from_str(json).ok()
}

fn provisioning_intent(card_id: &CardId, asked: &Provisioning) -> Result<Intent, RuntimeError> {
    let json = serde_json::to_string(asked)
        .map_err(|error| RuntimeError::Refused(format!("provisioning intent: {error}")))?;
    Ok(Intent {
        card_id: card_id.to_owned(),
        id: intent_timer_id(card_id, &asked.token_id),
        payload: format!("{TIMER_FINISH_PROVISIONING}{json}"),
    })
}

fn intent_timer_id(card_id: &CardId, token_id: &WalletTokenId) -> String {
    format!("{card_id}:wallet:{token_id}")
}

/// Provisions a token for a request.
pub(super) async fn provision(
    env: &EntityEnv<CardContext>,
    state: CardState,
    asked: Provisioning,
    origin: Origin,
) -> Step {
    request_token(env, state, asked, origin, false, None).await
}

/// Finishes a provisioning whose issuer answer was lost: asks again under
/// the same key and records the token the issuer answers.
pub(super) async fn finish(
    env: &EntityEnv<CardContext>,
    state: CardState,
    asked: Provisioning,
    firing: TimerFiring,
) -> Step {
    let origin = Origin::system(&state.row);
    request_token(env, state, asked, origin, true, Some(firing)).await
}

/// Asks the issuer for a token, for a request or to finish an intent
/// (`finishing`, through its timer's `firing` or not).
async fn request_token(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    asked: Provisioning,
    origin: Origin,
    finishing: bool,
    firing: Option<TimerFiring>,
) -> Step {
    let effects = match decided(&state, Event::Operate(Operation::ProvisionWallet)) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    // Every token change moves the card (its wallet status), so the step
    // always writes the card's row.
    let mut step = runtime::Step::begin(&state.row, state.row.clone(), None);
    let now = step.next.updated_at;
    let mut requested = None;
    for effect in effects {
        match effect {
            Effect::RequestWalletToken => {
                let (tokens, pending) = {
                    let mut pooled = env.db.get().await?;
                    let mut tx = pooled.tx();
                    let tokens = store::wallet_tokens(&mut tx, &state.row.id).await?;
                    let pending = timers::count_for_entity(
                        &mut tx,
                        CardKind::NAME,
                        state.row.id.as_str(),
                        TIMER_FINISH_PROVISIONING,
                    )
                    .await?;
                    (tokens, pending)
                };
                // Tokens still being provisioned count: each may exist at
                // the issuer. A token that may exist already is recorded
                // whatever the count.
                let count = (tokens.len() as i64).saturating_add(pending);
                if !finishing && count >= store::WALLET_TOKENS_PER_CARD_MAX {
                    return answer(state, Err(CardFailure::WalletTokenLimit));
                }
                let Some(provider_card_id) = state.row.provider_card_id.clone() else {
                    return refusal(state, Refusal::NotIssued);
                };
                let intent = provisioning_intent(&state.row.id, &asked)?;
                let delay = env.ctx.intent_delay;
                intent.write(&env.db, delay, firing.as_ref()).await?;
                step.plan.cancels_timers.push(intent.id.clone());
                let request = WalletRequest {
                    idempotency_key: asked.token_id.to_string(),
                    provider_card_id,
                    card_id: state.row.id.clone(),
                    wallet: asked.wallet,
                    device_id: asked.device_id.clone(),
                };
                let provider_token_id = match env.ctx.issuer.provision_wallet(&request).await {
                    Ok(WalletOutcome::Requested { provider_token_id }) => provider_token_id,
                    Ok(WalletOutcome::NotSupported { reason }) => {
                        let refused = ProviderError::Permanent {
                            status: 501,
                            code: "wallet_not_supported".into(),
                            message: reason.clone(),
                        };
                        intent.settle(&env.db, &refused, finishing).await?;
                        return answer(state, Err(CardFailure::WalletNotSupported(reason)));
                    }
                    Err(error) => {
                        let fate = intent.settle(&env.db, &error, finishing).await?;
                        tracing::warn!(card = %state.row.id, token = %asked.token_id, %error, ?fate, "the issuer did not confirm a wallet token");
                        return answer(state, Err(issuer_failure(&error, fate)));
                    }
                };
                let token = CardWalletTokenRow {
                    id: asked.token_id.clone(),
                    card_id: state.row.id.clone(),
                    merchant_id: state.row.merchant_id.clone(),
                    wallet: asked.wallet,
                    status: WalletTokenStatus::Requested,
                    device_id: asked.device_id.clone(),
                    provider_token_id: Some(provider_token_id),
                    created_at: now,
                    updated_at: now,
                };
                let mut all = tokens;
                all.push(token.clone());
                step.next.wallet_status = wallet_status_of(&all);
                step.plan.rows.push(RowWrite::NewWalletToken(token.clone()));
                requested = Some(token);
            }
            Effect::Persist => {}
            Effect::Audit(action) => {
                let Some(token) = &requested else {
                    return Err(unexpected(&Effect::Audit(action), "provision_wallet"));
                };
                step.plan.audit.push(record(
                    &step.next,
                    &origin,
                    action,
                    json!({"token_id": token.id, "wallet": token.wallet, "device_id": token.device_id}),
                ));
            }
            other => return Err(unexpected(&other, "provision_wallet")),
        }
    }
    let Some(token) = requested else {
        return Err(unexpected(
            &Effect::Persist,
            "provision_wallet without a token",
        ));
    };
    state.row = commit_step(&env.db, step).await.map_err(runtime_error)?;
    answer(state, Ok(CardReply::Token(Box::new(token))))
}

pub(super) async fn updated(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    token_id: WalletTokenId,
    status: String,
) -> Step {
    // Tokens are the card's: its version guards them, as a change to one
    // moves the card's wallet status.
    let mut tokens = {
        let mut pooled = env.db.get().await?;
        let tokens = store::wallet_tokens(&mut pooled.tx(), &state.row.id).await?;
        tokens
    };
    let parsed = WalletTokenStatus::parse(&status);
    let mut pending = None;
    let token = if tokens.iter().any(|token| token.id == token_id) {
        Token::Recorded
    } else {
        let timer_id = intent_timer_id(&state.row.id, &token_id);
        pending = intent::pending(&env.db, &timer_id, finishing).await?;
        match pending {
            Some(_) => Token::Pending,
            None => Token::Unknown,
        }
    };
    let event = Event::WalletUpdated {
        status: parsed,
        token,
    };
    let effects = match decided(&state, event) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&state.row, state.row.clone(), None);
    for effect in effects {
        match effect {
            Effect::Ignore => return answer(state, recorded(false, true)),
            Effect::FinishProvisioning => {
                let Some(asked) = pending else {
                    return Err(unexpected(&Effect::FinishProvisioning, "wallet_updated"));
                };
                return finish_then_update(env, state, asked, status).await;
            }
            Effect::UpdateWalletToken => {
                let Some(status) = parsed else {
                    return Err(unexpected(&Effect::UpdateWalletToken, "wallet_updated"));
                };
                for token in tokens.iter_mut().filter(|token| token.id == token_id) {
                    token.status = status;
                }
                step.next.wallet_status = wallet_status_of(&tokens);
                step.plan.rows.push(RowWrite::WalletTokenStatus {
                    card_id: step.next.id.clone(),
                    token_id: token_id.clone(),
                    status,
                    at: step.next.updated_at,
                });
            }
            Effect::Persist => {}
            Effect::Audit(action) => step.plan.audit.push(record(
                &step.next,
                &Origin::system(&state.row),
                action,
                json!({"token_id": token_id, "status": status}),
            )),
            other => return Err(unexpected(&other, "wallet_updated")),
        }
    }
    state.row = commit_step(&env.db, step).await.map_err(runtime_error)?;
    answer(state, recorded(false, false))
}

/// An update for a token whose provisioning answer was lost proves the
/// issuer made it: the provisioning is finished now (same key), then the
/// update heard again. While the issuer cannot be reached, the update is
/// refused for its sender to send again.
async fn finish_then_update(
    env: &EntityEnv<CardContext>,
    state: CardState,
    asked: Provisioning,
    status: String,
) -> Step {
    let token_id = asked.token_id.clone();
    let origin = Origin::system(&state.row);
    let finished = request_token(env, state, asked, origin, true, None).await?;
    if finished.reply.is_err() {
        return answer(finished.state, Err(CardFailure::NotYet));
    }
    Box::pin(updated(env, finished.state, token_id, status)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    use tern_schema::vocabulary::{MerchantId, Wallet};

    fn token(id: &str, status: WalletTokenStatus, second: u32) -> CardWalletTokenRow {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
            .and_then(|d| d.and_hms_opt(12, 0, second))
            .unwrap();
        CardWalletTokenRow {
            id: WalletTokenId::new(id),
            card_id: CardId::new("card_1"),
            merchant_id: MerchantId::new("m"),
            wallet: Wallet::ApplePay,
            status,
            device_id: None,
            provider_token_id: None,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn a_cards_wallet_status_follows_its_tokens() {
        use WalletTokenStatus::{Active, Failed, Requested};
        assert_eq!(wallet_status_of(&[]), WalletStatus::None);
        assert_eq!(
            wallet_status_of(&[token("a", Requested, 1)]),
            WalletStatus::Requested
        );
        assert_eq!(
            wallet_status_of(&[token("a", Active, 1), token("b", Failed, 2)]),
            WalletStatus::Active
        );
        assert_eq!(
            wallet_status_of(&[token("a", Failed, 1), token("b", Requested, 2)]),
            WalletStatus::Requested
        );
    }
}
