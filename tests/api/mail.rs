//! The mail adapters against a real SMTP server (the sink) and the outbox
//! folder (decisions §9).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tern_actors::adapters::mail::{
    mailer_from, OutboxMailer, SmtpMailer, MAIL_FROM_DEFAULT, OUTBOX_DIR,
};
use tern_actors::ports::{Mail, MailError, Mailer};

use crate::smtp_sink::{eml_text, header_in, token_in, SmtpSink};

const WAIT: Duration = Duration::from_secs(5);

/// A verification mail as the identity context will write it: a long link
/// line (lettre then picks quoted-printable) and a non-ASCII name.
fn verification(to: &str) -> Mail {
    Mail {
        to: to.into(),
        subject: "Vérifiez votre adresse".into(),
        text: "Bonjour José,\n\nOpen this link within 24 hours:\n\
               http://tern.test/v1/auth/verify-email?token=Zm9vYmFyYmF6cXV4LWxvbmctdG9rZW4tdmFsdWU_AbC\n"
            .into(),
    }
}

fn eml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the outbox exists")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "eml"))
        .collect();
    files.sort();
    files
}

#[actix_web::test]
async fn smtp_mailer_delivers_to_an_smtp_server() {
    let sink = SmtpSink::start().await;
    let mailer = SmtpMailer::new(&sink.url(), MAIL_FROM_DEFAULT).expect("mailer");
    let mail = verification("ada@example.com");
    mailer.send(mail.clone()).await.expect("delivered");

    let received = sink.wait_for("ada@example.com", 1, WAIT).await;
    assert_eq!(received.len(), 1);
    let message = &received[0];
    assert_eq!(message.from, "no-reply@tern.local");
    assert_eq!(message.to, ["ada@example.com"]);
    assert_eq!(message.header("To").as_deref(), Some("ada@example.com"));
    assert_eq!(
        message.header("From").as_deref(),
        Some("Tern <no-reply@tern.local>")
    );
    assert_eq!(message.subject().as_deref(), Some("Vérifiez votre adresse"));
    assert!(message.header("Date").is_some());
    assert!(message.header("Message-ID").is_some());
    assert_eq!(message.text(), mail.text);
    assert_eq!(
        token_in(&message.text()).as_deref(),
        Some("Zm9vYmFyYmF6cXV4LWxvbmctdG9rZW4tdmFsdWU_AbC")
    );
}

#[actix_web::test]
async fn smtp_mailer_sends_one_message_per_mail() {
    let sink = SmtpSink::start().await;
    let mailer = SmtpMailer::new(&sink.url(), MAIL_FROM_DEFAULT).expect("mailer");
    for to in ["ada@example.com", "bob@example.com", "ada@example.com"] {
        mailer.send(verification(to)).await.expect("delivered");
    }
    assert_eq!(sink.wait_for("ada@example.com", 2, WAIT).await.len(), 2);
    assert_eq!(sink.wait_for("bob@example.com", 1, WAIT).await.len(), 1);
    assert_eq!(sink.messages().len(), 3);
}

#[actix_web::test]
async fn outbox_mailer_writes_an_eml_that_parses_back() {
    let data = tempfile::tempdir().expect("dir");
    let mailer = OutboxMailer::new(data.path(), MAIL_FROM_DEFAULT).expect("outbox");
    let mail = verification("ada@example.com");
    mailer.send(mail.clone()).await.expect("written");

    let files = eml_files(&data.path().join(OUTBOX_DIR));
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        name.len() > "20260101T000000.000000Z-".len() && name.as_bytes()[8] == b'T',
        "<UTC timestamp>-<uuid>.eml: {name}"
    );
    let raw = std::fs::read_to_string(&files[0]).expect("read");
    assert_eq!(header_in(&raw, "To").as_deref(), Some("ada@example.com"));
    assert_eq!(
        header_in(&raw, "Subject").as_deref(),
        Some("Vérifiez votre adresse")
    );
    assert_eq!(eml_text(&raw), mail.text);
    assert!(token_in(&eml_text(&raw)).is_some());
}

#[actix_web::test]
async fn mailer_from_picks_the_outbox_without_an_smtp_url() {
    let data = tempfile::tempdir().expect("dir");
    let mailer = mailer_from(None, data.path(), MAIL_FROM_DEFAULT).expect("mailer");
    mailer
        .send(verification("ada@example.com"))
        .await
        .expect("written");
    assert_eq!(eml_files(&data.path().join(OUTBOX_DIR)).len(), 1);

    let sink = SmtpSink::start().await;
    let mailer = mailer_from(Some(&sink.url()), data.path(), MAIL_FROM_DEFAULT).expect("mailer");
    mailer
        .send(verification("bob@example.com"))
        .await
        .expect("delivered");
    sink.wait_for("bob@example.com", 1, WAIT).await;
    assert_eq!(
        eml_files(&data.path().join(OUTBOX_DIR)).len(),
        1,
        "with SMTP, nothing more in the outbox"
    );
}

#[actix_web::test]
async fn an_unreachable_smtp_server_is_a_transport_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port");
    let mailer =
        SmtpMailer::new(&format!("smtp://127.0.0.1:{port}"), MAIL_FROM_DEFAULT).expect("mailer");
    let started = Instant::now();
    let refused = mailer.send(verification("ada@example.com")).await;
    assert!(
        matches!(refused, Err(MailError::Transport(_))),
        "{refused:?}"
    );
    assert!(started.elapsed() < tern_actors::adapters::mail::SMTP_SEND_TIMEOUT);
}

#[actix_web::test]
async fn a_silent_smtp_server_is_a_transport_error_at_the_timeout() {
    // Accepts connections (the backlog does) and never greets.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("smtp://{}", silent.local_addr().expect("address"));
    let timeout = Duration::from_millis(500);
    let mailer = SmtpMailer::with_timeout(&url, MAIL_FROM_DEFAULT, timeout).expect("mailer");
    let started = Instant::now();
    let failed = mailer.send(verification("ada@example.com")).await;
    assert!(matches!(failed, Err(MailError::Transport(_))), "{failed:?}");
    assert!(
        started.elapsed() < timeout * 4,
        "{:?} past a {timeout:?} limit",
        started.elapsed()
    );
}

#[actix_web::test]
async fn a_refused_recipient_is_a_transport_error() {
    let sink = SmtpSink::start_rejecting().await;
    let mailer = SmtpMailer::new(&sink.url(), MAIL_FROM_DEFAULT).expect("mailer");
    let refused = mailer.send(verification("ada@example.com")).await;
    assert!(
        matches!(refused, Err(MailError::Transport(_))),
        "{refused:?}"
    );
    assert!(sink.messages().is_empty());
}

#[actix_web::test]
async fn an_invalid_message_is_refused_before_any_connection() {
    let sink = SmtpSink::start().await;
    let mailer = SmtpMailer::new(&sink.url(), MAIL_FROM_DEFAULT).expect("mailer");
    let mut injected = verification("ada@example.com");
    injected.subject = "Hi\r\nBcc: eve@example.com".into();
    let refused = mailer.send(injected).await;
    assert!(matches!(refused, Err(MailError::Invalid(_))), "{refused:?}");
    let bad_address = mailer.send(verification("not an address")).await;
    assert!(matches!(bad_address, Err(MailError::Invalid(_))));
    assert!(sink.messages().is_empty());
}
