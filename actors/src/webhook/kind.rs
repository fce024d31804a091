//! The webhook endpoint actor: one per merchant endpoint, the only writer of
//! its endpoint row and of its events' delivery state. It picks the due
//! events that head their transfer's queue, attempts them concurrently
//! outside its serialisation, and records each batch's outcomes in one
//! transaction (the events' states, their attempts, the retry timers).

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{NaiveDateTime, Utc};
use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::models::{WebhookAttemptRow, WebhookEndpointRow, WebhookEventRow};
use tern_schema::store::webhooks as store;
use tern_schema::types::{as_utc, truncate_micros, utc_now};
use tern_schema::vocabulary::{EventId, MerchantId, TransferId};
use tern_schema::{Db, Plan, RowWrite};

use super::deliver::{Attempt, Deliverer};
use super::machine::{self, Delivery, Event, Outcome, Policy, Status};
use crate::runtime::{
    EntityEnv, EntityKind, RuntimeError, RuntimeResult, TimerFiring, TimerSpec, Transition,
};

/// Attempts one endpoint has under way at once.
pub const IN_FLIGHT_MAX: usize = 256;
/// Events one poll picks; a full pick polls again at once.
pub const PICK_MAX: usize = 64;
/// Payload of the retry timers.
const TIMER_RETRY: &str = "retry";
/// Retries due sooner than this are also woken from memory, so a short
/// delay is not stretched by the timer service's polling; the persisted
/// timer stays the guarantee across restarts.
const SHORT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Clone)]
pub struct WebhookContext {
    pub deliverer: Arc<Deliverer>,
    pub policy: Policy,
}

/// The endpoint as stored, and what the actor has under way in memory
/// (rebuilt empty at activation: nothing is under way after a restart, and
/// the pending rows are picked again).
#[derive(Clone, Debug)]
pub struct EndpointState {
    pub endpoint: Option<WebhookEndpointRow>,
    in_flight: HashSet<EventId>,
    busy_since: Option<NaiveDateTime>,
    poll_pending: bool,
}

pub enum EndpointCommand {
    /// Store the endpoint, replacing an earlier one.
    Put {
        url: String,
        secret: String,
        actor: AuditActor,
        request_id: String,
    },
    /// Remove the endpoint; its pending events are skipped.
    Delete {
        actor: AuditActor,
        request_id: String,
    },
    /// Re-arm the transfer's delivered and dead-lettered events.
    Replay {
        transfer_id: TransferId,
        actor: AuditActor,
        request_id: String,
    },
    /// Events may be due (new ones, or the actor just activated).
    Wake,
    /// Pick due events and start attempting them.
    Poll,
    /// A batch of attempts ended.
    Attempted(Vec<(WebhookEventRow, Attempt)>),
    /// A batch's outcomes were written, or `failure` says why not.
    Recorded {
        ids: Vec<EventId>,
        failure: Option<String>,
    },
    Timer(TimerFiring),
}

#[derive(Debug)]
pub enum EndpointReply {
    Ack,
    Stored(WebhookEndpointRow),
    Deleted(bool),
    Requeued(usize),
    /// Replay with no endpoint to deliver to.
    NoEndpoint,
}

pub struct WebhookEndpointKind;

impl EntityKind for WebhookEndpointKind {
    const NAME: &'static str = "webhook_endpoint";
    type State = EndpointState;
    type Command = EndpointCommand;
    type Reply = EndpointReply;
    type Context = WebhookContext;

    async fn load(env: EntityEnv<WebhookContext>) -> RuntimeResult<Option<EndpointState>> {
        let mut pooled = env.db.get().await?;
        let endpoint = store::endpoint(&mut pooled.tx(), &merchant_of(&env)).await?;
        Ok(Some(EndpointState {
            endpoint,
            in_flight: HashSet::new(),
            busy_since: None,
            poll_pending: false,
        }))
    }

    async fn handle(
        env: EntityEnv<WebhookContext>,
        state: EndpointState,
        command: EndpointCommand,
    ) -> RuntimeResult<Transition<Self>> {
        match command {
            EndpointCommand::Put {
                url,
                secret,
                actor,
                request_id,
            } => put(&env, state, url, secret, actor, request_id).await,
            EndpointCommand::Delete { actor, request_id } => {
                delete(&env, state, actor, request_id).await
            }
            EndpointCommand::Replay {
                transfer_id,
                actor,
                request_id,
            } => replay(&env, state, transfer_id, actor, request_id).await,
            EndpointCommand::Wake => Ok(wake(state)),
            EndpointCommand::Poll => poll(&env, state).await,
            EndpointCommand::Attempted(results) => attempted(&env, state, results).await,
            EndpointCommand::Recorded { ids, failure } => {
                Ok(recorded(&env.id, state, ids, failure))
            }
            EndpointCommand::Timer(firing) => {
                let id = firing.id.clone();
                // Another node fired it: waking costs nothing anyway.
                crate::runtime::timers::complete(&env.db, firing).await?;
                tracing::debug!(endpoint = %env.id, timer = %id, "webhook retry due");
                Ok(wake(state))
            }
        }
    }

