//! The tamper-evident audit chain (decisions §11): per merchant, each event's
//! hash is SHA-256 over a canonical encoding of its fields and the previous
//! event's hash. Editing or deleting any row breaks verification from there
//! (see [`verify`]).

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::models::{AuditEventRow, AuditHeadRow};
use crate::store::audit as store;
use crate::types::utc_now;
use crate::vocabulary::MerchantId;
use crate::{StoreError, StoreResult, Tx};

mod verify;
mod walk;

pub use verify::{
    all_chains, broken_chains, verify, verify_full, Verification, RESCAN_ROWS_PER_CALL,
    VERIFY_PAGE_ROWS,
};

/// The `prev_hash` of a chain's first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Names the encoding, so a future change of it cannot verify by accident.
const ENCODING: &str = "tern-audit-v1";

/// Who did it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditActor {
    ApiKey(String),
    User(String),
    /// An operator at the command line.
    Operator,
    /// An operator in the console (`/console`), signed in with the
    /// operator token.
    Console,
    /// Tern itself (actors, timers).
    System,
}

impl AuditActor {
    fn parts(&self) -> (&'static str, &str) {
        match self {
            AuditActor::ApiKey(id) => ("api_key", id),
            AuditActor::User(id) => ("user", id),
            AuditActor::Operator => ("operator", "cli"),
            AuditActor::Console => ("operator", "console"),
            AuditActor::System => ("system", "tern"),
        }
    }
}

/// An event to append.
#[derive(Clone, Debug)]
pub struct AuditRecord {
    pub merchant_id: MerchantId,
    pub actor: AuditActor,
    /// Dotted, past tense: `api_key.created`, `settlement.status_changed`.
    pub action: &'static str,
    pub resource_type: &'static str,
    pub resource_id: String,
    pub request_id: String,
    pub data: Value,
}

/// Starts a merchant's chain; call in the transaction that creates it.
pub async fn open_chain(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<()> {
    store::insert_head(
        tx,
        &AuditHeadRow {
            merchant_id: merchant_id.to_owned(),
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
            updated_at: utc_now(),
        },
    )
    .await
}

/// Appends to the merchant's chain inside the caller's transaction, so the
/// event commits with the change it records. Inside a group commit the
/// event waits for the end of the batch, which chains every event of the
/// batch at once (see [`crate::deferred`]); elsewhere it is chained now.
pub async fn append(tx: &mut Tx<'_>, record: AuditRecord) -> StoreResult<()> {
    let event = unchained(record);
    match tx.deferred() {
        Some(deferred) => deferred.audit(event),
        None => chain(tx, vec![event]).await?,
    }
    Ok(())
}

/// The event's own fields; its place in the chain (seq and hashes) is
/// filled in by [`chain`].
fn unchained(record: AuditRecord) -> AuditEventRow {
    let (actor_type, actor_id) = record.actor.parts();
    AuditEventRow {
        merchant_id: record.merchant_id,
        seq: 0,
        id: format!("aud_{}", uuid::Uuid::now_v7().simple()),
        occurred_at: utc_now(),
        actor_type: actor_type.to_owned(),
        actor_id: actor_id.to_owned(),
        action: record.action.to_owned(),
        resource_type: record.resource_type.to_owned(),
        resource_id: record.resource_id,
        request_id: record.request_id,
        data: record.data.to_string(),
        prev_hash: String::new(),
        hash: String::new(),
    }
}

/// Links `events` onto their merchants' chains in the order given: one
/// locked head read per merchant, the events inserted together, one head
/// update per merchant. Heads are locked in merchant id order, so two
/// transactions chaining for the same merchants cannot deadlock.
pub(crate) async fn chain(tx: &mut Tx<'_>, events: Vec<AuditEventRow>) -> StoreResult<()> {
    let mut chains: BTreeMap<MerchantId, Vec<AuditEventRow>> = BTreeMap::new();
    for event in events {
        chains
            .entry(event.merchant_id.clone())
            .or_default()
            .push(event);
    }
    let mut linked = Vec::new();
    let mut heads = Vec::with_capacity(chains.len());
    for (merchant_id, events) in chains {
        let head = store::lock_head(tx, &merchant_id).await?.ok_or_else(|| {
            StoreError::Conflict(format!("no audit chain for merchant {merchant_id}"))
        })?;
        let (mut seq, mut hash) = (head.seq, head.hash);
        let mut updated_at = head.updated_at;
        for mut event in events {
            seq += 1;
            event.seq = seq;
            event.prev_hash = std::mem::take(&mut hash);
            event.hash = hash_of(&event);
            hash.clone_from(&event.hash);
            updated_at = event.occurred_at;
            linked.push(event);
        }
        heads.push(AuditHeadRow {
            merchant_id,
            seq,
            hash,
            updated_at,
        });
    }
    store::insert_events(tx, &linked).await?;
    for head in &heads {
        store::update_head(tx, head).await?;
    }
    Ok(())
}

fn timestamp(at: NaiveDateTime) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// SHA-256 over the canonical encoding: a JSON array of every field but the
/// hash itself, in a fixed order.
pub fn hash_of(row: &AuditEventRow) -> String {
    let canonical = json!([
        ENCODING,
        row.merchant_id,
        row.seq,
        row.id,
        timestamp(row.occurred_at),
        row.actor_type,
        row.actor_id,
        row.action,
        row.resource_type,
        row.resource_id,
        row.request_id,
        row.data,
        row.prev_hash,
    ]);
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> AuditEventRow {
        AuditEventRow {
            merchant_id: MerchantId::new("m"),
            seq: 1,
            id: "aud_1".into(),
            occurred_at: chrono::DateTime::from_timestamp(1_700_000_000, 123_000)
                .expect("time")
                .naive_utc(),
            actor_type: "api_key".into(),
            actor_id: "k".into(),
            action: "api_key.created".into(),
            resource_type: "api_key".into(),
            resource_id: "k2".into(),
            request_id: "r".into(),
            data: "{}".into(),
            prev_hash: GENESIS_HASH.into(),
            hash: String::new(),
        }
    }

    #[test]
    fn every_field_is_covered_by_the_hash() {
        let base = hash_of(&row());
        assert_eq!(base.len(), 64);
        let edits: [fn(&mut AuditEventRow); 8] = [
            |r| r.seq = 2,
            |r| r.actor_id = "other".into(),
            |r| r.action = "api_key.revoked".into(),
            |r| r.resource_id = "x".into(),
            |r| r.request_id = "r2".into(),
            |r| r.data = "{\"a\":1}".into(),
            |r| r.prev_hash = "1".repeat(64),
            |r| r.occurred_at += chrono::Duration::microseconds(1),
        ];
        for edit in edits {
            let mut edited = row();
            edit(&mut edited);
            assert_ne!(hash_of(&edited), base);
        }
    }
}
