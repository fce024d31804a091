//! The card's wallet tokens: provisioning one at the issuer, and following
//! the issuer's token updates. The card's version guards its tokens, as a
//! change to one moves the card's wallet status.

use serde_json::json;
use tern_schema::models::CardWalletTokenRow;
use tern_schema::plan::RowWrite;
use tern_schema::store::cards as store;
use tern_schema::vocabulary::{WalletStatus, WalletTokenStatus};

use super::kind::{CardContext, CardState};
use super::lifecycle::issuer_failure;
use super::machine::{Effect, Event, Operation, Refusal};
use super::messages::{CardFailure, CardReply, Origin};
use super::record::record;
use super::write::{
    answer, commit_step, decided, recorded, refusal, rejected, runtime_error, unexpected, Step,
};
use crate::ports::{Wallet, WalletOutcome, WalletRequest};
use crate::runtime::{self, EntityEnv};

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

pub(super) async fn provision(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    wallet: Wallet,
    device_id: Option<String>,
    token_id: String,
    origin: Origin,
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
                let tokens = {
                    let mut pooled = env.db.get().await?;
                    let mut tx = pooled.tx();
                    store::wallet_tokens(&mut tx, &state.row.id).await?
                };
                if tokens.len() as i64 >= store::WALLET_TOKENS_PER_CARD_MAX {
                    return answer(state, Err(CardFailure::WalletTokenLimit));
                }
                let Some(provider_card_id) = state.row.provider_card_id.clone() else {
                    return refusal(state, Refusal::NotIssued);
                };
                let request = WalletRequest {
                    idempotency_key: token_id.clone(),
                    provider_card_id,
                    card_id: state.row.id.clone(),
                    wallet,
                    device_id: device_id.clone(),
                };
                let provider_token_id = match env.ctx.issuer.provision_wallet(&request).await {
                    Ok(WalletOutcome::Requested { provider_token_id }) => provider_token_id,
                    Ok(WalletOutcome::NotSupported { reason }) => {
                        return answer(state, Err(CardFailure::WalletNotSupported(reason)));
                    }
                    Err(error) => return answer(state, Err(issuer_failure(&error))),
                };
                let token = CardWalletTokenRow {
                    id: token_id.clone(),
                    card_id: state.row.id.clone(),
                    merchant_id: state.row.merchant_id.clone(),
                    wallet,
                    status: WalletTokenStatus::Requested,
                    device_id: device_id.clone(),
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
    token_id: String,
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
    let event = Event::WalletUpdated {
        status: parsed,
        token_known: tokens.iter().any(|token| token.id == token_id),
    };
    let effects = match decided(&state, event) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&state.row, state.row.clone(), None);
    for effect in effects {
        match effect {
            Effect::Ignore => return answer(state, recorded(false, true)),
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

#[cfg(test)]
mod tests {
    use super::*;

    use tern_schema::vocabulary::{MerchantId, Wallet};

    fn token(id: &str, status: WalletTokenStatus, second: u32) -> CardWalletTokenRow {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
            .and_then(|d| d.and_hms_opt(12, 0, second))
            .unwrap();
        CardWalletTokenRow {
            id: id.into(),
            card_id: "card_1".into(),
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