    fn in_flight_since(state: &EndpointState) -> Option<NaiveDateTime> {
        state.busy_since
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let mut pooled = db.get().await?;
        let after = after.as_deref().unwrap_or("");
        let ids = store::merchants_with_pending(&mut pooled.tx(), after, limit).await?;
        Ok(ids.into_iter().map(String::from).collect())
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<EndpointCommand> {
        if firing.payload == TIMER_RETRY {
            Ok(EndpointCommand::Timer(firing))
        } else {
            Err(RuntimeError::InvalidTimer {
                reason: format!("unknown payload `{}`", firing.payload),
                id: firing.id,
            })
        }
    }

    fn on_activate(_state: &EndpointState) -> Option<EndpointCommand> {
        // Pending events may wait from before a restart or a passivation.
        Some(EndpointCommand::Wake)
    }

    fn wake_command() -> Option<EndpointCommand> {
        Some(EndpointCommand::Wake)
    }
}

/// Schedules one poll, however many wakes arrive before it runs.
fn wake(mut state: EndpointState) -> Transition<WebhookEndpointKind> {
    if state.poll_pending {
        return Transition::new(state, EndpointReply::Ack);
    }
    state.poll_pending = true;
    Transition::new(state, EndpointReply::Ack).with_follow_up(async { Some(EndpointCommand::Poll) })
}

async fn poll(
    env: &EntityEnv<WebhookContext>,
    mut state: EndpointState,
) -> RuntimeResult<Transition<WebhookEndpointKind>> {
    state.poll_pending = false;
    let Some(endpoint) = state.endpoint.clone() else {
        // Events written while the endpoint was being removed: no recipient.
        let plan = Plan {
            rows: vec![RowWrite::PendingEventsSkipped {
                merchant_id: merchant_of(env),
                at: utc_now(),
            }],
            ..Plan::default()
        };
        env.db.commit(plan).await?;
        return Ok(Transition::new(state, EndpointReply::Ack));
    };
    let room = IN_FLIGHT_MAX.saturating_sub(state.in_flight.len());
    if room == 0 {
        // The batches under way poll again when they end.
        return Ok(Transition::new(state, EndpointReply::Ack));
    }
    let pick = room.min(PICK_MAX);
    // Events under way are still pending in the database and head their
    // transfers: ask for enough to see past them.
    let limit = i64::try_from(pick + state.in_flight.len()).unwrap_or(i64::MAX);
    let due = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        store::due_heads(&mut tx, &merchant_of(env), utc_now(), limit).await?
    };
    let batch: Vec<WebhookEventRow> = due
        .into_iter()
        .filter(|event| !state.in_flight.contains(&event.id))
        .take(pick)
        .collect();
    if batch.is_empty() {
        return Ok(Transition::new(state, EndpointReply::Ack));
    }
    let full = batch.len() == pick;
    state
        .in_flight
        .extend(batch.iter().map(|event| event.id.clone()));
    state.busy_since.get_or_insert_with(utc_now);
    let deliverer = env.ctx.deliverer.clone();
    let attempts = async move {
        let results = futures_util::future::join_all(batch.into_iter().map(|event| {
            let deliverer = deliverer.clone();
            let endpoint = endpoint.clone();
            async move {
                let attempt = deliverer
                    .attempt(&endpoint.url, &endpoint.secret, &event)
                    .await;
                (event, attempt)
            }
        }))
        .await;
        Some(EndpointCommand::Attempted(results))
    };
    if full {
        // More may be due: start the next batch while this one runs.
        state.poll_pending = true;
    }
    let transition =
        Transition::<WebhookEndpointKind>::new(state, EndpointReply::Ack).with_follow_up(attempts);
    Ok(if full {
        transition.with_follow_up(async { Some(EndpointCommand::Poll) })
    } else {
        transition
    })
}

/// An event's delivery as the machine sees it.
fn delivery_of(event: &WebhookEventRow) -> Delivery {
    Delivery {
        status: event.status,
        attempts: u32::try_from(event.attempts).unwrap_or(0),
        round: u32::try_from(event.round).unwrap_or(0),
        next_attempt_at: event.next_attempt_at.map(as_utc),
    }
}

