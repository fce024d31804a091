//! Every query Tern runs, written once for both backends. Dialect differences
//! live here and nowhere else, each with a comment saying why.

pub mod api_keys;
pub mod audit;
pub mod audit_checkpoints;
pub mod cached;
pub mod cards;
pub mod cluster;
pub mod devices;
pub mod email_tokens;
pub mod idempotency;
pub mod inbound_events;
pub mod ledger;
pub mod mail_outbox;
pub mod merchants;
pub mod overview;
pub mod push;
pub mod quotes;
pub mod sessions;
pub mod settlements;
pub mod timers;
pub mod transfers;
pub mod users;
pub mod webhooks;
