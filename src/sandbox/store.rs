//! The simulator's memory: records by idempotency key, the execution log and
//! the armed faults. Everything sits behind one mutex held only for
//! synchronous work, so checking a key and storing its result is atomic:
//! two concurrent requests with one key execute once.

use std::collections::{BTreeMap, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tern_actors::adapters::http::wire;

/// Records (and so executions) kept at most. At the limit the simulator
/// forgets keys older than [`SANDBOX_KEY_RETENTION_HOURS`]; when none is
/// that old, new executions are refused with 503 rather than forgetting a
/// key a client may still retry, which could let it execute twice.
pub const SANDBOX_RECORDS_MAX: usize = 100_000;
/// How long a key is remembered for sure, as real providers do (Stripe keeps
/// idempotency keys 24 hours). Tern retries a key within minutes and
/// inquires after a crash within its restart, far inside this window.
pub const SANDBOX_KEY_RETENTION_HOURS: i64 = 24;
/// Faults armed at once.
pub const SANDBOX_FAULTS_MAX: usize = 100;
/// Executions returned by one listing (the newest).
pub const EXECUTIONS_LISTED_MAX: usize = 1_000;
/// Longest idempotency key accepted.
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 255;

tern_schema::text_enum! {
    #[derive(PartialOrd, Ord)]
    pub enum Target {
        Acquirer = "acquirer",
        CardPush = "card_push",
        Custodian = "custodian",
        Issuer = "issuer",
        Push = "push",
    }
}

tern_schema::text_enum! {
    /// What a provider operation does; the execution log's `operation`.
    pub enum Operation {
        Charge = "charge",
        Refund = "refund",
        Push = "push",
        Reversal = "reversal",
        Payout = "payout",
        /// A push notification to one device.
        Message = "message",
        /// A card issued.
        Issue = "issue",
        /// A card's status changed at the issuer.
        Status = "status",
        /// A card provisioned into a mobile wallet.
        Wallet = "wallet",
    }
}

tern_schema::text_enum! {
    pub enum FaultMode {
        Decline = "decline",
        Fail = "fail",
        Transient = "transient",
        TimeoutAfterSuccess = "timeout_after_success",
        Slow = "slow",
        /// Refunds, reversals and payouts answer pending and complete later.
        ReversalPending = "reversal_pending",
    }
}

impl FaultMode {
    /// A fault that cannot change an operation is not spent on it.
    fn applies_to(self, operation: Operation) -> bool {
        match self {
            FaultMode::ReversalPending => matches!(
                operation,
                Operation::Refund | Operation::Reversal | Operation::Payout
            ),
            _ => true,
        }
    }
}

/// Fields a fault's `match` may name.
pub const MATCH_FIELDS: [&str; 7] = [
    "payment_method",
    "destination",
    "wallet",
    "user_id",
    "card_id",
    "settlement_key",
    "operation",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub target: Target,
    pub matches: BTreeMap<String, String>,
    pub mode: FaultMode,
    /// Matching calls left; `None` until cleared.
    pub remaining: Option<u32>,
}

impl Fault {
    /// Validates a control-API fault; the error is the message of a 422.
    pub fn from_spec(spec: wire::FaultSpec) -> Result<Fault, String> {
        let target = Target::parse(&spec.target)
            .ok_or_else(|| format!("unknown target `{}`", spec.target))?;
        let mode =
            FaultMode::parse(&spec.mode).ok_or_else(|| format!("unknown mode `{}`", spec.mode))?;
        if let Some(field) = spec
            .matches
            .keys()
            .find(|f| !MATCH_FIELDS.contains(&f.as_str()))
        {
            return Err(format!("unknown match field `{field}`"));
        }
        if spec.count == Some(0) {
            return Err("count must be at least 1".into());
        }
        Ok(Fault {
            target,
            matches: spec.matches,
            mode,
            remaining: spec.count,
        })
    }

    /// Every named field must be present in the call with an equal value.
    fn matches(&self, target: Target, fields: &[(&str, &str)]) -> bool {
        self.target == target
            && self.matches.iter().all(|(name, want)| {
                fields
                    .iter()
                    .any(|(field, value)| field == name && value == want)
            })
    }
}

/// Where a record lives: one namespace per target and operation, so a
/// refund's key never collides with a charge's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey {
    pub target: Target,
    pub operation: Operation,
    /// A sub-space within the operation (the custodian's network), or "".
    pub scope: &'static str,
    /// The caller's idempotency key, as the execution log shows it.
    pub key: String,
}

