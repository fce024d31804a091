//! The outbox: without SMTP, each message becomes one `.eml` file that a
//! developer (or a test) reads instead of a mailbox.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use lettre::message::Mailbox;

use super::{build_message, parse_from};
use crate::ports::{Mail, MailError, Mailer};

/// The outbox folder's name under the data directory.
pub const OUTBOX_DIR: &str = "outbox";

/// Writes each message, exactly as lettre would send it, to
/// `<data_dir>/outbox/<UTC timestamp>-<uuid>.eml`. The file is written under
/// a hidden temporary name and renamed, so a reader listing `*.eml` never
/// sees half a message. Names sort by time of writing.
#[derive(Clone, Debug)]
pub struct OutboxMailer {
    dir: PathBuf,
    from: Mailbox,
}

impl OutboxMailer {
    /// An outbox under `data_dir`; the folder is made on the first send.
    pub fn new(data_dir: &Path, from: &str) -> Result<OutboxMailer, MailError> {
        Ok(OutboxMailer {
            dir: data_dir.join(OUTBOX_DIR),
            from: parse_from(from)?,
        })
    }

    /// `<data_dir>/outbox`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let bytes = build_message(&self.from, &mail)?.formatted();
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || write_message(&dir, &bytes))
            .await
            .map_err(|error| MailError::Transport(format!("outbox writer: {error}")))?
            .map_err(|error| MailError::Transport(format!("outbox: {error}")))?;
        Ok(())
    }
}

/// Writes `bytes` as a new `.eml` in `dir` (made when missing) and answers
/// its path.
fn write_message(dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ");
    let name = format!("{stamp}-{}.eml", uuid::Uuid::new_v4());
    let partial = dir.join(format!(".{name}.partial"));
    let result = (|| {
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        let path = dir.join(&name);
        std::fs::rename(&partial, &path)?;
        Ok(path)
    })();
    if result.is_err() {
        // Best effort: a partial file is hidden and never read anyway.
        let _ = std::fs::remove_file(&partial);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::mail::MAIL_FROM_DEFAULT;

    fn eml_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("outbox")
            .map(|entry| entry.expect("entry").path())
            .collect();
        files.sort();
        assert!(
            files
                .iter()
                .all(|path| path.extension().is_some_and(|ext| ext == "eml")),
            "only .eml files: {files:?}"
        );
        files
    }

    #[actix_rt::test]
    async fn a_message_lands_as_one_eml_with_headers_and_body() {
        let data = tempfile::tempdir().expect("dir");
        let outbox = OutboxMailer::new(data.path(), MAIL_FROM_DEFAULT).expect("outbox");
        outbox
            .send(Mail {
                to: "ada@example.com".into(),
                subject: "Verify your email".into(),
                text: "Open http://x/verify?token=abc\n".into(),
            })
            .await
            .expect("sent");

        let files = eml_files(&data.path().join(OUTBOX_DIR));
        assert_eq!(files.len(), 1);
        let text = std::fs::read_to_string(&files[0]).expect("read");
        assert!(
            text.contains("From: Tern <no-reply@tern.local>\r\n"),
            "{text}"
        );
        assert!(text.contains("To: ada@example.com\r\n"), "{text}");
        assert!(text.contains("Subject: Verify your email\r\n"), "{text}");
        assert!(
            text.contains("\r\nDate: ") && text.contains("\r\nMessage-ID: <"),
            "{text}"
        );
        assert!(
            text.ends_with("\r\n\r\nOpen http://x/verify?token=abc\r\n"),
            "{text}"
        );
    }

    #[actix_rt::test]
    async fn two_messages_two_files() {
        let data = tempfile::tempdir().expect("dir");
        let outbox = OutboxMailer::new(data.path(), MAIL_FROM_DEFAULT).expect("outbox");
        for to in ["ada@example.com", "bob@example.com"] {
            let mail = Mail {
                to: to.into(),
                subject: "Hello".into(),
                text: "Hi\n".into(),
            };
            outbox.send(mail).await.expect("sent");
        }
        let files = eml_files(outbox.dir());
        assert_eq!(files.len(), 2);
        let first = std::fs::read_to_string(&files[0]).expect("read");
        let second = std::fs::read_to_string(&files[1]).expect("read");
        assert!(
            first.contains("To: ada@example.com\r\n"),
            "in order of writing"
        );
        assert!(second.contains("To: bob@example.com\r\n"));
    }

    #[actix_rt::test]
    async fn an_invalid_message_writes_nothing() {
        let data = tempfile::tempdir().expect("dir");
        let outbox = OutboxMailer::new(data.path(), MAIL_FROM_DEFAULT).expect("outbox");
        let injected = Mail {
            to: "ada@example.com".into(),
            subject: "Hi\r\nBcc: eve@example.com".into(),
            text: "Hi\n".into(),
        };
        assert!(matches!(
            outbox.send(injected).await,
            Err(MailError::Invalid(_))
        ));
        assert!(!outbox.dir().exists());
    }
}
