//! How a settlement that is a transfer's leg tells its transfer that it
//! moved. The settlement actors are registered before the transfer actors
//! (a transfer drives its legs through the settlement registry), so the
//! observer is bound after both exist.

use std::sync::{Arc, OnceLock};

use tern_schema::models::SettlementRow;

/// What a parent (a transfer) learns of its leg's moves.
pub trait LegObserver: Send + Sync {
    /// Called after a leg's transition committed; must not block.
    fn leg_moved(&self, row: &SettlementRow);
}

/// Late-bound, because the transfer registry is made after the settlement one.
#[derive(Clone, Default)]
pub struct Parents(Arc<OnceLock<Arc<dyn LegObserver>>>);

impl Parents {
    /// Binds the observer once; answers false (and keeps the first) when one
    /// is bound already, so a second binding cannot silently redirect legs.
    pub fn set(&self, observer: Arc<dyn LegObserver>) -> bool {
        self.0.set(observer).is_ok()
    }

    /// Tells the parent of a leg; a no-op for a settlement that is no leg,
    /// or before an observer is bound (the transfer reads its legs' rows
    /// when it activates, so nothing is lost).
    pub fn notify(&self, row: &SettlementRow) {
        if row.transfer_id.is_none() {
            return;
        }
        if let Some(observer) = self.0.get() {
            observer.leg_moved(row);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use tern_schema::money::MinorUnits;

    use tern_schema::models::SettlementIntent;
    use tern_schema::types::utc_now;
    use tern_schema::vocabulary::{MerchantId, SettlementKey, TransferId};

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl LegObserver for Recorder {
        fn leg_moved(&self, row: &SettlementRow) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(row.idempotency_key.to_string());
        }
    }

    impl Recorder {
        fn seen(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        }
    }

    fn row(key: &str, transfer_id: Option<&str>) -> SettlementRow {
        let mut row = SettlementRow::pending(
            SettlementIntent {
                merchant_id: MerchantId::new("m"),
                idempotency_key: SettlementKey::new(key),
                method: tern_schema::vocabulary::SettlementMethod::CardCharge,
                currency: "USD".into(),
                amount_minor: MinorUnits::new(100),
                asset: None,
                source: "acc".into(),
                destination: "pm_card_visa".into(),
                recipient_name: "Ada".into(),
                reference: None,
                request_id: "r".into(),
            },
            utc_now(),
        );
        row.transfer_id = transfer_id.map(TransferId::new);
        row
    }

    #[test]
    fn unset_parents_ignore_every_row() {
        let parents = Parents::default();
        parents.notify(&row("leg", Some("tr_1")));
        parents.notify(&row("plain", None));
    }

    #[test]
    fn the_observer_is_bound_once() {
        let parents = Parents::default();
        let first = Arc::new(Recorder::default());
        let second = Arc::new(Recorder::default());
        assert!(parents.set(first.clone()));
        assert!(!parents.set(second.clone()), "a second binding is refused");
        // Clones share the binding: the context is cloned into every actor.
        parents.clone().notify(&row("leg", Some("tr_1")));
        assert_eq!(first.seen(), vec!["leg".to_owned()]);
        assert!(second.seen().is_empty());
    }

    #[test]
    fn only_legs_reach_the_parent() {
        let parents = Parents::default();
        let recorder = Arc::new(Recorder::default());
        assert!(parents.set(recorder.clone()));
        parents.notify(&row("plain", None));
        parents.notify(&row("leg", Some("tr_1")));
        assert_eq!(recorder.seen(), vec!["leg".to_owned()]);
    }
}