/// What the simulator remembers of one execution, beyond the answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    Charge {
        charge: wire::Charge,
        payment_method: String,
        refunded_minor: i64,
    },
    Refund(wire::Refund),
    Push {
        push: wire::Push,
        destination: String,
        amount_minor: i64,
        reversed: bool,
    },
    Reversal(wire::Reversal),
    Payout(wire::Payout),
    PushMessage {
        accepted: wire::PushMessageAccepted,
        received: wire::ReceivedPush,
    },
    /// An issued card with its current status; the PAN and CVV live only
    /// here, in memory.
    IssuedCard {
        card: wire::IssuedCard,
        secrets: wire::CardSecrets,
        user_id: String,
        cardholder: String,
        /// Status changes so far, which number their execution keys.
        status_changes: u32,
    },
    CardStatus(wire::CardStatus),
    WalletToken(wire::WalletToken),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The request body as sent; a reuse of the key must send the same.
    pub fingerprint: String,
    pub settlement_key: String,
    pub stored: Stored,
}

pub enum Begin<'a> {
    /// The key is new: execute.
    New,
    /// The key executed before with the same request: answer this.
    Replay(&'a Record),
    /// The key executed before with a different request.
    Conflict,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Full;

#[derive(Default)]
pub struct Store {
    records: HashMap<RecordKey, Record>,
    /// Keys in the order they executed, to forget the oldest first.
    order: VecDeque<(DateTime<Utc>, RecordKey)>,
    executions: VecDeque<wire::Execution>,
    faults: Vec<Fault>,
    /// Secondary indexes: charge id, 3DS client secret, push transaction id.
    pub by_charge_id: HashMap<String, RecordKey>,
    pub by_client_secret: HashMap<String, RecordKey>,
    pub by_transaction_id: HashMap<String, RecordKey>,
    /// Issued cards by the issuer's card id.
    pub by_provider_card_id: HashMap<String, RecordKey>,
    /// Cards issued since start; numbers the PANs so none repeats.
    pub cards_issued: u64,
    /// Authorizations the control API played, for clearings' amounts.
    pub authorizations: super::card_network::PlayedAuthorizations,
}

impl Store {
    pub fn begin(&self, at: &RecordKey, fingerprint: &str) -> Begin<'_> {
        match self.records.get(at) {
            None => Begin::New,
            Some(record) if record.fingerprint == fingerprint => Begin::Replay(record),
            Some(_) => Begin::Conflict,
        }
    }

    pub fn get(&self, at: &RecordKey) -> Option<&Record> {
        self.records.get(at)
    }

    pub fn get_mut(&mut self, at: &RecordKey) -> Option<&mut Record> {
        self.records.get_mut(at)
    }

    /// Room for one more execution? At the limit, keys past the retention
    /// window are forgotten first.
    pub fn check_room(&mut self, now: DateTime<Utc>) -> Result<(), Full> {
        if self.records.len() >= SANDBOX_RECORDS_MAX {
            self.forget_before(now - chrono::Duration::hours(SANDBOX_KEY_RETENTION_HOURS));
        }
        if self.records.len() >= SANDBOX_RECORDS_MAX {
            return Err(Full);
        }
        Ok(())
    }

    /// Forgets every key that executed at or before `horizon`, with its
    /// execution log lines and the ids that pointed at it.
    fn forget_before(&mut self, horizon: DateTime<Utc>) {
        let mut forgot = false;
        while let Some((at, _)) = self.order.front() {
            if *at > horizon {
                break;
            }
            if let Some((_, key)) = self.order.pop_front() {
                self.records.remove(&key);
                forgot = true;
            }
        }
        while self
            .executions
            .front()
            .is_some_and(|e| e.created_at <= horizon)
        {
            self.executions.pop_front();
        }
        if forgot {
            let records = &self.records;
            self.by_charge_id.retain(|_, at| records.contains_key(at));
            self.by_client_secret
                .retain(|_, at| records.contains_key(at));
            self.by_transaction_id
                .retain(|_, at| records.contains_key(at));
            self.by_provider_card_id
                .retain(|_, at| records.contains_key(at));
        }
    }

    /// Stores the result of a real execution and logs it, once.
    pub fn insert(&mut self, at: RecordKey, record: Record, now: DateTime<Utc>) {
        assert!(
            !self.records.contains_key(&at),
            "a key is executed at most once"
        );
        self.order.push_back((now, at.clone()));
        self.executions.push_back(wire::Execution {
            key: at.key.clone(),
            target: at.target.as_str().to_owned(),
            operation: at.operation.as_str().to_owned(),
            settlement_key: record.settlement_key.clone(),
            created_at: now,
        });
        self.records.insert(at, record);
    }

    pub fn executions(
        &self,
        key: Option<&str>,
        settlement_key: Option<&str>,
    ) -> Vec<wire::Execution> {
        let mut listed: Vec<wire::Execution> = self
            .executions
            .iter()
            .rev()
            .filter(|e| key.is_none_or(|k| e.key == k))
            .filter(|e| settlement_key.is_none_or(|s| e.settlement_key == s))
            .take(EXECUTIONS_LISTED_MAX)
            .cloned()
            .collect();
        listed.reverse();
        listed
    }

    /// The push messages received, oldest first (the newest
    /// [`EXECUTIONS_LISTED_MAX`]), only `user_id`'s when given.
    pub fn pushes(&self, user_id: Option<&str>) -> Vec<wire::ReceivedPush> {
        let mut listed: Vec<wire::ReceivedPush> = self
            .order
            .iter()
            .rev()
            .filter_map(|(_, at)| match self.records.get(at).map(|r| &r.stored) {
                Some(Stored::PushMessage { received, .. }) => Some(received),
                _ => None,
            })
            .filter(|received| user_id.is_none_or(|u| received.user_id == u))
            .take(EXECUTIONS_LISTED_MAX)
            .cloned()
            .collect();
        listed.reverse();
        listed
    }

    pub fn arm(&mut self, fault: Fault) -> Result<(), Full> {
        if self.faults.len() >= SANDBOX_FAULTS_MAX {
            return Err(Full);
        }
        self.faults.push(fault);
        Ok(())
    }

    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// The first armed fault for this call, spending one of its count; a
    /// spent fault is removed. `fields` are the call's matchable fields.
    pub fn take_fault(
        &mut self,
        target: Target,
        operation: Operation,
        fields: &[(&str, &str)],
    ) -> Option<FaultMode> {
        let mut all = fields.to_vec();
        all.push(("operation", operation.as_str()));
        let index = self
            .faults
            .iter()
            .position(|f| f.mode.applies_to(operation) && f.matches(target, &all))?;
        let fault = &mut self.faults[index];
        let mode = fault.mode;
        if let Some(remaining) = fault.remaining.as_mut() {
            *remaining -= 1;
            if *remaining == 0 {
                self.faults.remove(index);
            }
        }
        Some(mode)
    }
}

