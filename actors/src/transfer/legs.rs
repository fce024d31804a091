//! A transfer's leg keys (decisions §7): the settlement keys of its legs,
//! in a form no merchant's Idempotency-Key can take.
//!
//! A leg is a settlement of the merchant, and settlements are keyed by
//! (merchant, key). If a leg's key had the form of an Idempotency-Key (a
//! UUID v4, as before this module), the merchant could create a settlement
//! of its own under it from the moment the transfer's 201 showed it, and the
//! leg could never be created. So a leg's key is `<transfer id>.leg1` or
//! `.leg2`: derived from the transfer, readable through
//! `GET /v1/settlements/{key}`, and refused as an Idempotency-Key because it
//! is not a UUID.
//!
//! Transfers created before keep their UUID leg keys: their provider
//! idempotency keys derive from them, so renaming them could execute a leg
//! twice. Their legs not yet created are held in memory as
//! [`LegacyLegKeys`], read at start, which the edge refuses as merchants'
//! keys; a leg's row, once created, refuses its key by itself. A key taken
//! anyway (before the upgrade) becomes a refused leg ([`super::refusal`]).
//! No new transfer adds to the set, so it only goes stale by legs being
//! created or transfers ending, after which refusing their keys is still
//! right.

use std::collections::{HashMap, HashSet};
use std::sync::{PoisonError, RwLock};

use tern_schema::store::transfers::{self, LegKeys};
use tern_schema::vocabulary::{MerchantId, SettlementKey, TransferId};
use tern_schema::{Db, StoreError};

use super::machine::{Leg, LegStatus};
use crate::runtime::cluster::pin_routes;
use crate::runtime::{paged, EntityKind, RuntimeResult};
use crate::settlement::record::entity_id as settlement_entity_id;
use crate::settlement::SettlementKind;

/// Most transfers read for [`LegacyLegKeys`] and [`pin_legacy_legs`]:
/// in-flight transfers made before leg keys took their own form, a set
/// that only shrinks.
pub const LEGACY_TRANSFERS_READ_MAX: i64 = 1_000_000;

/// Between the transfer id and the leg in a leg key: never in a UUID, a
/// transfer id, or a merchant id.
const SEPARATOR: char = '.';
/// Transfer ids are `tr_` and 32 hex digits (a simple UUID v7).
const TRANSFER_ID_HEX_DIGITS: usize = 32;

fn suffix(leg: Leg) -> &'static str {
    match leg {
        Leg::One => "leg1",
        Leg::Two => "leg2",
    }
}

/// The settlement key of the transfer's `leg`.
pub fn leg_key(transfer_id: &TransferId, leg: Leg) -> SettlementKey {
    SettlementKey::new(format!("{transfer_id}{SEPARATOR}{}", suffix(leg)))
}

/// The transfer and leg a key in the leg form names; `None` for any other
/// key (a merchant's UUID, a legacy leg key).
pub fn parse_leg_key(key: &str) -> Option<(&str, Leg)> {
    let (transfer_id, leg) = key.rsplit_once(SEPARATOR)?;
    let leg = [Leg::One, Leg::Two]
        .into_iter()
        .find(|candidate| suffix(*candidate) == leg)?;
    let hex = transfer_id.strip_prefix(TransferId::PREFIX)?;
    let well_formed =
        hex.len() == TRANSFER_ID_HEX_DIGITS && hex.bytes().all(|b| b.is_ascii_hexdigit());
    well_formed.then_some((transfer_id, leg))
}

/// Whether `key` is the leg key of one of the merchant's transfers, in the
/// leg form. Another merchant's transfer is no answer: its keys are not this
/// merchant's to know of.
pub async fn is_leg_key_of(
    db: &Db,
    merchant_id: &MerchantId,
    key: &SettlementKey,
) -> Result<bool, StoreError> {
    let Some((transfer_id, _)) = parse_leg_key(key.as_str()) else {
        return Ok(false);
    };
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    let transfer = transfers::find(&mut tx, &TransferId::new(transfer_id)).await?;
    Ok(transfer.is_some_and(|row| row.merchant_id == *merchant_id))
}

/// The UUID-form keys of legs not yet created, of transfers made before
/// leg keys took their own form, by merchant.
#[derive(Debug, Default)]
pub struct LegacyLegKeys {
    keys: RwLock<HashMap<MerchantId, HashSet<SettlementKey>>>,
}

