//! A transfer's status and its legs' (decisions §7).

crate::text_enum! {
    /// pending -> leg1_in_flight -> leg1_succeeded | failed; leg1_succeeded
    /// -> leg2_in_flight -> succeeded | compensating; compensating -> failed.
    pub enum TransferStatus {
        Pending = "pending",
        Leg1InFlight = "leg1_in_flight",
        Leg1Succeeded = "leg1_succeeded",
        Leg2InFlight = "leg2_in_flight",
        Succeeded = "succeeded",
        Compensating = "compensating",
        Failed = "failed",
    }
}

impl TransferStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, TransferStatus::Succeeded | TransferStatus::Failed)
    }
}

crate::text_enum! {
    /// not_started -> in_flight -> succeeded | failed; succeeded ->
    /// reversing -> reversed | reverse_failed.
    pub enum LegStatus {
        NotStarted = "not_started",
        InFlight = "in_flight",
        Succeeded = "succeeded",
        Failed = "failed",
        Reversing = "reversing",
        Reversed = "reversed",
        ReverseFailed = "reverse_failed",
    }
}