/// Provider-side identifiers: derived from a per-process seed and the key,
/// so one key always maps to the same ids while the simulator runs, and
/// client secrets cannot be guessed from the key alone.
#[derive(Clone)]
pub struct Ids {
    seed: String,
}

impl Ids {
    pub fn new(seed: String) -> Ids {
        Ids { seed }
    }

    fn digest(&self, purpose: &str, key: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        for part in [self.seed.as_str(), purpose, key] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.finalize().into()
    }

    /// `prefix` + 24 hex characters.
    pub fn id(&self, prefix: &str, purpose: &str, key: &str) -> String {
        let digest = self.digest(purpose, key);
        format!("{prefix}{}", hex::encode(&digest[..12]))
    }

    /// 64 hex characters.
    pub fn hex64(&self, purpose: &str, key: &str) -> String {
        hex::encode(self.digest(purpose, key))
    }

    /// `len` decimal digits (at most 32).
    pub fn digits(&self, purpose: &str, key: &str, len: usize) -> String {
        self.digest(purpose, key)
            .iter()
            .take(len)
            .map(|b| char::from(b'0' + b % 10))
            .collect()
    }

    /// `len` upper-case alphanumerics (at most 32).
    pub fn alphanumerics(&self, purpose: &str, key: &str, len: usize) -> String {
        const ALPHABET: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        self.digest(purpose, key)
            .iter()
            .take(len)
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        target: &str,
        matches: &[(&str, &str)],
        mode: &str,
        count: Option<u32>,
    ) -> wire::FaultSpec {
        wire::FaultSpec {
            target: target.into(),
            matches: matches
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            mode: mode.into(),
            count,
        }
    }

