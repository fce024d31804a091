//! Traces over OTLP (issue 22): the real binary and its sandbox export to a
//! receiver in the test; one transfer's spans must form one trace from the
//! caller's `traceparent` through the entity actors, their writes and
//! provider calls, into the provider's own spans; the committed batch links
//! the writes it carried; a webhook carries the context of its delivery.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::helpers::webhooks::{WAIT_MAX, WHSEC_SECRET};
use crate::otlp_receiver::{ExportedSpan, OtlpReceiver};
use crate::processes::{put_endpoint_at, quote_at, transfer_at, Cluster};
use crate::webhook_receiver::Receiver;

const SPANS_WAIT_MAX: Duration = Duration::from_secs(30);

#[actix_web::test]
async fn a_transfer_is_one_trace_from_the_callers_request_to_the_providers() {
    let otlp = OtlpReceiver::start();
    let webhooks = Receiver::start().await;
    let env = [
        ("TERN_OTLP_ENDPOINT", otlp.endpoint()),
        // The batch processor sends every 100 ms instead of every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ("TERN_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        (
            "TERN_WEBHOOK_CA_FILE",
            webhooks.ca_file().display().to_string(),
        ),
    ];
    let cluster = Cluster::start_with("200ms,200ms,200ms", &env).await;
    let api_key = cluster.register("Traced").await;
    let (client, base) = (&cluster.client, cluster.base.as_str());
    put_endpoint_at(
        client,
        base,
        &api_key,
        &webhooks.url("/traced"),
        WHSEC_SECRET,
    )
    .await;
    let quote = quote_at(client, base, &api_key).await;

    // The caller's own trace, which Tern's request span must continue.
    let trace_id = format!("{:032x}", rand::random::<u128>() | 1);
    let caller_span = format!("{:016x}", rand::random::<u64>() | 1);
    let created = transfer_at(client, base, &api_key, &quote)
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .send()
        .await
        .expect("transfer");
    assert_eq!(created.status(), 201);
    let delivered = webhooks.wait_for(1, WAIT_MAX).await;

    // Spans arrive in batches as they end, children before their parents:
    // wait until the whole chain is there, then say what is wrong if not.
    let spans = otlp
        .wait_until(SPANS_WAIT_MAX, |spans| {
            let trace = Trace::of(spans, &trace_id);
            let rooted = |span: &ExportedSpan| {
                trace
                    .ancestors(span)
                    .last()
                    .is_some_and(|root| root.name == "request")
            };
            trace.named("provider.call").count() >= 2
                && trace.named("provider.call").all(rooted)
                && trace.named("sandbox.request").count() >= 2
                && spans.iter().any(|s| s.name == "db.commit")
                && delivered_span(spans, &delivered[0]).is_some_and(|s| s.trace_id == trace_id)
        })
        .await;
    let trace = Trace::of(&spans, &trace_id);

    // The request continues the caller's span.
    let request = trace
        .named("request")
        .find(|s| s.attribute("path") == Some("/v1/transfers"))
        .unwrap_or_else(|| panic!("no request span:\n{}", trace.render()));
    assert_eq!(request.parent_span_id, caller_span, "{}", trace.render());

    // Each provider call descends from the request through the transfer's
    // actor, and the provider's span is the call's child, in another
    // process.
    for call in trace.named("provider.call") {
        let ancestors = trace.ancestors(call);
        let names: Vec<&str> = ancestors.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            ancestors.last().map(|s| &s.span_id),
            Some(&request.span_id),
            "{names:?}\n{}",
            trace.render()
        );
        assert!(names.contains(&"actor.message"), "{names:?}");
        assert!(
            ancestors
                .iter()
                .any(|s| s.name == "actor.message" && s.attribute("kind") == Some("transfer")),
            "{}",
            trace.render()
        );
    }
    let sandbox = trace
        .named("sandbox.request")
        .next()
        .expect("a sandbox span");
    assert_eq!(
        trace
            .by_id
            .get(sandbox.parent_span_id.as_str())
            .map(|s| s.name.as_str()),
        Some("provider.call"),
        "{}",
        trace.render()
    );

    // The transfer's writes are in the trace, and a committed batch links
    // one of them.
    let writes: Vec<&ExportedSpan> = trace.named("db.write").collect();
    assert!(!writes.is_empty(), "{}", trace.render());
    let linked = spans.iter().filter(|s| s.name == "db.commit").any(|batch| {
        batch
            .links
            .iter()
            .any(|(t, s)| t == &trace_id && writes.iter().any(|w| &w.span_id == s))
    });
    assert!(linked, "no committed batch links the transfer's writes");

    // The webhook names the span of its delivery, in the transfer's trace.
    let deliver = delivered_span(&spans, &delivered[0]).expect("the delivery's span");
    assert_eq!(deliver.name, "webhook.deliver");
    assert_eq!(deliver.trace_id, trace_id);
}

