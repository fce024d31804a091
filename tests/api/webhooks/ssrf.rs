//! The SSRF guard whatever the environment (decisions §8): a proxy named in
//! HTTPS_PROXY, HTTP_PROXY or ALL_PROXY would resolve the target itself, so
//! the webhook client never uses one, and a refusal tells the merchant
//! nothing of the address a name resolved to.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::helpers::webhooks::*;
use crate::helpers::RequestExt;
use crate::processes::{put_endpoint_at, quote_at, transfer_at, Cluster};

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
    put_endpoint_at(
        &cluster.client,
        &cluster.base,
        &api_key,
        "https://localhost:9/hook",
        PLAIN_SECRET,
    )
    .await;
    let quote = quote_at(&cluster.client, &cluster.base, &api_key).await;
    let created = transfer_at(&cluster.client, &cluster.base, &api_key, &quote)
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
            .read_json()
            .await;
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
