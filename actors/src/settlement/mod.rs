//! Settlements: durable intents executed exactly once at their provider.
//!
//! - `machine`: the pure state machine (decisions §5);
//! - `record`: the row and the machine state, actor ids, provider keys;
//! - `submit`: creation, durable before any provider call;
//! - `kind`: the actor that executes, retries, inquires and reverses;
//! - `providers`: the provider calls and how their answers become events;
//! - `parent`: how a transfer's leg tells its transfer that it moved.

pub mod kind;
pub mod machine;
pub mod parent;
pub mod providers;
pub mod record;
pub mod submit;

pub use kind::{
    ReverseOutcome, SettlementCommand, SettlementContext, SettlementKind, SettlementReply,
};
pub use parent::{LegObserver, Parents};
pub use providers::Providers;
pub use submit::{submit, NewSettlement, SubmitError, Submitted};
