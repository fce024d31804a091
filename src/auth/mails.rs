//! The mails Tern sends to people, and how they are sent: after the change
//! that caused them has committed, off the request path. A mail that fails
//! is logged; the request that caused it has already been answered.

use std::sync::Arc;

use tern_actors::ports::{Mail, Mailer};

use crate::config::Config;

/// The verification mail; the link carries `token=<value>` (decisions §9).
pub fn verification(config: &Config, to: &str, name: &str, token: &str) -> Mail {
    Mail {
        to: to.to_owned(),
        subject: "Verify your email address".to_owned(),
        text: format!(
            "Hello {name},\n\n\
             Confirm that this address is yours by opening this link:\n\n\
             {base}/verify-email?token={token}\n\n\
             The link works once and expires in 24 hours. If you did not \
             create an account, ignore this mail.\n",
            base = config.public_url,
        ),
    }
}

/// The password reset mail; the link carries `token=<value>`.
pub fn password_reset(config: &Config, to: &str, name: &str, token: &str) -> Mail {
    Mail {
        to: to.to_owned(),
        subject: "Reset your password".to_owned(),
        text: format!(
            "Hello {name},\n\n\
             Someone asked to reset the password of this account. To choose \
             a new password, open this link:\n\n\
             {base}/reset-password?token={token}\n\n\
             The link works once and expires in 1 hour. Resetting signs out \
             every session. If you did not ask, ignore this mail: your \
             password stays as it is.\n",
            base = config.public_url,
        ),
    }
}

/// Sends in the background; the caller has committed what the mail says.
pub fn send_later(mailer: Arc<dyn Mailer>, mail: Mail) {
    actix_web::rt::spawn(async move {
        let subject = mail.subject.clone();
        if let Err(error) = mailer.send(mail).await {
            tracing::warn!(%error, %subject, "could not send mail");
        }
    });
}
