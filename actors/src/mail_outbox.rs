//! Durable mail: the change that causes a mail writes an outbox row in its
//! own transaction; this sender claims due rows, sends them through the
//! [`Mailer`] port, deletes what was sent and reschedules what failed with
//! backoff. It starts by sending whatever an earlier process left unsent
//! (a crash between commit and send), and a row claimed by a sender that
//! died is taken again once its lease lapses. Several nodes on one
//! PostgreSQL take disjoint rows (see `store::mail_outbox::claim_due`).
//!
//! A mail can go out twice: a sender that dies after the transport took the
//! message but before the row is deleted sends it again later. For a
//! verification or reset link that is harmless; losing it is not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use tern_schema::models::MailOutboxRow;
use tern_schema::store::mail_outbox as store;
use tern_schema::types::utc_now;
use tern_schema::{write_tx, Db, StoreError, StoreResult, Tx};
use tokio::sync::Notify;

use crate::ports::{Mail, Mailer};

/// Waits before the 2nd, 3rd... attempt; after the last the mail is given up.
pub const RETRY_DELAYS_DEFAULT: [Duration; 6] = [
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(120),
    Duration::from_secs(600),
    Duration::from_secs(1_800),
    Duration::from_secs(3_600),
];
/// How often the sender looks for due rows when nobody wakes it.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Rows one pass claims and sends at once.
pub const SEND_BATCH_MAX: i64 = 16;
/// A claimed row is left alone this long; longer than a whole batch of
/// sends can take one after another (each has its own transport timeout,
/// 10 s for SMTP: 16 x 10 s).
pub const CLAIM_LEASE: Duration = Duration::from_secs(300);
/// Longest mail body accepted into the outbox.
pub const BODY_BYTES_MAX: usize = 16 * 1024;

/// Writes a mail to the outbox in the caller's transaction; it is sent
/// once that transaction commits (call [`MailSender::wake`] after it).
pub async fn enqueue(tx: &mut Tx<'_>, mail: &Mail, now: NaiveDateTime) -> StoreResult<()> {
    debug_assert!(mail.text.len() <= BODY_BYTES_MAX, "mail bodies are ours");
    let row = MailOutboxRow {
        id: format!("mail_{}", uuid::Uuid::now_v7().simple()),
        recipient: mail.to.clone(),
        subject: mail.subject.clone(),
        body: mail.text.clone(),
        attempts: 0,
        due_at: now,
        claimed_until: None,
        claim_token: None,
        last_error: None,
        created_at: now,
        failed_at: None,
    };
    store::insert(tx, &row).await
}

/// The background sender; cheap to clone.
#[derive(Clone)]
pub struct MailSender {
    db: Db,
    mailer: Arc<dyn Mailer>,
    retry_delays: Arc<[Duration]>,
    wake: Arc<Notify>,
    stopped: Arc<AtomicBool>,
}

impl MailSender {
    pub fn new(db: Db, mailer: Arc<dyn Mailer>) -> MailSender {
        MailSender::with_retry_delays(db, mailer, RETRY_DELAYS_DEFAULT.to_vec())
    }

    pub fn with_retry_delays(
        db: Db,
        mailer: Arc<dyn Mailer>,
        retry_delays: Vec<Duration>,
    ) -> MailSender {
        MailSender {
            db,
            mailer,
            retry_delays: retry_delays.into(),
            wake: Arc::new(Notify::new()),
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the sending loop; its first pass resumes what is due.
    pub fn start(&self) {
        let sender = self.clone();
        actix::spawn(async move { sender.run().await });
    }

    /// Asks for a pass now: a mail was just committed.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Ends the loop after its current pass.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    async fn run(self) {
        while !self.stopped.load(Ordering::SeqCst) {
            match self.send_due().await {
                // A full batch: more may be due at once.
                Ok(sent) if sent as i64 >= SEND_BATCH_MAX => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "mail outbox pass failed"),
            }
            let _ = tokio::time::timeout(POLL_INTERVAL, self.wake.notified()).await;
        }
    }

    /// One pass: claims due rows and sends them; answers how many it claimed.
    pub async fn send_due(&self) -> StoreResult<usize> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let now = utc_now();
        let lease = chrono::Duration::from_std(CLAIM_LEASE).unwrap_or(chrono::Duration::minutes(2));
        let claimed: Result<Vec<MailOutboxRow>, StoreError> = write_tx!(self.db, |tx| {
            store::claim_due(tx, now, now + lease, &token, SEND_BATCH_MAX).await
        });
        let claimed = claimed?;
        let count = claimed.len();
        // One after another, oldest first: a person who asked twice gets
        // the links in the order they were made.
        for row in claimed {
            self.send_one(row, &token).await;
        }
        Ok(count)
    }

    async fn send_one(&self, row: MailOutboxRow, token: &str) {
        let mail = Mail {
            to: row.recipient.clone(),
            subject: row.subject.clone(),
            text: row.body.clone(),
        };
        let sent = self.mailer.send(mail).await;
        let now = utc_now();
        let recorded: Result<(), StoreError> = match &sent {
            Ok(()) => write_tx!(self.db, |tx| {
                if !store::complete(tx, &row.id, token).await? {
                    tracing::warn!(mail_id = %row.id, "mail sent after its claim lapsed");
                }
                Ok(())
            }),
            Err(error) => {
                let retry_at = next_attempt_at(&self.retry_delays, row.attempts, now);
                let message = error.to_string();
                write_tx!(self.db, |tx| {
                    store::release(tx, &row.id, token, &message, retry_at, now).await
                })
            }
        };
        match (sent, recorded) {
            (_, Err(error)) => {
                // The lease lapses and another pass takes the row again.
                tracing::warn!(%error, mail_id = %row.id, "could not record a mail's outcome");
            }
            (Err(error), Ok(())) => {
                tracing::warn!(%error, mail_id = %row.id, attempts = row.attempts, "could not send mail");
            }
            (Ok(()), Ok(())) => {
                tracing::info!(mail_id = %row.id, attempts = row.attempts, "mail sent");
            }
        }
    }
}

/// When the next attempt is due after `attempts` failed ones; `None` once
/// the schedule is used up.
fn next_attempt_at(
    delays: &[Duration],
    attempts: i32,
    now: NaiveDateTime,
) -> Option<NaiveDateTime> {
    let index = usize::try_from(attempts).ok()?.checked_sub(1)?;
    let delay = delays.get(index)?;
    Some(now + chrono::Duration::from_std(*delay).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_follow_the_schedule_then_stop() {
        let delays = [Duration::from_secs(5), Duration::from_secs(60)];
        let now = utc_now();
        let after = |attempts| next_attempt_at(&delays, attempts, now);
        assert_eq!(after(1), Some(now + chrono::Duration::seconds(5)));
        assert_eq!(after(2), Some(now + chrono::Duration::seconds(60)));
        assert_eq!(after(3), None);
        assert_eq!(after(0), None);
    }
}
