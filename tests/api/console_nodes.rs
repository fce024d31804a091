//! The console on several nodes (PostgreSQL): a sign-in on one node is
//! valid on the others (the cookie is signed with a key derived from the
//! shared operator token), and a replay posted to a node that does not own
//! the merchant's endpoint actor is forwarded to the one that does.

use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::Value;
use tern::http::console::auth::COOKIE_NAME;

use crate::helpers::webhooks::{SUCCEEDED_TYPES, WAIT_MAX, WHSEC_SECRET};
use crate::helpers::RequestExt;
use crate::nodes::{Nodes, OPERATOR_TOKEN};
use crate::processes::{put_endpoint_at, quote_at, transfer_at};
use crate::webhook_receiver::{verify, Receiver};

const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A 503's Retry-After, if the response is one.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    if response.status() != 503 {
        return None;
    }
    let seconds = (response.headers().get(reqwest::header::RETRY_AFTER))
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(1);
    Some(Duration::from_secs(seconds))
}

fn form(fields: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

#[actix_web::test]
async fn a_sign_in_holds_on_every_node_and_a_replay_reaches_the_owner() {
    // The endpoint fails every delivery until the replay: answering 503
    // rather than going down keeps the port, which another process could
    // otherwise take before the receiver listens on it again.
    let receiver = Receiver::start().await;
    receiver.respond_with(503);
    let ca_file = receiver.ca_file().display().to_string();
    let env = [
        ("TERN_COOKIE_SECURE", "false"),
        ("TERN_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TERN_WEBHOOK_CA_FILE", ca_file.as_str()),
        ("TERN_WEBHOOK_RETRY_SCHEDULE", "100ms,100ms"),
    ];
    let Some(nodes) = Nodes::start(2, &env).await else {
        return; // several nodes need PostgreSQL
    };
    let client = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let (api_key, merchant_id) = nodes.register("Console Nodes Ltd").await;
    let base = nodes.bases[0].as_str();
    put_endpoint_at(
        &client,
        base,
        &api_key,
        &receiver.url("/nodes"),
        WHSEC_SECRET,
    )
    .await;
    let quote = quote_at(&client, base, &api_key).await;
    let created: Value = transfer_at(&client, base, &api_key, &quote)
        .read_json()
        .await;
    let transfer_id = created["id"].as_str().expect("id").to_owned();
    let started = Instant::now();
    loop {
        let dead: Value = client
            .get(format!(
                "{}/v1/webhooks/deliveries?status=dead&transfer_id={transfer_id}",
                nodes.bases[0]
            ))
            .bearer_auth(&api_key)
            .read_json()
            .await;
        if dead["count"] == SUCCEEDED_TYPES.len() {
            break;
        }
        assert!(started.elapsed() < WAIT_MAX, "not dead-lettered: {dead}");
        tokio::time::sleep(POLL_INTERVAL).await;
    }

    // Signed in on node 0, the page of node 1 shows the dead letters.
    let signed_in = client
        .post(format!("{}/console/sign-in", nodes.bases[0]))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[("token", OPERATOR_TOKEN)]))
        .send()
        .await
        .expect("sign in");
    assert_eq!(signed_in.status(), 303);
    let set_cookie = signed_in.headers()[SET_COOKIE].to_str().expect("ascii");
    let cookie = set_cookie.split(';').next().expect("name=value").to_owned();
    assert!(cookie.starts_with(&format!("{COOKIE_NAME}=")));
    let html = client
        .get(format!("{}/console", nodes.bases[1]))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert_eq!(
        html.matches("class=\"dead-letter\"").count(),
        SUCCEEDED_TYPES.len(),
        "{html}"
    );
    assert!(html.contains("<tr class=\"node\">"), "{html}");
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a CSRF token") + marker.len();
    let csrf = &html[start..start + html[start..].find('"').expect("end")];

    // Posted to each node, with each node's own Origin: one of them owns
    // the merchant's endpoint actor, the other forwards. A 503 (the
    // merchant's slot moving between nodes as leases are renewed under
    // load) is retried after its Retry-After, as any client would.
    receiver.respond_with(200);
    let failed = receiver.requests().len();
    for base in &nodes.bases {
        let started = Instant::now();
        let replayed = loop {
            let replayed = client
                .post(format!("{base}/console/replay"))
                .header(COOKIE, &cookie)
                .header(ORIGIN, base.as_str())
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form(&[
                    ("csrf", csrf),
                    ("merchant_id", &merchant_id),
                    ("transfer_id", &transfer_id),
                ]))
                .send()
                .await
                .expect("replay");
            let Some(retry_after) = retry_after(&replayed) else {
                break replayed;
            };
            assert!(started.elapsed() < WAIT_MAX, "{base}: still 503");
            tokio::time::sleep(retry_after).await;
        };
        let status = replayed.status();
        let location = replayed
            .headers()
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(status, 303, "{base}: {:?}", replayed.text().await);
        assert!(
            location.starts_with("/console?notice=replayed"),
            "{base}: {location}"
        );
    }
    let received = receiver
        .wait_for(failed + SUCCEEDED_TYPES.len(), WAIT_MAX)
        .await;
    let delivered = &received[failed..];
    assert!(delivered.len() >= SUCCEEDED_TYPES.len(), "{delivered:?}");
    for request in delivered {
        assert_eq!(request.status, 200);
        verify(WHSEC_SECRET, request).expect("signed by Tern");
    }
}
