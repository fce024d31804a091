//! Metrics in the Prometheus text format (`GET /metrics`).
//!
//! Figures are recorded through the `metrics` facade where they happen (the
//! edge here, the runtime's figures at each scrape) and rendered by its
//! Prometheus exporter; nothing here formats the text by hand. Label values
//! are bounded sets (route templates, methods, status codes, kind names),
//! never ids, so the number of series stays bounded whatever callers send.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tern_actors::runtime::RuntimeFigures;

/// Upper bounds, in seconds, of the latency histograms' buckets: from a
/// cached read (about a millisecond) to a provider call near its timeout.
const LATENCY_BUCKETS_S: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Upper bounds of the committer's batch sizes (writers per transaction).
const BATCH_SIZE_BUCKETS: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];
/// Upper bounds, in seconds, of webhook delivery lag (event written to
/// delivered): from the first attempt to the last retry, hours later.
const WEBHOOK_LAG_BUCKETS_S: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 1_800.0, 7_200.0, 36_000.0,
];
/// How often histogram samples are folded into their buckets between
/// scrapes, so memory stays bounded when nobody scrapes.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);
/// The route label of a request that matched no route: one series for
/// every unknown path, whatever the path.
const UNMATCHED_ROUTE: &str = "unmatched";
/// The route label of a request whose handler failed without an answer,
/// or whose client left first.
const UNANSWERED_ROUTE: &str = "unanswered";
/// The status of a request whose client left before its answer.
const CLIENT_GONE_STATUS: u16 = 499;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder once (later calls, as in tests that
/// start several apps in one process, reuse it) and starts its upkeep.
/// `None` when another recorder was installed first: metrics are then off.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS_S)
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full("tern_commit_batch_size".into()),
                        &BATCH_SIZE_BUCKETS,
                    )
                })
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full("tern_webhook_delivery_lag_seconds".into()),
                        &WEBHOOK_LAG_BUCKETS_S,
                    )
                })
                .and_then(PrometheusBuilder::install_recorder);
            match handle {
                Ok(handle) => {
                    describe();
                    // Counters that stay at zero while all is well are
                    // scraped as zero, not absent, so an alert on them
                    // can tell "none" from "not reported".
                    counter!("tern_db_pool_failures_total").absolute(0);
                    counter!("tern_webhook_dead_letters_total").absolute(0);
                    let upkeep = handle.clone();
                    let spawned = std::thread::Builder::new()
                        .name("metrics-upkeep".into())
                        .spawn(move || loop {
                            std::thread::sleep(UPKEEP_INTERVAL);
                            upkeep.run_upkeep();
                        });
                    if let Err(error) = spawned {
                        // Each render folds the samples in too; only an
                        // unscraped node keeps them until then.
                        tracing::warn!(%error, "no metrics upkeep thread; samples wait for a scrape");
                    }
                    Some(handle)
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics recorder not installed; /metrics is empty");
                    None
                }
            }
        })
        .as_ref()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "tern_http_requests_total",
        "HTTP requests answered, by route template, method and status"
    );
    describe_histogram!(
        "tern_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request, by route template and method"
    );
    describe_gauge!("tern_actors_live", "Actors in memory, by kind");
    describe_gauge!(
        "tern_actor_mailbox_backlog",
        "Messages waiting in mailboxes, by kind"
    );
    describe_counter!(
        "tern_actor_mailbox_full_total",
        "Messages refused because a mailbox was full (503), by kind"
    );
    describe_counter!("tern_actor_activations_total", "Actor starts, by kind");
    describe_counter!("tern_actor_crashes_total", "Actors that panicked, by kind");
    describe_counter!(
        "tern_actor_restarts_total",
        "Crashed actors re-activated from the database, by kind"
    );
    describe_gauge!(
        "tern_actor_stuck",
        "Entities in flight past their stuck threshold or stopped on a lasting failure, by kind"
    );
    describe_gauge!(
        "tern_actor_oldest_in_flight_seconds",
        Unit::Seconds,
        "Age of the oldest live entity in flight, by kind"
    );
    describe_counter!("tern_timers_delivered_total", "Persisted timers delivered");
    describe_counter!(
        "tern_timers_failed_total",
        "Timer deliveries that failed and wait for a retry"
    );
    describe_gauge!(
        "tern_timer_poll_failures_in_a_row",
        "Consecutive timer polls that could not reach the database"
    );
    describe_gauge!(
        "tern_cluster_slots_owned",
        "Slots this node owns, where several nodes share PostgreSQL"
    );
    describe_histogram!(
        "tern_commit_batch_size",
        "Writers committed together in one transaction by the group committer"
    );
    describe_histogram!(
        "tern_commit_duration_seconds",
        Unit::Seconds,
        "Time to write one group commit"
    );
    describe_histogram!(
        "tern_db_pool_wait_seconds",
        Unit::Seconds,
        "Time waiting for a pooled database connection"
    );
    describe_counter!(
        "tern_db_pool_failures_total",
        "Pooled connections not had (timeout, outage): answered 503"
    );
    describe_counter!(
        "tern_provider_calls_total",
        "Provider calls by provider, operation and outcome (ok, transient, unknown, refused)"
    );
    describe_histogram!(
        "tern_provider_call_duration_seconds",
        Unit::Seconds,
        "Provider call latency by provider and operation"
    );
    describe_counter!(
        "tern_status_transitions_total",
        "Settlement and transfer status changes, by kind, from and to"
    );
    describe_counter!(
        "tern_card_authorizations_total",
        "Card authorization decisions, by decision and decline reason"
    );
    describe_counter!(
        "tern_webhook_attempts_total",
        "Webhook delivery attempts by outcome (delivered, rejected, failed)"
    );
    describe_histogram!(
        "tern_webhook_delivery_lag_seconds",
        Unit::Seconds,
        "From a webhook event written to its delivery"
    );
    describe_counter!(
        "tern_webhook_dead_letters_total",
        "Webhook events dead-lettered after their last retry"
    );
}

