//! Placeholder until the settlement-on-session branch lands.

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
    pub fn set(&self, observer: Arc<dyn LegObserver>) -> bool {
        self.0.set(observer).is_ok()
    }

    pub fn notify(&self, row: &SettlementRow) {
        if row.transfer_id.is_none() {
            return;
        }
        if let Some(observer) = self.0.get() {
            observer.leg_moved(row);
        }
    }
}
