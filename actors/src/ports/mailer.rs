//! The mailer: transactional mail to humans (email verification, password
//! reset). Delivery is best-effort from the caller's point of view: a
//! failure is logged and never changes the answer to the request that
//! caused the mail.

use async_trait::async_trait;

/// One plain-text message to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    /// The recipient's address, already validated.
    pub to: String,
    pub subject: String,
    /// The plain-text body; links in it are absolute URLs.
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The message could not be built (bad address, header injection).
    #[error("the message is not valid: {0}")]
    Invalid(String),
    /// The transport did not take the message (SMTP refused or unreachable,
    /// outbox not writable).
    #[error("the message was not delivered: {0}")]
    Transport(String),
}

#[async_trait]
pub trait Mailer: Send + Sync {
    /// Hands the message to the transport; `Ok` once it took it.
    async fn send(&self, mail: Mail) -> Result<(), MailError>;
}