/// How long a rendered page is served again to callers without the
/// operator token (anyone, where none is set): a burst of their requests
/// costs one rendering.
const RENDERED_FOR: Duration = Duration::from_secs(1);

static RENDERED: Mutex<Option<(Instant, Arc<str>)>> = Mutex::new(None);

/// The text of `GET /metrics`: the runtime's figures as of now, then
/// everything recorded; `None` when no recorder could be installed.
/// Unless `fresh` (the operator asks), a page rendered within
/// [`RENDERED_FOR`] is served again.
pub fn render(figures: impl FnOnce() -> RuntimeFigures, fresh: bool) -> Option<Arc<str>> {
    let handle = install()?;
    let mut rendered = RENDERED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, text)) = rendered.as_ref().filter(|_| !fresh) {
        if at.elapsed() < RENDERED_FOR {
            return Some(text.clone());
        }
    }
    record_figures(&figures());
    let text: Arc<str> = Arc::from(handle.render());
    *rendered = Some((Instant::now(), text.clone()));
    Some(text)
}

/// Sets the runtime's figures as gauges and counters. Its counters are
/// kept by the runtime itself; here they are only reported.
fn record_figures(figures: &RuntimeFigures) {
    for (kind, figures) in &figures.kinds {
        let kind = kind.clone();
        gauge!("tern_actors_live", "kind" => kind.clone()).set(figures.live_actors as f64);
        gauge!("tern_actor_mailbox_backlog", "kind" => kind.clone())
            .set(figures.mailbox_backlog as f64);
        counter!("tern_actor_mailbox_full_total", "kind" => kind.clone())
            .absolute(figures.mailbox_full);
        counter!("tern_actor_activations_total", "kind" => kind.clone())
            .absolute(figures.activations);
        counter!("tern_actor_crashes_total", "kind" => kind.clone()).absolute(figures.crashes);
        counter!("tern_actor_restarts_total", "kind" => kind.clone()).absolute(figures.restarts);
        gauge!("tern_actor_stuck", "kind" => kind.clone()).set(figures.stuck_count as f64);
        gauge!("tern_actor_oldest_in_flight_seconds", "kind" => kind)
            .set(figures.oldest_in_flight_ms as f64 / 1_000.0);
    }
    counter!("tern_timers_delivered_total").absolute(figures.timers.delivered);
    counter!("tern_timers_failed_total").absolute(figures.timers.failed);
    gauge!("tern_timer_poll_failures_in_a_row").set(figures.timers.poll_failures_in_a_row as f64);
    // One process on SQLite owns every slot.
    let slots_owned = figures
        .cluster
        .as_ref()
        .map_or(tern_schema::store::cluster::SLOTS as usize, |cluster| {
            cluster.slots_owned
        });
    gauge!("tern_cluster_slots_owned").set(slots_owned as f64);
}

/// Records each request: its route template (never its path, which holds
/// ids), method and status, and how long it took.
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut unanswered = Unanswered {
        method: method_label(req.method()),
        started: Instant::now(),
        counted: false,
    };
    let outcome = next.call(req).await;
    unanswered.counted = true;
    let (method, started) = (unanswered.method, unanswered.started);
    match outcome {
        Ok(response) => {
            let route = response
                .request()
                .match_pattern()
                .unwrap_or_else(|| UNMATCHED_ROUTE.to_owned());
            count(route, method, response.status().as_u16(), started);
            Ok(response)
        }
        // A panic or a cancelled handler, answered by the server from the
        // error: its route is no longer known.
        Err(error) => {
            let status = error.as_response_error().status_code().as_u16();
            count(UNANSWERED_ROUTE.to_owned(), method, status, started);
            Err(error)
        }
    }
}

/// A request whose future the server dropped before its answer (a client
/// gone, as the server notices it): counted as nginx does, status 499,
/// route unknown. The handler itself runs to its end on its own task.
struct Unanswered {
    method: &'static str,
    started: Instant,
    counted: bool,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.counted {
            count(
                UNANSWERED_ROUTE.to_owned(),
                self.method,
                CLIENT_GONE_STATUS,
                self.started,
            );
        }
    }
}

fn count(route: String, method: &'static str, status: u16, started: Instant) {
    histogram!("tern_http_request_duration_seconds", "route" => route.clone(), "method" => method)
        .record(started.elapsed().as_secs_f64());
    counter!("tern_http_requests_total", "route" => route, "method" => method, "status" => status.to_string())
        .increment(1);
}

/// The method as a label: the standard ones by name, any other as one.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_a_bounded_label() {
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        let odd = Method::from_bytes(b"PURGE").expect("a method");
        assert_eq!(method_label(&odd), "other");
    }
}
