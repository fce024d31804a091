//! `GET /metrics`: the Prometheus text format, read back with a parser
//! independent of the exporter that wrote it; the figures move when work
//! is done; with TERN_OPERATOR_TOKEN set only the operator reads it.

use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};
use serde_json::json;

use crate::helpers::{TestApp, OPERATOR_TOKEN};

type Scrape = MetricsExposition<PrometheusType, PrometheusValue>;

async fn scrape(app: &TestApp) -> Scrape {
    let response = app
        .get("/metrics")
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.expect("body");
    parse_prometheus(&text).unwrap_or_else(|error| panic!("{error:?} in\n{text}"))
}

/// Each sample of the family `name`: its labels, and its value.
fn samples(scrape: &Scrape, name: &str) -> Vec<(Vec<(String, String)>, PrometheusValue)> {
    let Some(family) = scrape.families.get(name) else {
        return Vec::new();
    };
    let names = family.get_label_names().to_vec();
    family
        .iter_samples()
        .map(|sample| {
            let labels = sample.get_labelset().expect("labels");
            let labels = names
                .iter()
                .map(|name| {
                    let value = labels.get_label_value(name).unwrap_or_default();
                    (name.clone(), value.to_owned())
                })
                .collect();
            (labels, sample.value.clone())
        })
        .collect()
}

/// The values of the samples of `name` whose labels include `labels`
/// (counters and gauges; NaN for other types).
fn matching(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    samples(scrape, name)
        .into_iter()
        .filter(|(have, _)| {
            labels
                .iter()
                .all(|(key, want)| have.iter().any(|(k, v)| k == key && v == want))
        })
        .map(|(_, value)| match value {
            PrometheusValue::Counter(counter) => counter.value.as_f64(),
            PrometheusValue::Gauge(number) | PrometheusValue::Unknown(number) => number.as_f64(),
            _ => f64::NAN,
        })
        .collect()
}

/// The value of the first counter or gauge `name` whose labels include
/// `labels`.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    matching(scrape, name, labels).first().copied()
}

/// The sum of the counter `name` over the samples whose labels include
/// `labels`.
fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    matching(scrape, name, labels).iter().sum()
}

