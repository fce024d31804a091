//! Verifying a merchant's chain (decisions §11), truthfully and cheaply.
//!
//! Truthfully: a verification reads the head and every page of events in
//! one snapshot ([`crate::snapshot`]). Read statement by statement, a batch
//! committing between the head and the pages made an untouched chain look
//! longer than its head, so it was reported broken.
//!
//! Cheaply: each merchant has a checkpoint, the last event a valid
//! verification reached. A call walks only the events after it, linking
//! the first to the checkpoint's hash, so it costs what was appended since.
//! The checkpoint cannot hide tampering:
//! - its event is re-checked on every call: it must still exist, still
//!   carry the recorded hash, and still hash to it;
//! - every call also re-verifies a window of at most [`RESCAN_ROWS_PER_CALL`]
//!   older events, continuing where the previous call's window ended and
//!   starting again at the first event once it reaches the checkpoint, so
//!   successive calls rescan the whole chain: an event edited or deleted
//!   before the checkpoint is reported within
//!   ceil(checkpoint seq / [`RESCAN_ROWS_PER_CALL`]) + 1 calls;
//! - a call that finds a broken event moves neither the checkpoint nor the
//!   rescan, so every later call reports it again until it is repaired
//!   (other tampering further back then shows in the following pass).
//!
//! The first call on a chain has no checkpoint and walks it whole; so does
//! [`verify_full`], which trusts and moves no checkpoint.
//!
//! What no hash chain kept in the same database can catch: someone able to
//! write it may rewrite every event from the edited one to the head, with
//! fresh hashes, the head and the checkpoint with them. A client that
//! records `head_hash` elsewhere detects that, as the old head then no
//! longer appears in the chain.

use crate::audit::walk::{rescan_next, rescan_window, Walk};
use crate::audit::GENESIS_HASH;
use crate::db::{Db, Tx};
use crate::models::AuditCheckpointRow;
use crate::store::audit as events;
use crate::store::audit_checkpoints as checkpoints;
use crate::types::utc_now;
use crate::vocabulary::MerchantId;
use crate::{snapshot, StoreResult};

/// Events read per query while verifying.
pub const VERIFY_PAGE_ROWS: i64 = 1_000;
/// Older events (before the checkpoint) each call re-verifies.
pub const RESCAN_ROWS_PER_CALL: i64 = 2_000;
/// Merchants listed per query by [`all_chains`].
const CHAINS_PAGE: i64 = 500;

/// The outcome of verifying one chain.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Verification {
    pub valid: bool,
    /// Events this verification examined (hashed again): those after the
    /// checkpoint, the checkpoint's own event, and the rescanned ones.
    pub checked: i64,
    /// The chain's last event, as its head records it.
    pub head_seq: i64,
    pub head_hash: String,
    /// The first event found missing, edited or out of line; `None` when valid.
    pub first_invalid_seq: Option<i64>,
    /// The checkpoint this verification continued from (0: the first event).
    pub checkpoint_seq: i64,
    /// Events after the checkpoint examined.
    pub checked_since_checkpoint: i64,
    /// The older events re-verified, first and last seq.
    pub rescanned: Option<(i64, i64)>,
}

/// The checkpoint a valid verification leaves, and the version it read
/// (`None`: there was none).
struct Advance {
    row: AuditCheckpointRow,
    read_version: Option<i64>,
}

/// Verifies the merchant's chain from its checkpoint and, when valid,
/// moves the checkpoint to the head. The walk reads one snapshot through a
/// pooled connection; the checkpoint is written afterwards through the
/// group committer, compare-and-set on its version.
pub async fn verify(db: &Db, merchant_id: &MerchantId) -> StoreResult<Verification> {
    let (verification, advance) = {
        let mut pooled = db.get().await?;
        let tx = &mut pooled.tx();
        snapshot::begin(tx).await?;
        let read = from_checkpoint(tx, merchant_id).await;
        snapshot::end(tx, read).await?
    };
    if let Some(Advance { row, read_version }) = advance {
        // Losing the race to a concurrent verification is fine: the
        // checkpoint it wrote is as sound as this one.
        let _moved = db
            .write(move |tx| {
                Box::pin(async move {
                    match read_version {
                        None => checkpoints::insert_first(tx, &row).await,
                        Some(version) => checkpoints::advance(tx, &row, version).await,
                    }
                })
            })
            .await?;
    }
    Ok(verification)
}

