//! Settlements: durable intents executed exactly once at their provider.
//! `machine` is the pure state machine; the actor shell arrives with the
//! settlement endpoints.

pub mod machine;
