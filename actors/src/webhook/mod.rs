//! Signed outbound webhooks (decisions §8): the transactional outbox of
//! transfer events, one endpoint actor per merchant that delivers them with
//! Standard Webhooks signatures, retries on persisted due times, dead
//! letters and replay, behind an SSRF guard.

pub mod deliver;
pub mod guard;
pub mod kind;
pub mod machine;
pub mod outbox;
pub mod signing;

pub use deliver::{Deliverer, DeliveryConfig, DeliveryConfigError};
pub use kind::{
    EndpointCommand, EndpointReply, EndpointState, WebhookContext, WebhookEndpointKind,
};
pub use outbox::{Outbox, RenderTransfer};
