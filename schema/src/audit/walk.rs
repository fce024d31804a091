//! Judging a stretch of an audit chain, without I/O: the rules every
//! verification applies to the rows it reads, and which older rows one
//! call re-verifies.

use super::{hash_of, GENESIS_HASH};
use crate::models::AuditEventRow;

/// A walk along consecutive events of one chain: each must come next in
/// seq, name the previous event's hash as its `prev_hash`, and hash to its
/// own `hash`. The first event that does not is where the chain breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Walk {
    last_seq: i64,
    last_hash: String,
    checked: i64,
    broken_at: Option<i64>,
}

impl Walk {
    /// A walk from the start of a chain.
    pub(crate) fn from_genesis() -> Walk {
        Walk::after(0, GENESIS_HASH.to_owned())
    }

    /// A walk continuing after event `seq`, trusted to hash to `hash`.
    pub(crate) fn after(seq: i64, hash: String) -> Walk {
        Walk {
            last_seq: seq,
            last_hash: hash,
            checked: 0,
            broken_at: None,
        }
    }

    /// A walk continuing after `anchor`, whose own hash is checked (it
    /// counts as checked) but not its link to the event before it.
    pub(crate) fn anchored(anchor: &AuditEventRow) -> Walk {
        let mut walk = Walk::after(anchor.seq, anchor.hash.clone());
        walk.checked = 1;
        if hash_of(anchor) != anchor.hash {
            walk.broken_at = Some(anchor.seq);
        }
        walk
    }

    /// A walk that found `seq` missing or altered before reading any row.
    pub(crate) fn broken(seq: i64) -> Walk {
        Walk {
            last_seq: seq - 1,
            last_hash: String::new(),
            checked: 0,
            broken_at: Some(seq),
        }
    }

    /// Takes the next row read; answers whether the walk goes on.
    pub(crate) fn step(&mut self, row: &AuditEventRow) -> bool {
        if self.broken_at.is_some() {
            return false;
        }
        self.checked += 1;
        let expected_seq = self.last_seq + 1;
        if row.seq != expected_seq {
            // Rows are read in seq order: a higher seq means `expected_seq`
            // is missing.
            self.broken_at = Some(expected_seq.min(row.seq));
            return false;
        }
        if row.prev_hash != self.last_hash || hash_of(row) != row.hash {
            self.broken_at = Some(row.seq);
            return false;
        }
        self.last_seq = row.seq;
        self.last_hash.clone_from(&row.hash);
        true
    }

    /// Ends a walk that had to reach event `seq` with hash `hash` (a
    /// checkpoint, or the chain's head): events missing before it, events
    /// beyond it, or another hash at it break the walk.
    pub(crate) fn end_at(&mut self, seq: i64, hash: &str) {
        if self.broken_at.is_some() {
            return;
        }
        self.broken_at = if self.last_seq < seq {
            Some(self.last_seq + 1)
        } else if self.last_seq > seq {
            Some(seq + 1)
        } else if self.last_hash != hash {
            Some(seq.max(1))
        } else {
            None
        };
    }

    pub(crate) fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// Events examined, the one that broke the walk included.
    pub(crate) fn checked(&self) -> i64 {
        self.checked
    }

    /// The first event found missing or altered.
    pub(crate) fn broken_at(&self) -> Option<i64> {
        self.broken_at
    }
}

/// The older events one call re-verifies, as (anchor, through): the event
/// the rescan last reached (`rescan_seq`, 0 for none: the pass starts at
/// the first event) and at most `rows` events after it, never past the
/// checkpoint. `None` when there is no checkpoint yet.
pub(crate) fn rescan_window(rescan_seq: i64, checkpoint_seq: i64, rows: i64) -> Option<(i64, i64)> {
    if checkpoint_seq < 1 || rows < 1 {
        return None;
    }
    // A position at or past the checkpoint (a finished pass, or a row
    // edited by hand) starts a new pass.
    let anchor = if (0..checkpoint_seq).contains(&rescan_seq) {
        rescan_seq
    } else {
        0
    };
    Some((anchor, checkpoint_seq.min(anchor.saturating_add(rows))))
}