#[actix_web::test]
async fn requests_and_actors_are_counted_by_route_template_never_by_id() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let quotes = [
        ("route", "/v1/quotes"),
        ("method", "POST"),
        ("status", "201"),
    ];
    let before = value(&scrape(&app).await, "tern_http_requests_total", &quotes).unwrap_or(0.0);
    for _ in 0..3 {
        let response = app
            .post("/v1/quotes")
            .bearer_auth(&merchant.api_key)
            .json(&json!({"send_currency": "EUR", "send_amount": "100.00",
                          "receive_asset": "USDC", "receive_network": "polygon"}))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 201);
    }
    let quote_id = format!("qt_{}", uuid::Uuid::now_v7().simple());
    let missing = app
        .get(&format!("/v1/quotes/{quote_id}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(missing.status(), 404);
    let unknown = app.get("/no/such/path/123").send().await.expect("request");
    assert_eq!(unknown.status(), 404);

    let after = scrape(&app).await;
    let counted = value(&after, "tern_http_requests_total", &quotes).expect("counted");
    assert!(counted >= before + 3.0, "{before} then {counted}");
    let read = [("route", "/v1/quotes/{id}"), ("status", "404")];
    assert!(
        value(&after, "tern_http_requests_total", &read).is_some_and(|count| count >= 1.0),
        "a read of a missing quote, under its route's template"
    );
    assert!(
        value(
            &after,
            "tern_http_requests_total",
            &[("route", "unmatched")]
        )
        .is_some(),
        "an unknown path is one series"
    );
    for (labels, _) in samples(&after, "tern_http_requests_total") {
        for (_, label) in &labels {
            assert!(
                !label.contains(&quote_id) && !label.contains("123"),
                "{labels:?}"
            );
        }
    }
    let latency = samples(&after, "tern_http_request_duration_seconds")
        .into_iter()
        .find(|(labels, _)| {
            labels
                .iter()
                .any(|(k, v)| k == "route" && v == "/v1/quotes")
        })
        .expect("a latency histogram");
    assert!(
        matches!(&latency.1, PrometheusValue::Histogram(histogram)
            if histogram.buckets.len() > 1 && histogram.count.unwrap_or(0) >= 3),
        "{latency:?}"
    );
    for kind in ["settlement", "transfer", "card", "webhook_endpoint"] {
        assert!(
            value(&after, "tern_actors_live", &[("kind", kind)]).is_some(),
            "{kind}"
        );
        assert!(value(&after, "tern_actor_stuck", &[("kind", kind)]).is_some());
    }
}

#[actix_web::test]
async fn with_an_operator_token_only_the_operator_reads_metrics() {
    let app = TestApp::spawn().await;
    let stranger = app.get("/metrics").send().await.expect("request");
    assert_eq!(stranger.status(), 401);
    let wrong = app
        .get("/metrics")
        .bearer_auth("not-the-operator-token-at-all")
        .send()
        .await
        .expect("request");
    assert_eq!(wrong.status(), 401);
    scrape(&app).await;

    let open = TestApp::spawn_with(|config| config.operator_token = None).await;
    let response = open.get("/metrics").send().await.expect("request");
    assert_eq!(response.status(), 200, "no token set: open, as decided");
}

/// The count of the histogram `name` (summed over its label sets).
fn observations(scrape: &Scrape, name: &str) -> u64 {
    samples(scrape, name)
        .into_iter()
        .map(|(_, value)| match value {
            PrometheusValue::Histogram(histogram) => histogram.count.unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[actix_web::test]
async fn a_transfer_moves_the_transition_provider_commit_and_pool_figures() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let before = scrape(&app).await;
    let created = crate::helpers::transfers::create(&app, &merchant, "pm_card_visa").await;
    let done = crate::helpers::transfers::finished(
        &app,
        &merchant,
        &crate::helpers::transfers::id(&created),
    )
    .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let after = scrape(&app).await;

    let moved = |name: &str, labels: &[(&str, &str)]| {
        total(&after, name, labels) - total(&before, name, labels)
    };
    let succeeded = [("kind", "transfer"), ("to", "succeeded")];
    assert!(moved("tern_status_transitions_total", &succeeded) >= 1.0);
    let settled = [("kind", "settlement"), ("to", "succeeded")];
    assert!(
        moved("tern_status_transitions_total", &settled) >= 2.0,
        "both legs"
    );
    let charged = [("provider", "acquirer"), ("outcome", "ok")];
    assert!(moved("tern_provider_calls_total", &charged) >= 1.0);
    let paid = [("provider", "custodian"), ("outcome", "ok")];
    assert!(moved("tern_provider_calls_total", &paid) >= 1.0);
    for histogram in [
        "tern_commit_batch_size",
        "tern_commit_duration_seconds",
        "tern_db_pool_wait_seconds",
        "tern_provider_call_duration_seconds",
    ] {
        assert!(
            observations(&after, histogram) > observations(&before, histogram),
            "{histogram}"
        );
    }
}

/// Every metric the shipped alert rules and dashboard name, with the
/// suffixes a histogram's series add taken off.
fn named_by_operations_files() -> std::collections::BTreeSet<String> {
    let files = [
        include_str!("../../docs/operate/alerts.yml"),
        include_str!("../../docs/operate/grafana-dashboard.json"),
    ];
    let pattern = regex::Regex::new(r"tern_[a-z0-9_]+").expect("pattern");
    files
        .iter()
        .flat_map(|text| pattern.find_iter(text).map(|found| found.as_str()))
        .map(|name| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
                .to_owned()
        })
        .collect()
}

#[actix_web::test]
async fn every_metric_the_alert_rules_and_dashboard_name_is_served() {
    let receiver = crate::webhook_receiver::Receiver::start().await;
    let ca_file = receiver.ca_file().to_path_buf();
    let app = TestApp::spawn_with(move |config| {
        crate::helpers::webhooks::fast_webhooks(config);
        config.webhook_allow_private = true;
        config.webhook_ca_file = Some(ca_file);
    })
    .await;
    // Work that records each kind of figure: a transfer whose events are
    // delivered, and a card authorization.
    let merchant = app.merchant().await;
    let url = receiver.url("/hooks");
    crate::helpers::webhooks::configure(
        &app,
        &merchant,
        &url,
        crate::helpers::webhooks::WHSEC_SECRET,
    )
    .await;
    let created = crate::helpers::transfers::create(&app, &merchant, "pm_card_visa").await;
    crate::helpers::transfers::finished(&app, &merchant, &crate::helpers::transfers::id(&created))
        .await;
    receiver
        .wait_for(5, std::time::Duration::from_secs(20))
        .await;
    let (_, card) = crate::helpers::cards::funded_card(&app, "50.00").await;
    crate::helpers::cards::authorize(&app, &card, 1_000).await;

    let scrape = scrape(&app).await;
    let named = named_by_operations_files();
    assert!(named.len() > 15, "{named:?}");
    let missing: Vec<&String> = named
        .iter()
        .filter(|name| !scrape.families.contains_key(name.as_str()))
        .collect();
    assert!(missing.is_empty(), "named but not served: {missing:?}");
}
