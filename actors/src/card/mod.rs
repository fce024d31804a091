//! The card: its pure state machine (status table, authorization
//! decisions), its programs, and the actor that owns each card.

pub mod holds;
pub mod kind;
pub mod limits;
pub mod machine;
pub mod program;
pub mod replay;
pub mod standing;

pub use holds::Reversal;
pub use kind::{
    AuthorizationRequest, CardCommand, CardContext, CardFailure, CardKind, CardReply, CardResult,
    CardState, Decision, LimitsPatch, Origin, RefundRequest,
};
