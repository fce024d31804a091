//! Mail adapters behind the [`Mailer`] port (decisions §9): SMTP when
//! TERN_SMTP_URL is set, otherwise one `.eml` file per message in the data
//! directory's `outbox/`. Both build the message the same way, with
//! lettre's builder, so an outbox file is byte for byte what SMTP would
//! have carried (apart from Date and Message-ID).

mod outbox;
mod smtp;

use std::path::Path;
use std::sync::Arc;

use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::Message;

use crate::ports::{Mail, MailError, Mailer};

pub use outbox::{OutboxMailer, OUTBOX_DIR};
pub use smtp::{SmtpMailer, SMTP_SEND_TIMEOUT};

/// The From of every message unless configured otherwise.
pub const MAIL_FROM_DEFAULT: &str = "Tern <no-reply@tern.local>";

/// The configured transport: SMTP when `smtp_url` is given
/// (`smtp://host:port` plain, `smtps://host:port` implicit TLS), else the
/// outbox folder under `data_dir`. `from` is a mailbox such as
/// [`MAIL_FROM_DEFAULT`]; a bad one or a bad URL is [`MailError::Invalid`].
pub fn mailer_from(
    smtp_url: Option<&str>,
    data_dir: &Path,
    from: &str,
) -> Result<Arc<dyn Mailer>, MailError> {
    Ok(match smtp_url {
        Some(url) => Arc::new(SmtpMailer::new(url, from)?),
        None => Arc::new(OutboxMailer::new(data_dir, from)?),
    })
}

/// Checks a From mailbox (`Name <addr>` or a bare address) as the
/// mailers will parse it, so a bad setting stops the process at start.
pub fn check_from(from: &str) -> Result<(), MailError> {
    parse_from(from).map(|_| ())
}

/// Parses a From mailbox (`Name <addr>` or a bare address).
pub(crate) fn parse_from(from: &str) -> Result<Mailbox, MailError> {
    from.parse::<Mailbox>()
        .map_err(|error| MailError::Invalid(format!("sender `{from}`: {error}")))
}

/// Builds the message as it goes on the wire: From, To, Subject, Date,
/// Message-ID and a text/plain UTF-8 body (lettre picks 7bit,
/// quoted-printable or base64 for it). A recipient that is not one address,
/// or a subject with a line break in it (header injection), is refused.
pub(crate) fn build_message(from: &Mailbox, mail: &Mail) -> Result<Message, MailError> {
    if has_line_break(&mail.to) {
        return Err(MailError::Invalid(
            "the recipient holds a line break".into(),
        ));
    }
    if has_line_break(&mail.subject) {
        return Err(MailError::Invalid("the subject holds a line break".into()));
    }
    let to = mail
        .to
        .parse::<Mailbox>()
        .map_err(|error| MailError::Invalid(format!("recipient: {error}")))?;
    let message_id = format!("<{}@{}>", uuid::Uuid::new_v4(), from.email.domain());
    Message::builder()
        .from(from.clone())
        .to(to)
        .subject(mail.subject.as_str())
        .date_now()
        .message_id(Some(message_id))
        .header(ContentType::TEXT_PLAIN)
        .body(mail.text.clone())
        .map_err(|error| MailError::Invalid(error.to_string()))
}

fn has_line_break(text: &str) -> bool {
    text.contains(['\r', '\n'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail(to: &str, subject: &str) -> Mail {
        Mail {
            to: to.into(),
            subject: subject.into(),
            text: "Open http://127.0.0.1:8080/verify?token=abc\n".into(),
        }
    }

    fn formatted(message: &Message) -> String {
        String::from_utf8(message.formatted()).expect("utf-8")
    }

    #[test]
    fn a_message_carries_every_header_and_the_body() {
        let from = parse_from(MAIL_FROM_DEFAULT).expect("from");
        let message = build_message(&from, &mail("ada@example.com", "Verify")).expect("built");
        let text = formatted(&message);
        for header in [
            "From: Tern <no-reply@tern.local>\r\n",
            "To: ada@example.com\r\n",
            "Subject: Verify\r\n",
            "Content-Type: text/plain; charset=utf-8\r\n",
        ] {
            assert!(text.contains(header), "{header:?} missing from {text}");
        }
        assert!(text.contains("\r\nDate: "), "{text}");
        assert!(text.contains("@tern.local>\r\n"), "Message-ID: {text}");
        assert!(text.contains("token=abc"), "{text}");
    }

    #[test]
    fn header_injection_is_refused() {
        let from = parse_from(MAIL_FROM_DEFAULT).expect("from");
        for (to, subject) in [
            ("ada@example.com", "Hi\r\nBcc: eve@example.com"),
            ("ada@example.com", "Hi\nBcc: eve@example.com"),
            ("ada@example.com\r\nBcc: eve@example.com", "Hi"),
        ] {
            let refused = build_message(&from, &mail(to, subject));
            assert!(
                matches!(refused, Err(MailError::Invalid(_))),
                "{to:?} {subject:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn bad_addresses_are_invalid() {
        let from = parse_from(MAIL_FROM_DEFAULT).expect("from");
        for to in [
            "",
            "not an address",
            "a@",
            "ada@example.com, eve@example.com",
        ] {
            let refused = build_message(&from, &mail(to, "Hi"));
            assert!(matches!(refused, Err(MailError::Invalid(_))), "{to:?}");
        }
        assert!(matches!(parse_from("nobody"), Err(MailError::Invalid(_))));
    }

    #[test]
    fn non_ascii_subjects_and_bodies_are_encoded() {
        let from = parse_from(MAIL_FROM_DEFAULT).expect("from");
        let mut unicode = mail("jose@example.com", "Bienvenue, José");
        unicode.text = "Bonjour José, voilà.\n".into();
        let text = formatted(&build_message(&from, &unicode).expect("built"));
        assert!(text.contains("Subject: Bienvenue, =?utf-8?"), "{text}");
        assert!(text.contains("Content-Transfer-Encoding: quoted-printable\r\n"));
        assert!(text.is_ascii(), "{text}");
    }

    #[test]
    fn mailer_from_picks_the_outbox_without_a_url() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(mailer_from(None, dir.path(), MAIL_FROM_DEFAULT).is_ok());
        assert!(mailer_from(Some("smtp://127.0.0.1:2525"), dir.path(), MAIL_FROM_DEFAULT).is_ok());
        assert!(matches!(
            mailer_from(Some("http://127.0.0.1:2525"), dir.path(), MAIL_FROM_DEFAULT),
            Err(MailError::Invalid(_))
        ));
        assert!(matches!(
            mailer_from(None, dir.path(), "nobody"),
            Err(MailError::Invalid(_))
        ));
    }
}