/// Outcomes are recorded by a follow-up, outside the actor's
/// serialisation: the actor goes on picking and attempting other transfers'
/// events while the group commit runs. The attempted events stay in
/// `in_flight` until [`recorded`], so none is picked again meanwhile, and a
/// transfer's next event heads its queue only once this one is recorded.
async fn attempted(
    env: &EntityEnv<WebhookContext>,
    state: EndpointState,
    results: Vec<(WebhookEventRow, Attempt)>,
) -> RuntimeResult<Transition<WebhookEndpointKind>> {
    let now = Utc::now();
    let ids: Vec<EventId> = results.iter().map(|(event, _)| event.id.clone()).collect();
    let mut writes = Vec::with_capacity(results.len());
    for (event, attempt) in results {
        let before = delivery_of(&event);
        let draw: f64 = rand::random();
        let moved = machine::transition(
            &before,
            &Event::Attempted(attempt.outcome.clone()),
            &env.ctx.policy,
            now,
            draw,
        );
        let Ok(next) = moved else { continue };
        log_attempt(&env.id, &event, &attempt, next.status);
        writes.push(record_of(event, &attempt, next));
    }
    let soonest = writes
        .iter()
        .filter_map(|(next, _)| next.next_attempt_at)
        .min()
        .and_then(|due| {
            (as_utc(due) - Utc::now())
                .max(chrono::Duration::zero())
                .to_std()
                .ok()
        });
    let rows = writes
        .into_iter()
        .map(|(next, attempt)| {
            let retry = next.next_attempt_at.map(|due_at| {
                let timer_id = format!("{}:{}:{}", next.id, next.round, next.attempts);
                TimerSpec {
                    id: &timer_id,
                    kind: WebhookEndpointKind::NAME,
                    entity_id: &env.id,
                    due_at,
                    payload: TIMER_RETRY,
                }
                .row()
            });
            RowWrite::Attempt {
                next,
                attempt,
                retry,
            }
        })
        .collect();
    let db = env.db.clone();
    let record = async move {
        let plan = Plan {
            rows,
            ..Plan::default()
        };
        let written = db.commit(plan).await;
        Some(EndpointCommand::Recorded {
            ids,
            failure: written.err().map(|error| error.to_string()),
        })
    };
    let transition = Transition::new(state, EndpointReply::Ack).with_follow_up(record);
    Ok(match soonest {
        Some(delay) if delay <= SHORT_RETRY_MAX => transition.with_follow_up(async move {
            tokio::time::sleep(delay).await;
            Some(EndpointCommand::Wake)
        }),
        _ => transition,
    })
}

/// A batch's outcomes are durable (or failed to be, and the events, still
/// pending, are attempted again): its events leave `in_flight`, and a
/// delivered or dead event lets its transfer's next one through.
fn recorded(
    endpoint: &str,
    mut state: EndpointState,
    ids: Vec<EventId>,
    failure: Option<String>,
) -> Transition<WebhookEndpointKind> {
    if let Some(failure) = failure {
        tracing::warn!(endpoint, %failure, events = ids.len(), "webhook outcomes not recorded; the events will be attempted again");
    }
    for id in &ids {
        state.in_flight.remove(id);
    }
    if state.in_flight.is_empty() {
        state.busy_since = None;
    }
    wake(state)
}

/// The event row after an attempt, and the attempt's record.
fn record_of(
    mut event: WebhookEventRow,
    attempt: &Attempt,
    next: Delivery,
) -> (WebhookEventRow, WebhookAttemptRow) {
    let at = truncate_micros(attempt.at.naive_utc());
    let (status_code, error) = match &attempt.outcome {
        Outcome::Accepted { status } => (Some(i32::from(*status)), None),
        Outcome::Rejected { status } => (
            Some(i32::from(*status)),
            Some(format!("the receiver answered {status}")),
        ),
        Outcome::Failed { error } => (None, Some(error.clone())),
    };
    let record = WebhookAttemptRow {
        event_id: event.id.clone(),
        attempt: i32::try_from(next.attempts).unwrap_or(i32::MAX),
        round: event.round,
        attempted_at: at,
        status_code,
        error: error.clone(),
        duration_ms: i64::try_from(attempt.duration.as_millis()).unwrap_or(i64::MAX),
    };
    event.status = next.status;
    event.attempts = record.attempt;
    event.next_attempt_at = next
        .next_attempt_at
        .map(|due| truncate_micros(due.naive_utc()));
    event.last_attempt_at = Some(at);
    event.last_status_code = status_code;
    event.last_error = error;
    if next.status == Status::Delivered {
        event.delivered_at = Some(utc_now());
    }
    event.updated_at = utc_now();
    (event, record)
}

