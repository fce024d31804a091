//! SMTP delivery through lettre over tokio; TLS is rustls (ring) only.

use std::time::Duration;

use async_trait::async_trait;
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::{build_message, parse_from};
use crate::ports::{Mail, MailError, Mailer};

/// How long one delivery may take, connection to QUIT, before it counts as
/// failed.
pub const SMTP_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Delivers each message over a new SMTP connection.
///
/// `smtp://host:port` is plain SMTP with no TLS at all (a local relay or a
/// test sink); `smtps://host:port` is implicit TLS, the server checked
/// against the platform's roots; `smtp://host:port?tls=required` is
/// STARTTLS. `user:password@` in the URL authenticates.
#[derive(Clone)]
pub struct SmtpMailer {
    // Annotated: lettre's builder cannot infer the executor.
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    send_timeout: Duration,
}

impl std::fmt::Debug for SmtpMailer {
    // The transport holds the credentials: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("from", &self.from.to_string())
            .field("send_timeout", &self.send_timeout)
            .finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// A mailer for `url` sending as `from`, with [`SMTP_SEND_TIMEOUT`].
    /// Nothing is connected yet.
    pub fn new(url: &str, from: &str) -> Result<SmtpMailer, MailError> {
        SmtpMailer::with_timeout(url, from, SMTP_SEND_TIMEOUT)
    }

    /// The same with another limit on one delivery (and on each SMTP
    /// command within it).
    pub fn with_timeout(
        url: &str,
        from: &str,
        send_timeout: Duration,
    ) -> Result<SmtpMailer, MailError> {
        assert!(!send_timeout.is_zero(), "a send timeout is positive");
        if !(url.starts_with("smtp://") || url.starts_with("smtps://")) {
            return Err(MailError::Invalid(
                "the SMTP URL must be smtp://host:port or smtps://host:port".into(),
            ));
        }
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            // The URL may hold a password: name the problem, not the URL.
            .map_err(|error| MailError::Invalid(format!("the SMTP URL: {error}")))?
            .timeout(Some(send_timeout))
            .build();
        Ok(SmtpMailer {
            transport,
            from: parse_from(from)?,
            send_timeout,
        })
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let message = build_message(&self.from, &mail)?;
        // lettre's own timeout applies per command; this one bounds the
        // whole exchange. Dropping the future mid-way just closes the socket.
        match tokio::time::timeout(self.send_timeout, self.transport.send(message)).await {
            Ok(Ok(_response)) => Ok(()),
            Ok(Err(error)) => Err(MailError::Transport(error.to_string())),
            Err(_elapsed) => Err(MailError::Transport(format!(
                "no answer within {} ms",
                self.send_timeout.as_millis()
            ))),
        }
    }
}
