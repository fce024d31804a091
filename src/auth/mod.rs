//! Credentials: API keys, scopes, and the authenticated caller.

pub mod api_key;
pub mod caller;
pub mod email_token;
pub mod key_cache;
pub mod mails;
pub mod operator;
pub mod password;
pub mod purge;
pub mod scopes;
pub mod session;

pub use caller::{Caller, Credential, MerchantOwned};
pub use scopes::Scopes;
