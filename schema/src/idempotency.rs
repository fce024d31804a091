//! Idempotency-Key semantics (decisions §4): a key's answer is recorded in
//! the plan that writes the effect it guards, so "durable effect" and
//! "recorded answer" commit together or not at all.

use sha2::{Digest, Sha256};

use crate::models::IdempotencyRow;
use crate::store::idempotency as store;
use crate::types::utc_now;
use crate::vocabulary::MerchantId;
#[cfg(doc)]
use crate::Refusal;
use crate::{StoreResult, Tx};

/// What a key's earlier use says about this request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyUse {
    /// The same request was answered before: send this again.
    Replay { status: u16, body: String },
    /// The first request with this key is still running (409): only a
    /// record from before answers were written with their work says so.
    InProgress,
    /// The key was used with a different request (422).
    Mismatch,
}

/// The digest that decides "same request": SHA-256 of the request's
/// canonical JSON (callers pass a re-serialised, parsed body so formatting
/// and key order do not matter).
pub fn request_digest(canonical_body: &str) -> String {
    hex::encode(Sha256::digest(canonical_body.as_bytes()))
}

/// What the record of a taken key says about a request with this digest.
fn judge(existing: Option<IdempotencyRow>, request_sha256: &str) -> KeyUse {
    let Some(existing) = existing else {
        // Taken and then rolled back: nothing of it committed, so the key
        // is effectively free; the caller retries.
        return KeyUse::InProgress;
    };
    if existing.request_sha256 != request_sha256 {
        return KeyUse::Mismatch;
    }
    match (
        existing.state.as_str(),
        existing.response_status,
        existing.response_body,
    ) {
        ("completed", Some(status), Some(body)) => KeyUse::Replay {
            status: u16::try_from(status).unwrap_or(500),
            body,
        },
        _ => KeyUse::InProgress,
    }
}

/// The record of a key answered before its work starts, written with the
/// work's plan (`Plan::answer`): a key already recorded refuses the plan.
pub fn answered(
    (merchant_id, scope, key): (&MerchantId, &str, &str),
    request_sha256: &str,
    status: u16,
    body: &str,
) -> IdempotencyRow {
    let now = utc_now();
    IdempotencyRow {
        merchant_id: merchant_id.to_owned(),
        scope: scope.to_owned(),
        idempotency_key: key.to_owned(),
        request_sha256: request_sha256.to_owned(),
        state: "completed".to_owned(),
        response_status: Some(i32::from(status)),
        response_body: Some(body.to_owned()),
        created_at: now,
        updated_at: now,
    }
}

/// What the key's record says about this request, if the key has a
/// committed record at all.
pub async fn recorded_use(
    tx: &mut Tx<'_>,
    (merchant_id, scope, key): (&MerchantId, &str, &str),
    request_sha256: &str,
) -> StoreResult<Option<KeyUse>> {
    let existing = store::find(tx, merchant_id, scope, key).await?;
    Ok(existing.map(|existing| judge(Some(existing), request_sha256)))
}
