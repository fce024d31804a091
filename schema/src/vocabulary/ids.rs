//! The ids of Tern's entities, each kind its own type (see [`crate::text_id!`]).

crate::text_id! {
    /// A merchant, the tenant every other resource belongs to: a UUID v4
    /// chosen at registration ([`MerchantId::generate`]).
    pub struct MerchantId;
}

impl MerchantId {
    /// A new merchant's id.
    pub fn generate() -> MerchantId {
        MerchantId::new(uuid::Uuid::new_v4().to_string())
    }
}
