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

crate::text_id! {
    /// A person with an account at a merchant (console and app sign-in,
    /// cards, devices): a UUID v4 chosen at registration
    /// ([`UserId::generate`]).
    pub struct UserId;
}

impl UserId {
    /// A new user's id.
    pub fn generate() -> UserId {
        UserId::new(uuid::Uuid::new_v4().to_string())
    }
}

crate::text_id! {
    /// A transfer: `tr_` + a UUID v7 ([`TransferId::generate`]), opaque and
    /// sortable by creation time (decisions §1).
    pub struct TransferId = "tr_" + uuid_v7;
}

crate::text_id! {
    /// A ledger account: a merchant's funding account, `acct_` + a UUID v7
    /// ([`AccountId::generate`]), or a system account, whose id its kind
    /// and currency name (`tern_schema::ledger::SystemAccount::account_id`).
    pub struct AccountId = "acct_" + uuid_v7;
}

crate::text_id! {
    /// A card: `card_` + a UUID v7 ([`CardId::generate`]), sortable by
    /// creation time. The issuer's own id for it is another thing
    /// (`provider_card_id`), kept as text.
    pub struct CardId = "card_" + uuid_v7;
}

crate::text_id! {
    /// A settlement, within its merchant: the Idempotency-Key it was
    /// created under, or a transfer's leg key (`tr_<id>.leg1`, see
    /// `tern_actors::transfer::legs`). Ledger entries of the settlement
    /// carry it too.
    pub struct SettlementKey;
}

crate::text_id! {
    /// A quote: `qt_` + a UUID v7 ([`QuoteId::generate`]), opaque and
    /// sortable by creation time (decisions §1, §3).
    pub struct QuoteId = "qt_" + uuid_v7;
}

crate::text_id! {
    /// A webhook event: `evt_` + a UUID v7 ([`EventId::generate`]), the
    /// `webhook-id` of every delivery attempt of it.
    pub struct EventId = "evt_" + uuid_v7;
}

crate::text_id! {
    /// A card's wallet token (Apple Pay, Google Pay): `wtk_` + a UUID v7
    /// ([`WalletTokenId::generate`]), also the issuer's idempotency key for
    /// its provisioning. The issuer's own id for it stays text.
    pub struct WalletTokenId = "wtk_" + uuid_v7;
}

crate::text_id! {
    /// A user's device registered for push: `dev_` + a UUID v7
    /// ([`DeviceId::generate`]).
    pub struct DeviceId = "dev_" + uuid_v7;
}

crate::text_id! {
    /// A push notification sent to a user's devices: `psh_` + a UUID v7
    /// ([`DispatchId::generate`]).
    pub struct DispatchId = "psh_" + uuid_v7;
}
