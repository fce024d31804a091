//! Transfers: the product, a saga from the payer's card to the chain.
//!
//! - `machine`: the pure saga (decisions §7);
//! - `record`: the row and the saga state, transfer ids;
//! - `create`: creation with the quote's binding, durable before anything runs;
//! - `legs`: the legs' settlement keys, in a form no merchant can take;
//! - `postings`: the conversion entries between the legs;
//! - `kind`: the actor that starts legs, hears of their moves and compensates;
//! - `refusal`: what the actor does when a leg cannot be started.

pub mod create;
pub mod kind;
pub mod legs;
pub mod machine;
pub mod postings;
pub mod record;
mod refusal;

pub use create::{create, CreateError, Created, NewTransfer};
pub use kind::{TransferCommand, TransferContext, TransferKind, TransferLegs, TransferReply};
