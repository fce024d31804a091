//! The card: its pure state machine, its programs, and the actor that owns
//! each card, which feeds the machine events and carries out its effects.
//!
//! - `machine`: the pure `transition(state, event) -> (state, effects)`,
//!   with the status table and the authorization decision it applies;
//! - `messages`: what the actor is asked, answers and refuses;
//! - `create`: a new card's intent, written before the issuer is asked;
//! - `ask`: the actors asked one typed command at a time;
//! - `kind`: the actor as the runtime sees it (load, dispatch, timers);
//! - `record`: the row's status, limits and audit records;
//! - `write`: committing a change and what a failed write answers;
//! - `issue`: issuing, resuming, abandoning and replacing;
//! - `intent`: the timer standing for an issuer call that has no row;
//! - `lifecycle`: freeze, unfreeze, close, name and limits;
//! - `wallet`: wallet tokens;
//! - `spend`: authorizations, clearings and refunds;
//! - `holds`: reversals and expiries of authorization holds.

pub mod ask;
pub mod create;
pub mod holds;
mod intent;
pub mod issue;
pub mod kind;
mod lifecycle;
pub mod limits;
pub mod machine;
pub mod messages;
pub mod program;
pub mod record;
pub mod replay;
mod spend;
pub mod standing;
pub mod wallet;
mod write;

pub use ask::{Answer, Cards, Recorded};
pub use create::{create, CreateError, NewCard};
pub use holds::Reversal;
pub use intent::intent_delay;
pub use kind::{CardContext, CardKind, CardState};
pub use messages::{
    AuthorizationRequest, CardCommand, CardFailure, CardReply, CardResult, Decision, LimitsPatch,
    Origin, RefundRequest,
};
pub use record::status_of;
pub use wallet::wallet_status_of;
