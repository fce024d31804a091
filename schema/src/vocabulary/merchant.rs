//! A merchant's standing.

crate::text_enum! {
    /// A merchant's standing. Only `Active` may operate on settlements.
    pub enum MerchantStatus {
        Active = "active",
        Suspended = "suspended",
        Disabled = "disabled",
    }
}
