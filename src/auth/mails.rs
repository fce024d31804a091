//! The mails Tern sends to people, and how they are sent: written to the
//! mail outbox in the transaction of the change that caused them, and sent
//! by the background sender once it commits, with retries
//! (`tern_actors::mail_outbox`). A crash between commit and send delays a
//! mail; it no longer loses it.

use chrono::NaiveDateTime;
use tern_actors::ports::Mail;
use tern_schema::{StoreResult, Tx};

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

/// Writes the mail in the caller's transaction. After the commit, call
/// `state.mail.wake()` so it goes out at once rather than at the next poll.
pub async fn enqueue(tx: &mut Tx<'_>, mail: &Mail, now: NaiveDateTime) -> StoreResult<()> {
    tern_actors::mail_outbox::enqueue(tx, mail, now).await
}
