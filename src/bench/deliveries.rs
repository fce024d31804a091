//! The figures of one phase's deliveries, from the receiver's records:
//! counts, per-transfer order, the receipt window and the lag.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::receiver::Record;
use super::Percentiles;

/// The events of a transfer that succeeds, in the order they happen.
pub const SUCCEEDED_ORDER: [&str; 5] = [
    "transfer.pending",
    "transfer.leg1_in_flight",
    "transfer.leg1_succeeded",
    "transfer.leg2_in_flight",
    "transfer.succeeded",
];

#[derive(Debug, Default)]
pub struct Tally {
    pub received: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub bad_signatures: u64,
    /// Bodies that are not an event with a type, a transfer and a time.
    pub malformed: u64,
    /// Transfers at least one of whose events came after a later one.
    pub order_violations: u64,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    /// Of each webhook-id's first receipt, in microseconds.
    pub lag_us: Percentiles,
}

impl Tally {
    /// `records` in arrival order; `lag_us` answers a delivery's lag, or
    /// `None` when it cannot be told.
    pub fn of(records: &[Record], lag_us: impl Fn(&Record) -> Option<u64>) -> Tally {
        let mut seen = HashSet::new();
        let mut lags = Vec::with_capacity(records.len());
        for record in records {
            if seen.insert(record.id.as_str()) {
                lags.extend(lag_us(record));
            }
        }
        let count = |keep: fn(&Record) -> bool| records.iter().filter(|r| keep(r)).count() as u64;
        Tally {
            received: records.len() as u64,
            unique: seen.len() as u64,
            duplicates: (records.len() - seen.len()) as u64,
            bad_signatures: count(|r| !r.signed),
            malformed: count(|r| r.created_at.is_none()),
            order_violations: order_violations(records),
            first: records.first().map(|r| r.at),
            last: records.last().map(|r| r.at),
            lag_us: Percentiles::of(&mut lags),
        }
    }

    /// From the first receipt to the last.
    pub fn window(&self) -> Duration {
        match (self.first, self.last) {
            (Some(first), Some(last)) => last - first,
            _ => Duration::ZERO,
        }
    }

    /// From `start` to the last receipt.
    pub fn since(&self, start: Instant) -> Duration {
        self.last
            .map_or(Duration::ZERO, |last| last.saturating_duration_since(start))
    }
}

/// Transfers whose events arrived out of [`SUCCEEDED_ORDER`]; events of
/// other types (a failed transfer's) are not ranked.
fn order_violations(records: &[Record]) -> u64 {
    let mut highest: HashMap<&str, usize> = HashMap::new();
    let mut violated: HashSet<&str> = HashSet::new();
    for record in records {
        let Some(rank) = SUCCEEDED_ORDER.iter().position(|t| *t == record.event_type) else {
            continue;
        };
        let top = highest.entry(record.transfer_id.as_str()).or_insert(rank);
        if rank < *top {
            violated.insert(record.transfer_id.as_str());
        }
        *top = rank.max(*top);
    }
    violated.len() as u64
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::bench::receiver::Phase;

    fn record(id: &str, transfer: &str, rank: usize, after_ms: u64, start: Instant) -> Record {
        Record {
            phase: Phase::Transfers,
            at: start + Duration::from_millis(after_ms),
            at_utc: Utc::now(),
            id: id.to_owned(),
            event_type: SUCCEEDED_ORDER[rank].to_owned(),
            transfer_id: transfer.to_owned(),
            created_at: Some(Utc::now()),
            signed: id != "bad",
        }
    }

    #[test]
    fn counts_duplicates_bad_signatures_and_transfers_out_of_order() {
        let start = Instant::now();
        let records = vec![
            record("a0", "tr_a", 0, 10, start),
            record("a1", "tr_a", 1, 20, start),
            record("a1", "tr_a", 1, 25, start),
            record("b1", "tr_b", 1, 30, start),
            record("b0", "tr_b", 0, 40, start),
            record("bad", "tr_c", 4, 50, start),
        ];
        let tally = Tally::of(&records, |r| {
            Some(r.at.duration_since(start).as_micros() as u64)
        });
        assert_eq!((tally.received, tally.unique, tally.duplicates), (6, 5, 1));
        assert_eq!((tally.bad_signatures, tally.malformed), (1, 0));
        assert_eq!(tally.order_violations, 1, "tr_b only");
        assert_eq!(tally.window(), Duration::from_millis(40));
        assert_eq!(tally.since(start), Duration::from_millis(50));
        // The duplicate's later receipt is not a lag sample.
        assert_eq!(tally.lag_us.max, 50_000);
        assert_eq!(tally.lag_us.p50, 30_000);
    }

    #[test]
    fn nothing_received_is_all_zero() {
        let tally = Tally::of(&[], |_| None);
        assert_eq!((tally.received, tally.order_violations), (0, 0));
        assert_eq!(tally.window(), Duration::ZERO);
        assert_eq!(tally.since(Instant::now()), Duration::ZERO);
    }
}