/// Where the rescan stands after a valid call re-verified through
/// `through`: a pass that reached the checkpoint starts again at the first
/// event.
pub(crate) fn rescan_next(through: i64, checkpoint_seq: i64) -> i64 {
    if through >= checkpoint_seq {
        0
    } else {
        through
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::MerchantId;

    /// A sound chain of `n` events.
    fn chain(n: i64) -> Vec<AuditEventRow> {
        let mut rows = Vec::new();
        let mut prev = GENESIS_HASH.to_owned();
        for seq in 1..=n {
            let mut row = AuditEventRow {
                merchant_id: MerchantId::new("m"),
                seq,
                id: format!("aud_{seq}"),
                occurred_at: chrono::DateTime::from_timestamp(1_700_000_000 + seq, 0)
                    .expect("time")
                    .naive_utc(),
                actor_type: "system".into(),
                actor_id: "tern".into(),
                action: "settlement.created".into(),
                resource_type: "settlement".into(),
                resource_id: format!("s{seq}"),
                request_id: format!("r{seq}"),
                data: "{}".into(),
                prev_hash: prev.clone(),
                hash: String::new(),
            };
            row.hash = hash_of(&row);
            prev.clone_from(&row.hash);
            rows.push(row);
        }
        rows
    }

    fn walk(mut walk: Walk, rows: &[AuditEventRow]) -> Walk {
        for row in rows {
            if !walk.step(row) {
                break;
            }
        }
        walk
    }

    #[test]
    fn walks_find_the_first_missing_or_altered_event() {
        type Tamper = fn(&mut Vec<AuditEventRow>);
        let cases: [(&str, Tamper, Option<i64>, i64); 7] = [
            ("untouched", |_| {}, None, 5),
            (
                "data edited",
                |rows| rows[2].data = "{\"x\":1}".into(),
                Some(3),
                3,
            ),
            (
                "hash edited",
                |rows| rows[1].hash = "f".repeat(64),
                Some(2),
                2,
            ),
            ("row deleted", |rows| drop(rows.remove(3)), Some(4), 4),
            ("first deleted", |rows| drop(rows.remove(0)), Some(1), 1),
            (
                "edited and rehashed",
                |rows| {
                    rows[1].data = "{\"x\":1}".into();
                    rows[1].hash = hash_of(&rows[1]);
                },
                Some(3),
                3,
            ),
            ("last deleted", |rows| drop(rows.pop()), None, 4),
        ];
        for (name, tamper, broken_at, checked) in cases {
            let mut rows = chain(5);
            tamper(&mut rows);
            let walked = walk(Walk::from_genesis(), &rows);
            assert_eq!(
                (walked.broken_at(), walked.checked()),
                (broken_at, checked),
                "{name}"
            );
        }
    }

    #[test]
    fn a_walk_must_end_exactly_at_its_target() {
        let rows = chain(5);
        let head = rows[4].hash.clone();
        let cases: [(&str, usize, i64, &str, Option<i64>); 5] = [
            ("reaches the head", 5, 5, &head, None),
            ("last rows missing", 3, 5, &head, Some(4)),
            ("rows beyond the head", 5, 4, &rows[3].hash, Some(5)),
            ("another hash at the head", 5, 5, GENESIS_HASH, Some(5)),
            ("empty chain", 0, 0, GENESIS_HASH, None),
        ];
        for (name, read, seq, hash, broken_at) in cases {
            let mut walked = walk(Walk::from_genesis(), &rows[..read]);
            walked.end_at(seq, hash);
            assert_eq!(walked.broken_at(), broken_at, "{name}");
        }
    }

    #[test]
    fn walks_continue_from_a_checkpoint_or_an_anchor() {
        let rows = chain(6);
        let from_checkpoint = walk(Walk::after(3, rows[2].hash.clone()), &rows[3..]);
        assert_eq!(
            (
                from_checkpoint.broken_at(),
                from_checkpoint.checked(),
                from_checkpoint.last_seq()
            ),
            (None, 3, 6)
        );
        let wrong_checkpoint_hash = walk(Walk::after(3, rows[1].hash.clone()), &rows[3..]);
        assert_eq!(wrong_checkpoint_hash.broken_at(), Some(4));

        let anchored = walk(Walk::anchored(&rows[1]), &rows[2..4]);
        assert_eq!(
            (
                anchored.broken_at(),
                anchored.checked(),
                anchored.last_seq()
            ),
            (None, 3, 4)
        );
        let mut edited_anchor = rows[1].clone();
        edited_anchor.data = "{\"x\":1}".into();
        let anchored = walk(Walk::anchored(&edited_anchor), &rows[2..4]);
        assert_eq!((anchored.broken_at(), anchored.checked()), (Some(2), 1));
        assert_eq!(Walk::broken(7).broken_at(), Some(7));
    }

    #[test]
    fn the_rescan_sweeps_up_to_the_checkpoint_then_starts_again() {
        /// (rescan_seq, checkpoint_seq, rows) -> window, then the next position.
        type Case = (i64, i64, i64, Option<(i64, i64)>, i64);
        let cases: [Case; 7] = [
            (0, 0, 10, None, 0),
            (0, 25, 10, Some((0, 10)), 10),
            (10, 25, 10, Some((10, 20)), 20),
            (20, 25, 10, Some((20, 25)), 0),
            (25, 25, 10, Some((0, 10)), 10),
            (40, 25, 10, Some((0, 10)), 10),
            (-3, 25, 10, Some((0, 10)), 10),
        ];
        for (rescan_seq, checkpoint_seq, rows, window, next) in cases {
            let got = rescan_window(rescan_seq, checkpoint_seq, rows);
            assert_eq!(got, window, "{rescan_seq} {checkpoint_seq}");
            if let Some((_, through)) = got {
                assert_eq!(rescan_next(through, checkpoint_seq), next);
            }
        }
    }
}