/// Verifies the whole chain from its first event in one snapshot, trusting
/// no checkpoint and moving none: the operator's check (`tern audit verify`).
pub async fn verify_full(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<Verification> {
    snapshot::begin(tx).await?;
    let read = from_genesis(tx, merchant_id).await;
    snapshot::end(tx, read).await
}

/// Every merchant with an audit chain, in id order, listed
/// [`CHAINS_PAGE`] at a time.
pub async fn all_chains(tx: &mut Tx<'_>) -> StoreResult<Vec<MerchantId>> {
    let mut merchants: Vec<MerchantId> = Vec::new();
    loop {
        let after = merchants.last().map_or("", MerchantId::as_str);
        let page = events::chains_after(tx, after, CHAINS_PAGE).await?;
        if page.is_empty() {
            return Ok(merchants);
        }
        merchants.extend(page);
    }
}

/// The chains of `merchants` that do not verify from their first event
/// ([`verify_full`]), with what was found: what `tern audit verify` reports
/// and the tests' teardown asserts away.
pub async fn broken_chains(
    tx: &mut Tx<'_>,
    merchants: &[MerchantId],
) -> StoreResult<Vec<(MerchantId, Verification)>> {
    let mut broken = Vec::new();
    for merchant_id in merchants {
        let verification = verify_full(tx, merchant_id).await?;
        if !verification.valid {
            broken.push((merchant_id.clone(), verification));
        }
    }
    Ok(broken)
}

async fn from_genesis(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<Verification> {
    let (head_seq, head_hash) = head(tx, merchant_id).await?;
    let mut walk = Walk::from_genesis();
    walk_after(tx, merchant_id, &mut walk).await?;
    walk.end_at(head_seq, &head_hash);
    Ok(Verification {
        valid: walk.broken_at().is_none(),
        checked: walk.checked(),
        head_seq,
        head_hash,
        first_invalid_seq: walk.broken_at(),
        checkpoint_seq: 0,
        checked_since_checkpoint: walk.checked(),
        rescanned: None,
    })
}

async fn head(tx: &mut Tx<'_>, merchant_id: &MerchantId) -> StoreResult<(i64, String)> {
    Ok(events::find_head(tx, merchant_id)
        .await?
        .map(|head| (head.seq, head.hash))
        .unwrap_or((0, GENESIS_HASH.to_owned())))
}

/// The verification proper, inside the snapshot.
async fn from_checkpoint(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> StoreResult<(Verification, Option<Advance>)> {
    let (head_seq, head_hash) = head(tx, merchant_id).await?;
    let checkpoint = checkpoints::find(tx, merchant_id).await?;
    let (checkpoint_seq, checkpoint_hash, rescan_seq) = match &checkpoint {
        Some(row) => (row.seq, row.hash.clone(), row.rescan_seq),
        None => (0, GENESIS_HASH.to_owned(), 0),
    };

    let window = rescan_window(rescan_seq, checkpoint_seq, RESCAN_ROWS_PER_CALL);
    let rescan = match window {
        Some((anchor, through)) => {
            let mut walk = rescan(tx, merchant_id, anchor, through).await?;
            if through == checkpoint_seq {
                walk.end_at(checkpoint_seq, &checkpoint_hash);
            }
            Some(walk)
        }
        None => None,
    };
    // The checkpoint's event, unless the window just ended there.
    let reached_checkpoint = window.is_some_and(|(_, through)| through == checkpoint_seq);
    let at_checkpoint = if checkpoint_seq > 0 && !reached_checkpoint {
        Some(recheck(tx, merchant_id, checkpoint_seq, &checkpoint_hash).await?)
    } else {
        None
    };

    let mut forward = Walk::after(checkpoint_seq, checkpoint_hash);
    walk_after(tx, merchant_id, &mut forward).await?;
    forward.end_at(head_seq, &head_hash);

    let walks = [rescan.as_ref(), at_checkpoint.as_ref(), Some(&forward)];
    let first_invalid_seq = walks.iter().flatten().filter_map(|w| w.broken_at()).min();
    let checked = walks.iter().flatten().map(|w| w.checked()).sum();
    let verification = Verification {
        valid: first_invalid_seq.is_none(),
        checked,
        head_seq,
        head_hash: head_hash.clone(),
        first_invalid_seq,
        checkpoint_seq,
        checked_since_checkpoint: forward.checked(),
        rescanned: window.map(|(anchor, through)| (anchor.max(1), through)),
    };
    let advance = match first_invalid_seq {
        Some(_) => None,
        // An empty chain has nothing to remember.
        None if head_seq == 0 => None,
        None => Some(Advance {
            row: AuditCheckpointRow {
                merchant_id: merchant_id.to_owned(),
                seq: head_seq,
                hash: head_hash,
                rescan_seq: window.map_or(0, |(_, through)| rescan_next(through, checkpoint_seq)),
                version: 1,
                verified_at: utc_now(),
            },
            read_version: checkpoint.map(|row| row.version),
        }),
    };
    Ok((verification, advance))
}

/// Walks every event after the walk's position, page by page, until the
/// chain ends or breaks.
async fn walk_after(tx: &mut Tx<'_>, merchant_id: &MerchantId, walk: &mut Walk) -> StoreResult<()> {
    loop {
        let page = events::events_after(tx, merchant_id, walk.last_seq(), VERIFY_PAGE_ROWS).await?;
        if page.is_empty() {
            return Ok(());
        }
        for row in &page {
            if !walk.step(row) {
                return Ok(());
            }
        }
    }
}

/// Re-verifies the events after `anchor` (an event itself re-checked, or 0
/// for the chain's start) through `through`.
async fn rescan(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    anchor: i64,
    through: i64,
) -> StoreResult<Walk> {
    let mut walk = if anchor == 0 {
        Walk::from_genesis()
    } else {
        match events::event(tx, merchant_id, anchor).await? {
            Some(row) => Walk::anchored(&row),
            None => Walk::broken(anchor),
        }
    };
    while walk.broken_at().is_none() && walk.last_seq() < through {
        let page =
            events::events_between(tx, merchant_id, walk.last_seq(), through, VERIFY_PAGE_ROWS)
                .await?;
        if page.is_empty() {
            break;
        }
        for row in &page {
            if !walk.step(row) {
                break;
            }
        }
    }
    if walk.broken_at().is_none() && walk.last_seq() < through {
        // Events missing at the window's end.
        walk.end_at(through, "");
    }
    Ok(walk)
}

/// Re-checks the checkpoint's event: still there, still carrying the
/// recorded hash, and still hashing to it.
async fn recheck(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
    seq: i64,
    hash: &str,
) -> StoreResult<Walk> {
    Ok(match events::event(tx, merchant_id, seq).await? {
        Some(row) => {
            let mut walk = Walk::anchored(&row);
            walk.end_at(seq, hash);
            walk
        }
        None => Walk::broken(seq),
    })
}
