//! Idempotency-Key semantics (decisions §4): a key is claimed in the same
//! transaction as the effect it guards, so "durable effect" and "recorded
//! answer" commit together or not at all.

use sha2::{Digest, Sha256};

use crate::models::IdempotencyRow;
use crate::store::idempotency as store;
use crate::types::utc_now;
use crate::{StoreResult, Tx};

/// What a key's earlier use says about this request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is now this request's; do the work, then [`complete`].
    New,
    /// The same request was answered before: send this again.
    Replay { status: u16, body: String },
    /// The first request with this key is still running (409).
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

pub async fn claim(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    scope: &str,
    key: &str,
    request_sha256: &str,
) -> StoreResult<Claim> {
    claim_with(tx, merchant_id, scope, key, request_sha256, None).await
}

/// [`claim`] for work whose answer is known before it starts, and which
/// runs in the same transaction: the key is recorded with that answer at
/// once, so no [`complete`] follows. If the work then fails, its
/// transaction rolls back and the record goes with it; no other
/// transaction can see the record before the work commits.
pub async fn claim_answered(
    tx: &mut Tx<'_>,
    (merchant_id, scope, key): (&str, &str, &str),
    request_sha256: &str,
    status: u16,
    body: &str,
) -> StoreResult<Claim> {
    let answer = (i32::from(status), body.to_owned());
    claim_with(tx, merchant_id, scope, key, request_sha256, Some(answer)).await
}

async fn claim_with(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    scope: &str,
    key: &str,
    request_sha256: &str,
    answer: Option<(i32, String)>,
) -> StoreResult<Claim> {
    let now = utc_now();
    let (state, response_status, response_body) = match answer {
        Some((status, body)) => ("completed", Some(status), Some(body)),
        None => ("in_progress", None, None),
    };
    let row = IdempotencyRow {
        merchant_id: merchant_id.to_owned(),
        scope: scope.to_owned(),
        idempotency_key: key.to_owned(),
        request_sha256: request_sha256.to_owned(),
        state: state.to_owned(),
        response_status,
        response_body,
        created_at: now,
        updated_at: now,
    };
    if store::insert_if_absent(tx, &row).await? {
        return Ok(Claim::New);
    }
    let Some(existing) = store::find(tx, merchant_id, scope, key).await? else {
        // Inserted and removed between the two statements: nothing of it
        // committed, so the key is effectively free; the caller retries.
        return Ok(Claim::InProgress);
    };
    if existing.request_sha256 != request_sha256 {
        return Ok(Claim::Mismatch);
    }
    match (
        existing.state.as_str(),
        existing.response_status,
        existing.response_body,
    ) {
        ("completed", Some(status), Some(body)) => Ok(Claim::Replay {
            status: u16::try_from(status).unwrap_or(500),
            body,
        }),
        _ => Ok(Claim::InProgress),
    }
}

/// Records the answer to replay; call in the transaction that claimed.
pub async fn complete(
    tx: &mut Tx<'_>,
    merchant_id: &str,
    scope: &str,
    key: &str,
    status: u16,
    body: &str,
) -> StoreResult<()> {
    store::complete(
        tx,
        (merchant_id, scope, key),
        i32::from(status),
        body,
        utc_now(),
    )
    .await
}
