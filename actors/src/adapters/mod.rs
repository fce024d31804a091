//! Adapters behind the provider ports: HTTP clients (reqwest over rustls),
//! the configured rate table, the mailers (SMTP or the outbox folder), and
//! the `t=..,v1=..` signature scheme of provider webhooks and push dispatch
//! requests.

pub mod failures;
pub mod health;
pub mod http;
pub mod mail;
pub mod signature;
pub mod static_rates;

pub use mail::{mailer_from, OutboxMailer, SmtpMailer, MAIL_FROM_DEFAULT};
pub use signature::{
    replay_digest, sign_payload, signed_timestamp, verify_signature, SignatureError,
    DISPATCH_SIGNATURE_HEADER, SANDBOX_SIGNATURE_HEADER, SIGNATURE_TOLERANCE_DEFAULT,
};

/// Installs rustls' ring crypto provider as the process default. reqwest is
/// built with `rustls-no-provider` (no aws-lc, no C toolchain needed) and
/// panics when building a client without one, so call this once at start,
/// before any adapter is built. Calling it again is harmless.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
