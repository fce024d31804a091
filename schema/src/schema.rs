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
        slot -> Integer,
    }
}

diesel::table! {
    cluster_nodes (id) {
        id -> Text,
        advertise_url -> Nullable<Text>,
        instance -> Text,
        started_at -> Timestamp,
        heartbeat_at -> Timestamp,
        lease_until -> Timestamp,
    }
}

diesel::table! {
    cluster_slots (slot) {
        slot -> Integer,
        owner -> Nullable<Text>,
        epoch -> BigInt,
        acquired_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    ledger_accounts (id) {
        id -> Text,
        merchant_id -> Nullable<Text>,
        kind -> Text,
        currency -> Text,
        posted_debits_minor -> BigInt,
        posted_credits_minor -> BigInt,
        pending_debits_minor -> BigInt,
        pending_credits_minor -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    ledger_transactions (id) {
        id -> Text,
        status -> Text,
        merchant_id -> Nullable<Text>,
        settlement_key -> Nullable<Text>,
        description -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        /// The hold this transaction posts or voids; `None` for a hold, an
        /// entry posted at once, and every row older than migration 000015.
        pending_id -> Nullable<Text>,
    }
}

diesel::table! {
    ledger_entries (id) {
        id -> Text,
        transaction_id -> Text,
        account_id -> Text,
        direction -> Text,
        amount_minor -> BigInt,
        currency -> Text,
        created_at -> Timestamp,
    }
}

diesel::joinable!(ledger_entries -> ledger_transactions (transaction_id));
diesel::joinable!(ledger_entries -> ledger_accounts (account_id));
diesel::allow_tables_to_appear_in_same_query!(ledger_accounts, ledger_transactions, ledger_entries);

diesel::table! {
    audit_heads (merchant_id) {
        merchant_id -> Text,
        seq -> BigInt,
        hash -> Text,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    /// The last verified point of each audit chain (see the audit_checkpoints migration).
    audit_checkpoints (merchant_id) {
        merchant_id -> Text,
        seq -> BigInt,
        hash -> Text,
        rescan_seq -> BigInt,
        version -> BigInt,
        verified_at -> Timestamp,
    }
}

diesel::table! {
    audit_events (merchant_id, seq) {
        merchant_id -> Text,
        seq -> BigInt,
        id -> Text,
        occurred_at -> Timestamp,
        actor_type -> Text,
        actor_id -> Text,
        action -> Text,
        resource_type -> Text,
        resource_id -> Text,
        request_id -> Text,
        data -> Text,
        prev_hash -> Text,
        hash -> Text,
    }
}

diesel::table! {
    settlements (merchant_id, idempotency_key) {
        merchant_id -> Text,
        idempotency_key -> Text,
        method -> Text,
        currency -> Text,
        amount_minor -> BigInt,
        asset -> Nullable<Text>,
        source -> Text,
        destination -> Text,
        recipient_name -> Text,
        reference -> Nullable<Text>,
        status -> Text,
        attempt -> Integer,
        outcome_unknown -> Bool,
        reversal -> Text,
        next_attempt_at -> Nullable<Timestamp>,
        provider_id -> Nullable<Text>,
        stan -> Nullable<Text>,
        retrieval_reference_number -> Nullable<Text>,
        transaction_identifier -> Nullable<Text>,
        approval_code -> Nullable<Text>,
        action_code -> Nullable<Text>,
        failure_reason -> Nullable<Text>,
        client_secret -> Nullable<Text>,
        next_action_type -> Nullable<Text>,
        funding_transaction_id -> Nullable<Text>,
        ledger_transaction_id -> Nullable<Text>,
        request_id -> Text,
        reversal_transaction_id -> Nullable<Text>,
        version -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        transfer_id -> Nullable<Text>,
    }
}

diesel::table! {
    idempotency_records (merchant_id, scope, idempotency_key) {
        merchant_id -> Text,
        scope -> Text,
        idempotency_key -> Text,
        request_sha256 -> Text,
        state -> Text,
        response_status -> Nullable<Integer>,
        response_body -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    inbound_events (provider, event_id) {
        provider -> Text,
        event_id -> Text,
        event_type -> Text,
        payload -> Text,
        request_id -> Text,
        received_at -> Timestamp,
        processed_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    /// Priced quotes, kept after they expire (see the quotes migration).
    quotes (id) {
        id -> Text,
        merchant_id -> Text,
        send_currency -> Text,
        send_amount_minor -> BigInt,
        receive_asset -> Text,
        receive_network -> Text,
        rate -> Text,
        platform_fee_minor -> BigInt,
        network_fee_minor -> BigInt,
        receive_amount_minor -> BigInt,
        request_id -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
    }
}

diesel::table! {
    /// Transfers: sagas over two leg settlements (see the transfers migration).
    transfers (id) {
        id -> Text,
        merchant_id -> Text,
        idempotency_key -> Text,
        flow -> Text,
        quote_id -> Text,
        card_pm -> Text,
        wallet -> Text,
        send_currency -> Text,
        send_amount_minor -> BigInt,
        receive_asset -> Text,
        receive_network -> Text,
        receive_amount_minor -> BigInt,
        rate -> Text,
        platform_fee_minor -> BigInt,
        network_fee_minor -> BigInt,
        status -> Text,
        leg1_key -> Text,
        leg1_status -> Text,
        leg1_client_secret -> Nullable<Text>,
        leg1_next_action_type -> Nullable<Text>,
        leg2_key -> Text,
        leg2_status -> Text,
        failure_reason -> Nullable<Text>,
        conversion_transaction_id -> Nullable<Text>,
        compensation_attempt -> Integer,
        next_attempt_at -> Nullable<Timestamp>,
        alert -> Nullable<Text>,
        alert_acknowledged_at -> Nullable<Timestamp>,
        request_id -> Text,
        version -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    /// A merchant's webhook endpoint (see the webhooks migration).
    webhook_endpoints (merchant_id) {
        merchant_id -> Text,
        url -> Text,
        secret -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    /// The outbox of transfer status events and their delivery state.
    webhook_events (id) {
        id -> Text,
        merchant_id -> Text,
        transfer_id -> Text,
        seq -> Integer,
        event_type -> Text,
        payload -> Text,
        request_id -> Text,
        status -> Text,
        attempts -> Integer,
        round -> Integer,
        next_attempt_at -> Nullable<Timestamp>,
        last_attempt_at -> Nullable<Timestamp>,
        last_status_code -> Nullable<Integer>,
        last_error -> Nullable<Text>,
        delivered_at -> Nullable<Timestamp>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    /// Every delivery attempt of an event.
    webhook_attempts (event_id, round, attempt) {
        event_id -> Text,
        attempt -> Integer,
        round -> Integer,
        attempted_at -> Timestamp,
        status_code -> Nullable<Integer>,
        error -> Nullable<Text>,
        duration_ms -> BigInt,
    }
}

diesel::allow_tables_to_appear_in_same_query!(webhook_events, webhook_attempts);

diesel::table! {
    users (id) {
        id -> Text,
        merchant_id -> Text,
        email -> Text,
        name -> Text,
        password_hash -> Text,
        status -> Text,
        email_verified_at -> Nullable<Timestamp>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    sessions (id) {
        id -> Text,
        token_sha256 -> Text,
        user_id -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
        revoked_at -> Nullable<Timestamp>,
        last_seen_at -> Timestamp,
    }
}

diesel::table! {
    email_tokens (token_sha256) {
        token_sha256 -> Text,
        user_id -> Text,
        purpose -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
        used_at -> Nullable<Timestamp>,
    }
}

diesel::joinable!(users -> merchants (merchant_id));
diesel::joinable!(sessions -> users (user_id));
diesel::joinable!(email_tokens -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(users, merchants, sessions, email_tokens);

diesel::table! {
    /// Push tokens of users (see the devices migration).
    devices (id) {
        id -> Text,
        merchant_id -> Text,
        user_id -> Text,
        platform -> Text,
        token -> Text,
        token_sha256 -> Text,
        status -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        revoked_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    push_dispatches (id) {
        id -> Text,
        merchant_id -> Text,
        user_id -> Text,
        title -> Text,
        body -> Text,
        data -> Nullable<Text>,
        request_id -> Text,
        created_at -> Timestamp,
        replay_sha256 -> Nullable<Text>,
    }
}

diesel::table! {
    push_deliveries (dispatch_id, device_id) {
        dispatch_id -> Text,
        device_id -> Text,
        status -> Text,
        attempts -> Integer,
        last_error -> Nullable<Text>,
        provider_message_id -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        delivered_at -> Nullable<Timestamp>,
    }
}

diesel::joinable!(devices -> users (user_id));
diesel::joinable!(push_deliveries -> devices (device_id));
diesel::joinable!(push_deliveries -> push_dispatches (dispatch_id));
diesel::allow_tables_to_appear_in_same_query!(devices, users, push_dispatches, push_deliveries);

diesel::table! {
    /// Issued cards (see the cards migration).
    cards (id) {
        id -> Text,
        merchant_id -> Text,
        user_id -> Text,
        program_id -> Text,
        card_type -> Text,
        status -> Text,
        network -> Text,
        currency -> Text,
        cardholder -> Text,
        display_name -> Nullable<Text>,
        card_art -> Text,
        theme -> Text,
        provider_card_id -> Nullable<Text>,
        last_four -> Nullable<Text>,
        expiry_month -> Nullable<Integer>,
        expiry_year -> Nullable<Integer>,
        wallet_status -> Text,
        per_transaction_minor -> Nullable<BigInt>,
        daily_spend_minor -> Nullable<BigInt>,
        monthly_spend_minor -> Nullable<BigInt>,
        atm_daily_minor -> Nullable<BigInt>,
        online_enabled -> Bool,
        international_enabled -> Bool,
        atm_enabled -> Bool,
        replaces_card_id -> Nullable<Text>,
        replaces_status -> Nullable<Text>,
        replaced_by_card_id -> Nullable<Text>,
        request_id -> Text,
        version -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        closed_at -> Nullable<Timestamp>,
        limits_set -> Text,
    }
}

diesel::table! {
    /// Authorizations, clearings, refunds, reversals and expiries of cards,
    /// one per provider event (an expiry is Tern's own).
    card_transactions (id) {
        id -> Text,
        card_id -> Text,
        merchant_id -> Text,
        provider_event_id -> Text,
        authorization_id -> Text,
        kind -> Text,
        status -> Text,
        amount_minor -> BigInt,
        currency -> Text,
        merchant_name -> Text,
        mcc -> Text,
        channel -> Text,
        country -> Text,
        decline_reason -> Nullable<Text>,
        ledger_transaction_id -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        hold_minor -> BigInt,
        event_source -> Text,
    }
}

diesel::table! {
    /// Mobile-wallet tokens of cards.
    card_wallet_tokens (id) {
        id -> Text,
        card_id -> Text,
        merchant_id -> Text,
        wallet -> Text,
        status -> Text,
        device_id -> Nullable<Text>,
        provider_token_id -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::joinable!(cards -> users (user_id));
diesel::joinable!(card_transactions -> cards (card_id));
diesel::joinable!(card_wallet_tokens -> cards (card_id));
diesel::allow_tables_to_appear_in_same_query!(cards, users, card_transactions, card_wallet_tokens);

diesel::table! {
    /// Mail waiting to be sent (see the credentials migration 000021).
    mail_outbox (id) {
        id -> Text,
        recipient -> Text,
        subject -> Text,
        body -> Text,
        attempts -> Integer,
        due_at -> Timestamp,
        claimed_until -> Nullable<Timestamp>,
        claim_token -> Nullable<Text>,
        last_error -> Nullable<Text>,
        created_at -> Timestamp,
        failed_at -> Nullable<Timestamp>,
    }
}
