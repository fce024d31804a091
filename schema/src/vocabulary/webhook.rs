//! The delivery of a webhook event (decisions §8).

crate::text_enum! {
    /// Attempted while pending; delivered, dead-lettered after the last
    /// retry, or skipped when its endpoint went away.
    pub enum DeliveryStatus {
        Pending = "pending",
        Delivered = "delivered",
        Dead = "dead",
        Skipped = "skipped",
    }
}
