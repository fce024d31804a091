//! Durable mail (decisions §9): a mail committed with its change is sent
//! even when the process that wrote it died before sending, failures are
//! retried with backoff, and several senders on one database send each
//! mail once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern_actors::mail_outbox::{enqueue, MailSender};
use tern_actors::ports::{Mail, MailError, Mailer};
use tern_schema::store::mail_outbox;
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::{migrate, write_tx, Db, StoreError};

use crate::helpers::humans::unique_email;
use crate::helpers::TestApp;

/// A migrated database with no Tern running on it.
async fn database() -> (TestDatabase, Db) {
    let database = TestDatabase::create().await;
    migrate::run_pending(database.url())
        .await
        .expect("migrations");
    let db = Db::connect(database.url()).await.expect("connect");
    (database, db)
}

fn mail(to: &str, subject: &str) -> Mail {
    Mail {
        to: to.to_owned(),
        subject: subject.to_owned(),
        text: format!("Hello,\n\n{subject}: http://tern.test/verify-email?token=abc\n"),
    }
}

async fn unsent(db: &Db) -> i64 {
    let mut pooled = db.get().await.expect("connection");
    let count = mail_outbox::count_unsent(&mut pooled.tx())
        .await
        .expect("count");
    count
}

/// A mailer that refuses the first `failures` mails, then records them.
struct Flaky {
    failures: AtomicUsize,
    sent: Mutex<Vec<Mail>>,
}

impl Flaky {
    fn new(failures: usize) -> Arc<Flaky> {
        Arc::new(Flaky {
            failures: AtomicUsize::new(failures),
            sent: Mutex::new(Vec::new()),
        })
    }

    fn sent(&self) -> Vec<Mail> {
        self.sent.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl Mailer for Flaky {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let left = self.failures.load(Ordering::SeqCst);
        if left > 0 {
            self.failures.store(left - 1, Ordering::SeqCst);
            return Err(MailError::Transport("connection refused".into()));
        }
        self.sent.lock().expect("lock").push(mail);
        Ok(())
    }
}

#[actix_web::test]
async fn registration_mail_goes_through_the_outbox_table() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    assert_eq!(app.outbox_mails(&human.email, 1).await.len(), 1);
    let started = Instant::now();
    while unsent(&app.state.db).await > 0 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(unsent(&app.state.db).await, 0, "a sent mail leaves no row");
}

#[actix_web::test]
async fn a_mail_committed_but_not_sent_is_sent_at_the_next_start() {
    let (database, db) = database().await;
    let committed = unique_email();
    let abandoned = unique_email();
    let now = utc_now();
    let written: Result<(), StoreError> = write_tx!(db, |tx| {
        // What a crash right after the commit leaves.
        enqueue(tx, &mail(&committed, "Verify your email address"), now).await?;
        // What a crash in the middle of a send leaves: a row claimed by a
        // sender whose lease has lapsed.
        enqueue(tx, &mail(&abandoned, "Reset your password"), now).await?;
        let past = now - chrono::Duration::minutes(5);
        let claimed = mail_outbox::claim_due(tx, now, past, "dead-sender", 64).await?;
        assert_eq!(claimed.len(), 2);
        Ok(())
    });
    written.expect("written");
    db.close();

    let data_dir = tempfile::tempdir().expect("data dir");
    let config = crate::helpers::test_config(database.url(), data_dir.path());
    let app = tern::startup::Application::build(config)
        .await
        .expect("the application starts");
    let handle = app.handle();
    let state = app.state();
    actix_web::rt::spawn(app.run_until_stopped());

    let outbox = data_dir.path().join("outbox");
    let started = Instant::now();
    let files = loop {
        let files: Vec<String> = std::fs::read_dir(&outbox)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        if files.len() >= 2 || started.elapsed() > Duration::from_secs(15) {
            break files;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(files.len(), 2, "{files:?}");
    for to in [&committed, &abandoned] {
        assert!(files.iter().any(|raw| raw.contains(to.as_str())), "{to}");
    }
    let started = Instant::now();
    while unsent(&state.db).await > 0 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(unsent(&state.db).await, 0);
    handle.stop(false).await;
}

#[actix_web::test]
async fn a_failed_send_is_retried_after_its_backoff_then_given_up() {
    let (_database, db) = database().await;
    let flaky = Flaky::new(1);
    let sender =
        MailSender::with_retry_delays(db.clone(), flaky.clone(), vec![Duration::from_millis(300)]);
    let to = unique_email();
    let written: Result<(), StoreError> =
        write_tx!(db, |tx| enqueue(tx, &mail(&to, "Retry me"), utc_now())
            .await);
    written.expect("written");

    assert_eq!(sender.send_due().await.expect("pass"), 1);
    assert!(flaky.sent().is_empty());
    // Not due again before its backoff.
    assert_eq!(sender.send_due().await.expect("pass"), 0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(sender.send_due().await.expect("pass"), 1);
    assert_eq!(flaky.sent().len(), 1);
    assert_eq!(flaky.sent()[0].to, to);
    assert_eq!(unsent(&db).await, 0);

    // With the schedule used up, a mail is given up rather than retried
    // forever, and its body (a live token) is not kept.
    let hopeless = Flaky::new(usize::MAX);
    let sender = MailSender::with_retry_delays(db.clone(), hopeless.clone(), Vec::new());
    let written: Result<(), StoreError> =
        write_tx!(db, |tx| enqueue(tx, &mail(&to, "Never sent"), utc_now())
            .await);
    written.expect("written");
    assert_eq!(sender.send_due().await.expect("pass"), 1);
    assert_eq!(unsent(&db).await, 0);
    assert_eq!(sender.send_due().await.expect("pass"), 0);
}

#[actix_web::test]
async fn two_senders_on_one_database_send_each_mail_once() {
    let (_database, db) = database().await;
    let now = utc_now();
    let recipients: Vec<String> = (0..40).map(|_| unique_email()).collect();
    let written: Result<(), StoreError> = write_tx!(db, |tx| {
        for to in &recipients {
            enqueue(tx, &mail(to, "Once"), now).await?;
        }
        Ok(())
    });
    written.expect("written");
    let (a, b) = (Flaky::new(0), Flaky::new(0));
    let first = MailSender::new(db.clone(), a.clone());
    let second = MailSender::new(db.clone(), b.clone());
    let started = Instant::now();
    while unsent(&db).await > 0 && started.elapsed() < Duration::from_secs(20) {
        let (x, y) = futures_util::join!(first.send_due(), second.send_due());
        x.expect("first pass");
        y.expect("second pass");
    }
    let mut sent: Vec<String> = a.sent().into_iter().chain(b.sent()).map(|m| m.to).collect();
    sent.sort();
    let mut expected = recipients.clone();
    expected.sort();
    assert_eq!(sent, expected, "every mail once, none twice");
}