/// The exported span whose context a delivered webhook carried.
fn delivered_span<'s>(
    spans: &'s [ExportedSpan],
    delivered: &crate::webhook_receiver::Received,
) -> Option<&'s ExportedSpan> {
    let traceparent = delivered.header("traceparent")?;
    let parts: Vec<&str> = traceparent.split('-').collect();
    let [_, trace_id, span_id, _] = parts.as_slice() else {
        return None;
    };
    spans
        .iter()
        .find(|s| &s.trace_id == trace_id && &s.span_id == span_id)
}

/// The spans of one trace, by id.
struct Trace<'s> {
    spans: Vec<&'s ExportedSpan>,
    by_id: HashMap<&'s str, &'s ExportedSpan>,
}

impl<'s> Trace<'s> {
    fn of(spans: &'s [ExportedSpan], trace_id: &str) -> Trace<'s> {
        let spans: Vec<&ExportedSpan> = spans.iter().filter(|s| s.trace_id == trace_id).collect();
        let by_id = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
        Trace { spans, by_id }
    }

    fn named<'t>(&'t self, name: &'t str) -> impl Iterator<Item = &'s ExportedSpan> + 't {
        self.spans.iter().copied().filter(move |s| s.name == name)
    }

    /// Parent, grandparent, ... as far as the trace's spans reach.
    fn ancestors(&self, span: &ExportedSpan) -> Vec<&'s ExportedSpan> {
        let mut chain = Vec::new();
        let mut parent = span.parent_span_id.as_str();
        while let Some(next) = self.by_id.get(parent) {
            chain.push(*next);
            parent = next.parent_span_id.as_str();
            if chain.len() > self.spans.len() {
                break;
            }
        }
        chain
    }

    /// The trace as an indented tree, for failure messages.
    fn render(&self) -> String {
        let mut out = String::new();
        let roots = self
            .spans
            .iter()
            .filter(|s| !self.by_id.contains_key(s.parent_span_id.as_str()));
        for root in roots {
            self.render_from(root, 0, &mut out);
        }
        out
    }

    fn render_from(&self, span: &ExportedSpan, depth: usize, out: &mut String) {
        out.push_str(&format!(
            "{}{} {:?}\n",
            "  ".repeat(depth),
            span.name,
            span.attributes
        ));
        if depth > 64 {
            return;
        }
        for child in self
            .spans
            .iter()
            .filter(|s| s.parent_span_id == span.span_id)
        {
            self.render_from(child, depth + 1, out);
        }
    }
}

/// On several nodes (PostgreSQL), a request the receiving node forwards to
/// the entity's owner stays one trace: the owner's request span descends
/// from the first node's, which continues the caller's.
#[actix_web::test]
async fn a_forwarded_request_is_one_trace_across_nodes() {
    let otlp = OtlpReceiver::start();
    let endpoint = otlp.endpoint();
    let env = [
        ("TERN_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let Some(nodes) = crate::nodes::Nodes::start(2, &env).await else {
        return; // several nodes need PostgreSQL
    };
    let (api_key, _) = nodes.register("Traced Nodes").await;
    // The same write through each node: whichever does not own the
    // merchant's endpoint forwards it.
    let mut callers = Vec::new();
    for base in &nodes.bases {
        let trace_id = format!("{:032x}", rand::random::<u128>() | 1);
        let caller_span = format!("{:016x}", rand::random::<u64>() | 1);
        let put = nodes
            .client
            .put(format!("{base}/v1/webhooks/endpoint"))
            .bearer_auth(&api_key)
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
            .json(&json!({"url": "https://hooks.example.com/tern", "secret": WHSEC_SECRET}))
            .send()
            .await
            .expect("request");
        assert_eq!(put.status(), 204);
        callers.push((trace_id, caller_span));
    }
    let requests_in = |spans: &[ExportedSpan], trace_id: &str| {
        spans
            .iter()
            .filter(|s| s.trace_id == trace_id && s.name == "request")
            .count()
    };
    let spans = otlp
        .wait_until(SPANS_WAIT_MAX, |spans| {
            let counts: Vec<usize> = callers
                .iter()
                .map(|(trace_id, _)| requests_in(spans, trace_id))
                .collect();
            counts.contains(&1) && counts.contains(&2)
        })
        .await;
    let mut forwarded = 0;
    for (trace_id, caller_span) in &callers {
        let trace = Trace::of(&spans, trace_id);
        let requests: Vec<&ExportedSpan> = trace.named("request").collect();
        let first = requests
            .iter()
            .find(|s| &s.parent_span_id == caller_span)
            .unwrap_or_else(|| panic!("no request continues the caller:\n{}", trace.render()));
        if let Some(owner) = requests.iter().find(|s| s.span_id != first.span_id) {
            forwarded += 1;
            assert!(
                trace
                    .ancestors(owner)
                    .iter()
                    .any(|s| s.span_id == first.span_id),
                "{}",
                trace.render()
            );
        }
    }
    assert_eq!(forwarded, 1, "one of the two nodes forwards");
}
