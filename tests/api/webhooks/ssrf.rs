//! The SSRF guard whatever the environment (decisions §8): a proxy named in
//! HTTPS_PROXY, HTTP_PROXY or ALL_PROXY would resolve the target itself, so
//! the webhook client never uses one, and a refusal tells the merchant
//! nothing of the address a name resolved to.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

use super::*;
use crate::processes::Cluster;
use crate::transfers::{body, EVM_WALLET};

/// A TCP listener standing in for a forward proxy: it counts connections
/// and reads what is sent, answering nothing.
async fn proxy() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
            });
        }
    });
    (url, connections)
}

#[actix_web::test]
async fn a_proxy_in_the_environment_is_not_used_and_the_guard_still_refuses() {
    let (proxy_url, connections) = proxy().await;
    let env = [
        ("HTTPS_PROXY", proxy_url.clone()),
        ("HTTP_PROXY", proxy_url.clone()),
        ("ALL_PROXY", proxy_url.clone()),
        ("https_proxy", proxy_url.clone()),
        ("http_proxy", proxy_url.clone()),
        ("all_proxy", proxy_url),
        // The provider simulator is reached directly.
        ("NO_PROXY", "127.0.0.1".to_owned()),
        ("no_proxy", "127.0.0.1".to_owned()),
        ("TERN_WEBHOOK_RETRY_SCHEDULE", "100ms".to_owned()),
    ];
    let cluster = Cluster::start_with("200ms", &env).await;
    let api_key = cluster.register("Proxy Guard").await;
    let put = cluster
        .client
        .put(format!("{}/v1/webhooks/endpoint", cluster.base))
        .bearer_auth(&api_key)
        .json(&json!({"url": "https://localhost:9/hook", "secret": PLAIN_SECRET}))
        .send()
        .await
        .expect("request");
    assert_eq!(put.status(), 204);
    let quote: Value = cluster
        .client
        .post(format!("{}/v1/quotes", cluster.base))
        .bearer_auth(&api_key)
        .json(&json!({"send_currency": "EUR", "send_amount": "100.00",
            "receive_asset": "USDC", "receive_network": "polygon"}))
        .send()
        .await
        .expect("quote")
        .json()
        .await
        .expect("json");
    let created = cluster
        .client
        .post(format!("{}/v1/transfers", cluster.base))
        .bearer_auth(&api_key)
        .header("Idempotency-Key", Uuid::new_v4().to_string())
        .json(&body(&quote, "pm_card_visa", EVM_WALLET))
        .send()
        .await
        .expect("transfer");
    assert_eq!(created.status(), 201);

    // The first event's attempts end (two, then dead) without a proxy.
    let started = Instant::now();
    let attempts = loop {
        let listed: Value = cluster
            .client
            .get(format!("{}/v1/webhooks/deliveries?limit=100", cluster.base))
            .bearer_auth(&api_key)
            .send()
            .await
            .expect("deliveries")
            .json()
            .await
            .expect("json");
        let dead: Vec<Value> = listed["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|event| event["status"] == "dead")
            .collect();
        if let Some(event) = dead.first() {
            break event["attempt_log"].as_array().cloned().unwrap_or_default();
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "no event dead-lettered: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for attempt in &attempts {
        assert_eq!(
            attempt["error"], "refused: private or reserved address",
            "{attempt}"
        );
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the webhook client connected to the proxy"
    );
}
