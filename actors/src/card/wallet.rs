//! The card's wallet tokens: provisioning one at the issuer, and following
//! the issuer's token updates. The card's version guards its tokens, as a
//! change to one moves the card's wallet status.

use serde_json::json;
use tern_schema::models::CardWalletTokenRow;
use tern_schema::plan::{Plan, RowWrite};
use tern_schema::store::cards as store;
use tern_schema::types::utc_now;

use super::kind::{CardContext, CardState};
use super::lifecycle::issuer_failure;
use super::machine::{self, Operation, Refusal};
use super::messages::{CardFailure, CardReply, Origin};
use super::record::{moved, record, status_of, successor};
use super::write::{answer, commit, refusal, Step};
use crate::ports::{Wallet, WalletOutcome, WalletRequest};
use crate::runtime::EntityEnv;

/// The card's wallet status from its tokens: active when any token is,
/// otherwise the newest token's status, `none` without tokens.
pub fn wallet_status_of(tokens: &[CardWalletTokenRow]) -> String {
    if tokens.iter().any(|token| token.status == "active") {
        return "active".to_owned();
    }
    tokens
        .iter()
        .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
        .map_or_else(|| "none".to_owned(), |token| token.status.clone())
}

pub(super) async fn provision(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    wallet: Wallet,
    device_id: Option<String>,
    token_id: String,
    origin: Origin,
) -> Step {
    if let Err(refused) = machine::apply(status_of(&state.row), Operation::ProvisionWallet) {
        return refusal(state, refused);
    }
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
    let now = utc_now();
    let token = CardWalletTokenRow {
        id: token_id,
        card_id: state.row.id.clone(),
        merchant_id: state.row.merchant_id.clone(),
        wallet: wallet.as_str().to_owned(),
        status: "requested".to_owned(),
        device_id,
        provider_token_id: Some(provider_token_id),
        created_at: now,
        updated_at: now,
    };
    let mut all = tokens;
    all.push(token.clone());
    let mut row = successor(&state.row, now);
    row.wallet_status = wallet_status_of(&all);
    let audit = record(
        &row,
        &origin,
        "card.wallet_requested",
        json!({"token_id": token.id, "wallet": token.wallet, "device_id": token.device_id}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![
            RowWrite::NewWalletToken(token.clone()),
            moved(&row, state.row.version),
        ],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row;
    answer(state, Ok(CardReply::Token(Box::new(token))))
}

/// Wallet token statuses a provider may report.
pub const WALLET_TOKEN_STATUSES: [&str; 6] = [
    "requested",
    "provisioning",
    "active",
    "suspended",
    "removed",
    "failed",
];

pub(super) async fn updated(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    token_id: String,
    status: String,
) -> Step {
    if !WALLET_TOKEN_STATUSES.contains(&status.as_str()) {
        return answer(
            state,
            Ok(CardReply::Recorded {
                duplicate: false,
                ignored: true,
            }),
        );
    }
    // Tokens are the card's: its version guards them, as a change to one
    // moves the card's wallet status.
    let mut tokens = {
        let mut pooled = env.db.get().await?;
        let tokens = store::wallet_tokens(&mut pooled.tx(), &state.row.id).await?;
        tokens
    };
    let Some(token) = tokens.iter_mut().find(|token| token.id == token_id) else {
        return answer(
            state,
            Ok(CardReply::Recorded {
                duplicate: false,
                ignored: true,
            }),
        );
    };
    let now = utc_now();
    token.status = status.clone();
    let mut row = successor(&state.row, now);
    row.wallet_status = wallet_status_of(&tokens);
    let audit = record(
        &row,
        &Origin::system(&state.row),
        "card.wallet_updated",
        json!({"token_id": token_id, "status": status}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![
            RowWrite::WalletTokenStatus {
                card_id: row.id.clone(),
                token_id,
                status,
                at: now,
            },
            moved(&row, state.row.version),
        ],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row;
    answer(
        state,
        Ok(CardReply::Recorded {
            duplicate: false,
            ignored: false,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str, status: &str, second: u32) -> CardWalletTokenRow {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
            .and_then(|d| d.and_hms_opt(12, 0, second))
            .unwrap();
        CardWalletTokenRow {
            id: id.into(),
            card_id: "card_1".into(),
            merchant_id: "m".into(),
            wallet: "apple_pay".into(),
            status: status.into(),
            device_id: None,
            provider_token_id: None,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn a_cards_wallet_status_follows_its_tokens() {
        assert_eq!(wallet_status_of(&[]), "none");
        assert_eq!(wallet_status_of(&[token("a", "requested", 1)]), "requested");
        assert_eq!(
            wallet_status_of(&[token("a", "active", 1), token("b", "failed", 2)]),
            "active"
        );
        assert_eq!(
            wallet_status_of(&[token("a", "failed", 1), token("b", "requested", 2)]),
            "requested"
        );
    }
}
