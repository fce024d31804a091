//! Transfer creations raced on one quote and one key, and
//! another merchant's quote.

use futures_util::future::join_all;
use serde_json::Value;

use crate::helpers::transfers::{app, body, eur_quote, EVM_WALLET};

async fn send_all(
    app: &crate::helpers::TestApp,
    key: &str,
    pairs: &[(String, Value)],
) -> Vec<(u16, Value)> {
    join_all(pairs.iter().map(|(k, b)| async move {
        let r = app.post_with_key("/v1/transfers", key, k, b).await;
        let s = r.status().as_u16();
        (s, r.json::<Value>().await.unwrap_or(Value::Null))
    }))
    .await
}

#[actix_web::test]
async fn transfer_creations_raced_on_one_quote_or_one_key_bind_it_once() {
    let app = app().await;
    let merchant = app.merchant().await;
    let other = app.merchant().await;

    // One quote, eight keys at once: one 201, seven 409.
    let quote = eur_quote(&app, &merchant).await;
    let b = body(&quote, "pm_card_visa", EVM_WALLET);
    let pairs: Vec<(String, Value)> = (0..8)
        .map(|_| (uuid::Uuid::new_v4().to_string(), b.clone()))
        .collect();
    let got = send_all(&app, &merchant.api_key, &pairs).await;
    let statuses: Vec<u16> = got.iter().map(|(s, _)| *s).collect();
    eprintln!("one quote, 8 keys: {statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{got:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 409), "{got:?}");

    // One key, two bodies (two quotes) at once: one 201, the other 422 or 409.
    let q1 = eur_quote(&app, &merchant).await;
    let q2 = eur_quote(&app, &merchant).await;
    let key = uuid::Uuid::new_v4().to_string();
    let pairs = vec![
        (key.clone(), body(&q1, "pm_card_visa", EVM_WALLET)),
        (key.clone(), body(&q2, "pm_card_visa", EVM_WALLET)),
        (key.clone(), body(&q1, "pm_card_visa", EVM_WALLET)),
    ];
    let got = send_all(&app, &merchant.api_key, &pairs).await;
    let statuses: Vec<u16> = got.iter().map(|(s, _)| *s).collect();
    eprintln!("one key, bodies q1 q2 q1: {statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        2 - usize::from(statuses[1] == 201),
        "{got:?}"
    );
    // Replays answer the first body.
    let again = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &pairs[0].1)
        .await
        .status()
        .as_u16();
    let again2 = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &pairs[1].1)
        .await
        .status()
        .as_u16();
    eprintln!("replays: {again} {again2}");
    assert!(again != again2, "one body replays, the other mismatches");

    // Another merchant's quote: 404, and the quote stays usable by its owner.
    let q3 = eur_quote(&app, &merchant).await;
    let stolen = app
        .post_with_key(
            "/v1/transfers",
            &other.api_key,
            &uuid::Uuid::new_v4().to_string(),
            &body(&q3, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_eq!(stolen.status().as_u16(), 404);
    let own = app
        .post_with_key(
            "/v1/transfers",
            &merchant.api_key,
            &uuid::Uuid::new_v4().to_string(),
            &body(&q3, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_eq!(own.status().as_u16(), 201);
}