fn log_attempt(endpoint: &str, event: &WebhookEventRow, attempt: &Attempt, next: Status) {
    let outcome = match &attempt.outcome {
        Outcome::Accepted { .. } => "delivered",
        Outcome::Rejected { .. } => "rejected",
        Outcome::Failed { .. } => "failed",
    };
    // A replayed round's lag would count from the event's first writing.
    let first_round = (event.round == 0).then_some(event.created_at);
    crate::metrics::webhook_attempt(outcome, first_round, next == Status::Dead);
    match (&attempt.outcome, next) {
        (Outcome::Accepted { .. }, _) => tracing::debug!(
            endpoint, event = %event.id, request_id = %event.request_id, "webhook delivered"
        ),
        (outcome, Status::Dead) => tracing::warn!(
            endpoint, event = %event.id, request_id = %event.request_id, ?outcome,
            "webhook dead-lettered after its last retry"
        ),
        (outcome, _) => tracing::info!(
            endpoint, event = %event.id, request_id = %event.request_id, ?outcome,
            "webhook attempt failed; retry scheduled"
        ),
    }
}

/// The merchant whose endpoint this is: an endpoint actor's id is its
/// merchant's id.
fn merchant_of(env: &EntityEnv<WebhookContext>) -> MerchantId {
    MerchantId::new(&*env.id)
}

fn audit_record(
    env: &EntityEnv<WebhookContext>,
    actor: AuditActor,
    action: &'static str,
    request_id: String,
    data: serde_json::Value,
) -> AuditRecord {
    AuditRecord {
        merchant_id: merchant_of(env),
        actor,
        action,
        resource_type: "webhook_endpoint",
        resource_id: env.id.to_string(),
        request_id,
        data,
    }
}

async fn put(
    env: &EntityEnv<WebhookContext>,
    mut state: EndpointState,
    url: String,
    secret: String,
    actor: AuditActor,
    request_id: String,
) -> RuntimeResult<Transition<WebhookEndpointKind>> {
    let now = utc_now();
    let row = WebhookEndpointRow {
        merchant_id: merchant_of(env),
        url,
        secret,
        created_at: state
            .endpoint
            .as_ref()
            .map_or(now, |earlier| earlier.created_at),
        updated_at: now,
    };
    let record = audit_record(
        env,
        actor,
        "webhook_endpoint.stored",
        request_id,
        json!({"url": row.url, "replaced": state.endpoint.is_some()}),
    );
    let plan = Plan {
        audit: vec![record],
        rows: vec![RowWrite::WebhookEndpoint(row.clone())],
        ..Plan::default()
    };
    env.db.commit(plan).await?;
    state.endpoint = Some(row.clone());
    Ok(Transition::new(state, EndpointReply::Stored(row)))
}

async fn delete(
    env: &EntityEnv<WebhookContext>,
    mut state: EndpointState,
    actor: AuditActor,
    request_id: String,
) -> RuntimeResult<Transition<WebhookEndpointKind>> {
    // Written whatever this actor last read: another node may have stored
    // an endpoint since. The store records the audit only if it removed one.
    let existed = state.endpoint.is_some();
    let record = audit_record(
        env,
        actor,
        "webhook_endpoint.deleted",
        request_id,
        json!({}),
    );
    let plan = Plan {
        rows: vec![
            RowWrite::WebhookEndpointRemoved {
                merchant_id: merchant_of(env),
                audit: record,
            },
            RowWrite::PendingEventsSkipped {
                merchant_id: merchant_of(env),
                at: utc_now(),
            },
        ],
        ..Plan::default()
    };
    env.db.commit(plan).await?;
    if existed {
        tracing::info!(endpoint = %env.id, "webhook endpoint removed; pending events skipped");
    }
    state.endpoint = None;
    Ok(Transition::new(state, EndpointReply::Deleted(existed)))
}

async fn replay(
    env: &EntityEnv<WebhookContext>,
    state: EndpointState,
    transfer_id: TransferId,
    actor: AuditActor,
    request_id: String,
) -> RuntimeResult<Transition<WebhookEndpointKind>> {
    if state.endpoint.is_none() {
        return Ok(Transition::new(state, EndpointReply::NoEndpoint));
    }
    let record = audit_record(
        env,
        actor,
        "webhook_events.replayed",
        request_id,
        json!({"transfer_id": transfer_id}),
    );
    let plan = Plan {
        audit: vec![record],
        rows: vec![RowWrite::EventsRearmed {
            merchant_id: merchant_of(env),
            transfer_id,
            at: utc_now(),
        }],
        ..Plan::default()
    };
    let requeued = env.db.commit(plan).await?.rearmed;
    let transition = if requeued > 0 {
        wake(state)
    } else {
        Transition::new(state, EndpointReply::Ack)
    };
    Ok(Transition {
        reply: EndpointReply::Requeued(requeued),
        ..transition
    })
}
