//! A settlement's method, status and reversal (decisions §5).

crate::text_enum! {
    /// How a settlement moves its money.
    pub enum SettlementMethod {
        CardCharge = "card_charge",
        CardPush = "card_push",
        OnChain = "on_chain",
    }
}

impl SettlementMethod {
    /// card_push and on_chain hold the amount on the source at creation;
    /// card_charge reserves its credit then, and credits it on success.
    pub fn holds_funds(self) -> bool {
        !matches!(self, SettlementMethod::CardCharge)
    }

    /// Only charges (refund) and pushes (reversal) can be reversed.
    pub fn reversible(self) -> bool {
        !matches!(self, SettlementMethod::OnChain)
    }
}

crate::text_enum! {
    /// pending -> in_flight -> succeeded | failed | retrying; retrying ->
    /// in_flight | failed; succeeded -> reversed.
    pub enum SettlementStatus {
        Pending = "pending",
        InFlight = "in_flight",
        Retrying = "retrying",
        Succeeded = "succeeded",
        Failed = "failed",
        Reversed = "reversed",
    }
}

impl SettlementStatus {
    /// The statuses with provider work left to do.
    pub const ACTIVE: [SettlementStatus; 3] = [
        SettlementStatus::Pending,
        SettlementStatus::InFlight,
        SettlementStatus::Retrying,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, SettlementStatus::Failed | SettlementStatus::Reversed)
    }
}

crate::text_enum! {
    /// Where a settlement's reversal stands.
    pub enum Reversal {
        None = "none",
        /// Sent (or to be sent) to the provider; the outcome is not known yet.
        InFlight = "in_flight",
        /// The provider accepted it and will finish later.
        PendingAtProvider = "pending_at_provider",
    }
}