    fn at(key: &str) -> RecordKey {
        RecordKey {
            target: Target::Acquirer,
            operation: Operation::Charge,
            scope: "",
            key: key.into(),
        }
    }

    fn record(fingerprint: &str) -> Record {
        Record {
            fingerprint: fingerprint.into(),
            settlement_key: "s1".into(),
            stored: Stored::Refund(wire::Refund {
                id: "re_1".into(),
                status: wire::RefundStatus::Succeeded,
                charge_id: "ch_1".into(),
                amount_minor: 100,
                decline_code: None,
                failure_message: None,
            }),
        }
    }

    #[test]
    fn fault_specs_are_validated() {
        assert!(Fault::from_spec(spec(
            "acquirer",
            &[("payment_method", "x")],
            "decline",
            None
        ))
        .is_ok());
        assert!(Fault::from_spec(spec("bank", &[], "decline", None)).is_err());
        assert!(Fault::from_spec(spec("acquirer", &[], "explode", None)).is_err());
        assert!(Fault::from_spec(spec("acquirer", &[("colour", "red")], "fail", None)).is_err());
        assert!(Fault::from_spec(spec("acquirer", &[], "fail", Some(0))).is_err());
    }

    #[test]
    fn faults_match_target_and_every_field_and_spend_their_count() {
        let mut store = Store::default();
        let fault = Fault::from_spec(spec(
            "acquirer",
            &[("payment_method", "pm_card_visa")],
            "transient",
            Some(2),
        ))
        .expect("valid");
        store.arm(fault).expect("room");
        let visa = [("payment_method", "pm_card_visa")];
        let mastercard = [("payment_method", "pm_card_mastercard")];
        assert_eq!(
            store.take_fault(Target::CardPush, Operation::Push, &visa),
            None
        );
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Charge, &mastercard),
            None
        );
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Charge, &[]),
            None
        );
        for _ in 0..2 {
            assert_eq!(
                store.take_fault(Target::Acquirer, Operation::Charge, &visa),
                Some(FaultMode::Transient)
            );
        }
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Charge, &visa),
            None
        );
    }

    #[test]
    fn a_fault_without_count_lasts_until_cleared_and_the_first_armed_wins() {
        let mut store = Store::default();
        for mode in ["slow", "decline"] {
            store
                .arm(Fault::from_spec(spec("custodian", &[], mode, None)).expect("valid"))
                .expect("room");
        }
        for _ in 0..5 {
            assert_eq!(
                store.take_fault(Target::Custodian, Operation::Payout, &[("wallet", "w")]),
                Some(FaultMode::Slow)
            );
        }
        store.clear_faults();
        assert_eq!(
            store.take_fault(Target::Custodian, Operation::Payout, &[]),
            None
        );
    }

    #[test]
    fn reversal_pending_is_not_spent_on_operations_it_cannot_change() {
        let mut store = Store::default();
        store
            .arm(
                Fault::from_spec(spec("acquirer", &[], "reversal_pending", Some(1)))
                    .expect("valid"),
            )
            .expect("room");
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Charge, &[]),
            None
        );
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Refund, &[]),
            Some(FaultMode::ReversalPending)
        );
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Refund, &[]),
            None
        );
    }

    #[test]
    fn the_operation_is_a_match_field() {
        let mut store = Store::default();
        store
            .arm(
                Fault::from_spec(spec("acquirer", &[("operation", "refund")], "fail", None))
                    .expect("valid"),
            )
            .expect("room");
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Charge, &[]),
            None
        );
        assert_eq!(
            store.take_fault(Target::Acquirer, Operation::Refund, &[]),
            Some(FaultMode::Fail)
        );
    }

    #[test]
    fn the_fault_list_is_bounded() {
        let mut store = Store::default();
        for _ in 0..SANDBOX_FAULTS_MAX {
            store
                .arm(Fault::from_spec(spec("push", &[], "fail", None)).expect("valid"))
                .expect("room");
        }
        let extra = Fault::from_spec(spec("push", &[], "fail", None)).expect("valid");
        assert_eq!(store.arm(extra), Err(Full));
    }

    #[test]
    fn a_key_executes_once_and_conflicting_reuse_is_detected() {
        let mut store = Store::default();
        assert!(matches!(store.begin(&at("k1"), "{a}"), Begin::New));
        store.insert(at("k1"), record("{a}"), Utc::now());
        assert!(
            matches!(store.begin(&at("k1"), "{a}"), Begin::Replay(r) if r.fingerprint == "{a}")
        );
        assert!(matches!(store.begin(&at("k1"), "{b}"), Begin::Conflict));
        // Another operation's namespace is separate.
        let refund = RecordKey {
            operation: Operation::Refund,
            ..at("k1")
        };
        assert!(matches!(store.begin(&refund, "{a}"), Begin::New));
        assert_eq!(store.executions(Some("k1"), None).len(), 1);
    }

    #[test]
    #[should_panic(expected = "at most once")]
    fn inserting_a_key_twice_is_a_programmer_error() {
        let mut store = Store::default();
        store.insert(at("k1"), record("{a}"), Utc::now());
        store.insert(at("k1"), record("{a}"), Utc::now());
    }

    #[test]
    fn at_the_limit_keys_past_the_retention_window_are_forgotten_first() {
        let mut store = Store::default();
        let now = Utc::now();
        let old = now - chrono::Duration::hours(SANDBOX_KEY_RETENTION_HOURS + 1);
        let young = now - chrono::Duration::hours(1);
        store.insert(at("old"), record("{a}"), old);
        store.by_charge_id.insert("ch_old".into(), at("old"));
        for i in 1..SANDBOX_RECORDS_MAX {
            store.insert(at(&format!("k{i}")), record("{a}"), young);
        }
        assert_eq!(store.check_room(now), Ok(()), "the old key made room");
        assert!(matches!(store.begin(&at("old"), "{a}"), Begin::New));
        assert!(store.by_charge_id.is_empty(), "its ids went with it");
        assert!(store.executions(Some("old"), None).is_empty());
        assert!(matches!(store.begin(&at("k1"), "{a}"), Begin::Replay(_)));

        // Every remaining key is within the window: refuse, forget nothing.
        store.insert(at("new"), record("{a}"), now);
        assert_eq!(store.check_room(now), Err(Full));
        assert!(matches!(store.begin(&at("k1"), "{a}"), Begin::Replay(_)));
    }

    #[test]
    fn executions_filter_by_key_and_settlement_key() {
        let mut store = Store::default();
        store.insert(at("k1"), record("{a}"), Utc::now());
        let mut other = record("{a}");
        other.settlement_key = "s2".into();
        store.insert(at("k2"), other, Utc::now());
        assert_eq!(store.executions(None, None).len(), 2);
        assert_eq!(store.executions(Some("k2"), None)[0].settlement_key, "s2");
        assert_eq!(store.executions(None, Some("s1"))[0].key, "k1");
        assert!(store.executions(Some("k1"), Some("s2")).is_empty());
    }

    #[test]
    fn ids_are_stable_per_key_and_shaped() {
        let ids = Ids::new("seed".into());
        assert_eq!(ids.id("ch_", "charge", "k"), ids.id("ch_", "charge", "k"));
        assert_ne!(ids.id("ch_", "charge", "k"), ids.id("ch_", "charge", "k2"));
        assert_ne!(
            ids.id("ch_", "charge", "k"),
            Ids::new("other".into()).id("ch_", "charge", "k")
        );
        let stan = ids.digits("stan", "k", 6);
        assert!(stan.len() == 6 && stan.bytes().all(|b| b.is_ascii_digit()));
        let code = ids.alphanumerics("approval", "k", 6);
        assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(ids.hex64("tx", "k").len(), 64);
    }
}
