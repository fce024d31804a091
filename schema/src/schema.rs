//! Table definitions, identical on both backends (see migrations/).

diesel::table! {
    merchants (id) {
        id -> Text,
        organization_name -> Text,
        status -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Text,
        merchant_id -> Text,
        prefix -> Text,
        secret_sha256 -> Text,
        name -> Nullable<Text>,
        scopes -> Text,
        created_at -> Timestamp,
        last_used_at -> Nullable<Timestamp>,
        expires_at -> Nullable<Timestamp>,
        revoked_at -> Nullable<Timestamp>,
    }
}

diesel::joinable!(api_keys -> merchants (merchant_id));
diesel::allow_tables_to_appear_in_same_query!(merchants, api_keys);

diesel::table! {
    /// Persisted due times of the actor runtime (see the actor_runtime migration).
    actor_timers (id) {
        id -> Text,
        kind -> Text,
        entity_id -> Text,
        due_at -> Timestamp,
        payload -> Text,
        claim_token -> Nullable<Text>,
        claimed_until -> Nullable<Timestamp>,
        attempts -> Integer,
        created_at -> Timestamp,
    }
}
