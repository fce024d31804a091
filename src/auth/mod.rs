//! Credentials: API keys, scopes, and the authenticated caller.

pub mod api_key;
pub mod caller;
pub mod key_cache;
pub mod scopes;

pub use caller::{Caller, Credential, MerchantOwned};
pub use scopes::Scopes;