impl LegacyLegKeys {
    /// Whether `key` is such a leg's key of the merchant's.
    pub fn contains(&self, merchant_id: &MerchantId, key: &str) -> bool {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        keys.get(merchant_id).is_some_and(|held| held.contains(key))
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        keys.values().map(HashSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the set from the transfers with work left (at start).
    pub async fn refresh(&self, db: &Db) -> RuntimeResult<()> {
        let mut pooled = db.get().await?;
        let rows = paged(
            LEGACY_TRANSFERS_READ_MAX,
            async |after: Option<&LegKeys>, page| {
                let after = after.map_or("", |row| row.id.as_str());
                Ok(
                    transfers::legacy_leg_keys_with_work_left(&mut pooled.tx(), after, page)
                        .await?,
                )
            },
        )
        .await?;
        if rows.len() as i64 >= LEGACY_TRANSFERS_READ_MAX {
            tracing::warn!(
                read = rows.len(),
                "more transfers in flight than read for legacy leg keys"
            );
        }
        let mut keys: HashMap<MerchantId, HashSet<SettlementKey>> = HashMap::new();
        for (merchant_id, key) in rows.iter().flat_map(legacy_keys) {
            keys.entry(merchant_id).or_default().insert(key);
        }
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys;
        Ok(())
    }
}

/// Places the legs of in-flight transfers whose keys are not in the leg
/// form with their transfer, where several nodes share the database: a
/// UUID key names no transfer, and the saga talks to its legs in memory.
/// Pinned once, by the first node started after the upgrade; nodes
/// started later read the same routes. Answers how many legs were pinned.
pub async fn pin_legacy_legs(db: &Db) -> RuntimeResult<usize> {
    let mut pooled = db.get().await?;
    let rows = paged(
        LEGACY_TRANSFERS_READ_MAX,
        async |after: Option<&LegKeys>, page| {
            let after = after.map_or("", |row| row.id.as_str());
            Ok(transfers::legacy_leg_keys_with_work_left(&mut pooled.tx(), after, page).await?)
        },
    )
    .await?;
    drop(pooled);
    if rows.len() as i64 >= LEGACY_TRANSFERS_READ_MAX {
        // Pinning part of them could let nodes started at other times
        // place a leg differently.
        return Err(crate::runtime::RuntimeError::Unavailable(format!(
            "more than {LEGACY_TRANSFERS_READ_MAX} transfers in flight: their legacy legs cannot all be placed"
        )));
    }
    let routes: Vec<(String, String)> = rows
        .iter()
        .flat_map(|row| {
            [&row.leg1_key, &row.leg2_key]
                .into_iter()
                .filter(|key| parse_leg_key(key.as_str()).is_none())
                .map(|key| {
                    (
                        settlement_entity_id(&row.merchant_id, key),
                        row.id.to_string(),
                    )
                })
        })
        .collect();
    pin_routes(db, SettlementKind::NAME, &routes).await
}

/// The transfer's legs not created yet whose keys are not in the leg form.
fn legacy_keys(row: &LegKeys) -> Vec<(MerchantId, SettlementKey)> {
    let not_started = LegStatus::NotStarted;
    [
        (&row.leg1_key, &row.leg1_status),
        (&row.leg2_key, &row.leg2_status),
    ]
    .into_iter()
    .filter(|(key, status)| **status == not_started && parse_leg_key(key.as_str()).is_none())
    .map(|(key, _)| (row.merchant_id.clone(), key.clone()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leg_key_names_its_transfer_and_leg() {
        let id = TransferId::generate();
        for leg in [Leg::One, Leg::Two] {
            let key = leg_key(&id, leg);
            assert_eq!(key.as_str(), format!("{id}.leg{}", leg.index()));
            assert_eq!(parse_leg_key(key.as_str()), Some((id.as_str(), leg)));
            assert!(
                uuid::Uuid::parse_str(key.as_str()).is_err(),
                "{key} can never be an Idempotency-Key"
            );
        }
    }

    #[test]
    fn other_keys_are_not_leg_keys() {
        let id = TransferId::generate();
        for key in [
            uuid::Uuid::new_v4().to_string(),
            id.to_string(),
            format!("{id}.leg3"),
            format!("{id}.leg1.leg1"),
            "tr_xyz.leg1".to_owned(),
            format!("{}.leg2", uuid::Uuid::new_v4()),
            format!("qt_{}.leg1", &id.as_str()[TransferId::PREFIX.len()..]),
            String::new(),
        ] {
            assert_eq!(parse_leg_key(&key), None, "{key}");
        }
    }

    #[test]
    fn only_legacy_legs_not_yet_created_are_held() {
        let id = TransferId::generate();
        let legacy = uuid::Uuid::new_v4().to_string();
        let row = |leg1_key: &str, leg1_status: &str, leg2_key: &str| LegKeys {
            id: id.clone(),
            merchant_id: MerchantId::new("m"),
            leg1_key: SettlementKey::new(leg1_key),
            leg1_status: leg1_status.parse().expect("a leg status"),
            leg2_key: SettlementKey::new(leg2_key),
            leg2_status: LegStatus::NotStarted,
        };
        let pair = |key: &str| (MerchantId::new("m"), SettlementKey::new(key));
        let both = row(&legacy, "not_started", "l2");
        assert_eq!(legacy_keys(&both), [pair(&legacy), pair("l2")]);
        let started = row(&legacy, "in_flight", "l2");
        assert_eq!(legacy_keys(&started), [pair("l2")]);
        let new_form = row(
            leg_key(&id, Leg::One).as_str(),
            "not_started",
            leg_key(&id, Leg::Two).as_str(),
        );
        assert_eq!(
            legacy_keys(&new_form),
            Vec::<(MerchantId, SettlementKey)>::new()
        );
    }
}
