use std::sync::Mutex;

use actix_web::body::to_bytes;
use actix_web::dev::ServiceResponse;
use actix_web::test::{call_service, init_service, TestRequest};
use actix_web::App;
use serde_json::Value;

use super::*;
use crate::sandbox::store::{Fault, Ids};
use crate::sandbox::{webhook, SandboxConfig};

const KEY: [u8; 32] = [7; 32];
const ORIGIN: &str = "https://app.example";

/// True when `pan` is all digits and passes the Luhn check.
fn luhn_valid(pan: &str) -> bool {
    match pan.len().checked_sub(1).map(|n| pan.split_at(n)) {
        Some((payload, check)) if pan.bytes().all(|b| b.is_ascii_digit()) => {
            check.parse::<u32>().ok() == Some(luhn_check_digit(payload))
        }
        _ => false,
    }
}

#[test]
fn the_luhn_check_accepts_real_test_numbers_and_rejects_a_changed_digit() {
    for valid in ["4242424242424242", "5555555555554444", "4000056655665556"] {
        assert!(luhn_valid(valid), "{valid}");
    }
    for invalid in [
        "4242424242424241",
        "5555555555554445",
        "",
        "42424242x4242424",
    ] {
        assert!(!luhn_valid(invalid), "{invalid}");
    }
}

#[test]
fn pans_are_sixteen_luhn_valid_digits_per_network_and_never_repeat() {
    let mut seen = std::collections::HashSet::new();
    for ordinal in 1..=5_000 {
        for (network, first) in [(CardNetwork::Visa, '4'), (CardNetwork::Mastercard, '5')] {
            let pan = pan(network, ordinal);
            assert_eq!(pan.len(), 16, "{pan}");
            assert!(pan.starts_with(first), "{pan}");
            assert!(luhn_valid(&pan), "{pan}");
            assert!(seen.insert(pan.clone()), "{pan} repeated");
        }
    }
}

#[test]
fn embed_signatures_bind_card_origin_and_expiry() {
    let sig = embed_signature(&KEY, "ic_1", ORIGIN, 1_800_000_000);
    assert_eq!(sig.len(), 64);
    assert!(embed_signature_valid(
        &KEY,
        "ic_1",
        ORIGIN,
        1_800_000_000,
        &sig
    ));
    let tampered = [
        ("ic_2", ORIGIN, 1_800_000_000),
        ("ic_1", "https://evil.example", 1_800_000_000),
        ("ic_1", ORIGIN, 1_800_000_001),
    ];
    for (card, origin, expires) in tampered {
        assert!(!embed_signature_valid(&KEY, card, origin, expires, &sig));
    }
    assert!(!embed_signature_valid(
        &[8; 32],
        "ic_1",
        ORIGIN,
        1_800_000_000,
        &sig
    ));
    for bad in ["", "zz", &sig[..62]] {
        assert!(!embed_signature_valid(
            &KEY,
            "ic_1",
            ORIGIN,
            1_800_000_000,
            bad
        ));
    }
}

#[test]
fn only_serialised_browser_origins_are_accepted() {
    for good in [
        ORIGIN,
        "http://localhost:3000",
        "https://xn--bcher-kva.example",
    ] {
        assert!(origin_valid(good), "{good}");
    }
    for bad in [
        "https://app.example/",
        "https://app.example/path",
        "https://APP.example",
        "https://app.example:443",
        "https://user@app.example",
        "ftp://app.example",
        "https://app.example; script-src *",
        "https://app.example\r\nX-Evil: 1",
        "null",
        "",
    ] {
        assert!(!origin_valid(bad), "{bad:?}");
    }
}

fn sandbox() -> web::Data<Sandbox> {
    tern_actors::adapters::install_crypto_provider();
    let mut config = SandboxConfig::new(None, "secret".into());
    config.pending_delay = std::time::Duration::from_millis(10);
    web::Data::new(Sandbox {
        webhooks: webhook::Sender::new(&config).expect("sender"),
        config,
        public_base_url: "http://sandbox.test".into(),
        store: Mutex::new(Store::default()),
        ids: Ids::new("seed".into()),
        embed_key: KEY,
    })
}

fn arm(sandbox: &Sandbox, matches: &[(&str, &str)], mode: &str, count: Option<u32>) {
    let spec = wire::FaultSpec {
        target: "issuer".into(),
        matches: matches
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        mode: mode.into(),
        count,
    };
    sandbox
        .lock()
        .arm(Fault::from_spec(spec).expect("valid"))
        .expect("room");
}

fn issue_body(card_id: &str, network: &str) -> Value {
    json!({
        "card_id": card_id, "user_id": "u1", "program_id": "SVC_VIRTUAL_USD",
        "network": network, "type": "virtual", "currency": "USD", "cardholder": "Ada <Lovelace>",
    })
}

async fn json_of(response: ServiceResponse) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = to_bytes(response.into_body()).await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn header<'a>(response: &'a ServiceResponse, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn executions(sandbox: &Sandbox, operation: &str) -> Vec<String> {
    sandbox
        .lock()
        .executions(None, None)
        .into_iter()
        .filter(|e| e.target == "issuer" && e.operation == operation)
        .map(|e| e.key)
        .collect()
}

macro_rules! service {
    ($sandbox:expr) => {
        init_service(
            App::new()
                .app_data($sandbox.clone())
                .configure(crate::sandbox::routes),
        )
        .await
    };
}

/// Calls the service; answers the status and the JSON body (`null` if none).
macro_rules! call {
    ($app:expr, $request:expr) => {
        json_of(call_service(&$app, $request.to_request()).await).await
    };
}

fn post(uri: &str, key: Option<&str>, body: &Value) -> TestRequest {
    let request = TestRequest::post().uri(uri).set_json(body);
    match key {
        Some(key) => request.insert_header((wire::IDEMPOTENCY_KEY_HEADER, key)),
        None => request,
    }
}

fn get(uri: &str) -> TestRequest {
    TestRequest::get().uri(uri)
}

#[actix_web::test]
async fn a_key_issues_one_card_and_a_conflicting_reuse_is_refused() {
    let sandbox = sandbox();
    let app = service!(sandbox);
    let body = issue_body("card_1", "mastercard");
    let (status, first) = call!(app, post("/issuer/cards", Some("card_1"), &body));
    assert_eq!(status, 200, "{first}");
    let (_, again) = call!(app, post("/issuer/cards", Some("card_1"), &body));
    assert_eq!(first, again);
    assert!(first["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("ic_") && id.len() == 35));
    assert_eq!(first["status"], "active");
    assert_eq!(first["network"], "mastercard");
    assert!(first.get("pan").is_none() && first.get("cvv").is_none());
    assert_eq!(executions(&sandbox, "issue"), ["card_1"]);

    let (status, conflict) = call!(
        app,
        post(
            "/issuer/cards",
            Some("card_1"),
            &issue_body("card_1", "visa")
        )
    );
    assert_eq!(status, 409, "{conflict}");
    let (status, _) = call!(app, post("/issuer/cards", None, &body));
    assert_eq!(status, 400, "the key is required");
    let mut bad = issue_body("card_2", "amex");
    let (status, _) = call!(app, post("/issuer/cards", Some("card_2"), &bad));
    assert_eq!(status, 400);
    bad = issue_body("card_2", "visa");
    bad["currency"] = "usd".into();
    let (status, _) = call!(app, post("/issuer/cards", Some("card_2"), &bad));
    assert_eq!(status, 400);
    assert_eq!(executions(&sandbox, "issue").len(), 1);

    let (status, by_key) = call!(app, get("/issuer/cards/by-key/card_1"));
    assert_eq!((status, &by_key), (200, &first));
    let (status, _) = call!(app, get("/issuer/cards/by-key/card_9"));
    assert_eq!(status, 404);

    // The secrets match the card and are not cached.
    let id = first["id"].as_str().expect("id");
    let secrets_uri = format!("/issuer/cards/{id}/secrets");
    let response = call_service(&app, get(&secrets_uri).to_request()).await;
    assert_eq!(header(&response, CACHE_CONTROL.as_str()), "no-store");
    let (_, secrets) = json_of(response).await;
    let pan = secrets["pan"].as_str().expect("pan");
    assert!(pan.starts_with('5') && luhn_valid(pan), "{pan}");
    assert_eq!(&pan[12..], first["last_four"]);
    assert!(secrets["cvv"]
        .as_str()
        .is_some_and(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit())));
    let now = chrono::Utc::now();
    assert_eq!(secrets["expiry_year"], now.year() + 3);
    assert_eq!(secrets["expiry_month"], now.month());
    let (status, _) = call!(app, get("/issuer/cards/ic_nope/secrets"));
    assert_eq!(status, 404);
}

#[actix_web::test]
async fn issue_faults_refuse_without_issuing_and_match_their_fields() {
    let sandbox = sandbox();
    let app = service!(sandbox);
    arm(
        &sandbox,
        &[("user_id", "u1"), ("card_id", "card_d")],
        "decline",
        Some(1),
    );
    arm(&sandbox, &[("card_id", "card_f")], "fail", Some(1));
    arm(&sandbox, &[("card_id", "card_t")], "transient", Some(1));
    let cases = [
        ("card_d", 422, "issue_declined"),
        ("card_f", 422, "processing_error"),
        ("card_t", 503, "unavailable"),
    ];
    for (card_id, want_status, want_code) in cases {
        let body = issue_body(card_id, "visa");
        let (status, answer) = call!(app, post("/issuer/cards", Some(card_id), &body));
        assert_eq!(
            (status, &answer["error"]["code"]),
            (want_status, &json!(want_code)),
            "{card_id}"
        );
        // The count is spent: the retry under the same key issues, once.
        let (status, _) = call!(app, post("/issuer/cards", Some(card_id), &body));
        assert_eq!(status, 200, "{card_id}");
    }
    assert_eq!(
        executions(&sandbox, "issue"),
        ["card_d", "card_f", "card_t"]
    );
}

#[actix_web::test]
async fn status_changes_execute_once_each_and_closed_is_final() {
    let sandbox = sandbox();
    let app = service!(sandbox);
    let (_, card) = call!(
        app,
        post(
            "/issuer/cards",
            Some("card_s"),
            &issue_body("card_s", "visa")
        )
    );
    let id = card["id"].as_str().expect("id");
    let status_uri = format!("/issuer/cards/{id}/status");
    let set = |status: &str| post(&status_uri, None, &json!({"status": status}));
    for status in ["frozen", "frozen", "active", "closed", "closed"] {
        let (code, answer) = call!(app, set(status));
        assert_eq!((code, &answer["status"]), (200, &json!(status)));
    }
    assert_eq!(
        executions(&sandbox, "status"),
        [
            format!("{id}:frozen:1"),
            format!("{id}:active:2"),
            format!("{id}:closed:3")
        ]
    );
    let (code, answer) = call!(app, set("active"));
    assert_eq!(
        (code, &answer["error"]["code"]),
        (409, &json!("card_closed"))
    );
    let (code, _) = call!(app, set("melted"));
    assert_eq!(code, 400);
    let (code, _) = call!(
        app,
        post(
            "/issuer/cards/ic_nope/status",
            None,
            &json!({"status": "frozen"})
        )
    );
    assert_eq!(code, 404);
    let (_, by_key) = call!(app, get("/issuer/cards/by-key/card_s"));
    assert_eq!(by_key["status"], "closed");

    let (_, other) = call!(
        app,
        post(
            "/issuer/cards",
            Some("card_o"),
            &issue_body("card_o", "visa")
        )
    );
    let other_uri = format!("/issuer/cards/{}/status", other["id"].as_str().expect("id"));
    arm(
        &sandbox,
        &[("card_id", "card_o"), ("operation", "status")],
        "decline",
        Some(1),
    );
    let (code, answer) = call!(app, post(&other_uri, None, &json!({"status": "frozen"})));
    assert_eq!(
        (code, &answer["error"]["code"]),
        (422, &json!("status_declined"))
    );
    assert_eq!(
        executions(&sandbox, "status").len(),
        3,
        "a declined change executes nothing"
    );
}

#[actix_web::test]
async fn the_embed_page_checks_signature_and_expiry_and_may_only_be_framed_by_its_origin() {
    let sandbox = sandbox();
    let app = service!(sandbox);
    let (_, card) = call!(
        app,
        post(
            "/issuer/cards",
            Some("card_e"),
            &issue_body("card_e", "visa")
        )
    );
    let id = card["id"].as_str().expect("id");
    let expires = chrono::Utc::now().timestamp() + 60;
    let embed_uri = format!("/issuer/cards/{id}/embed");
    let body = json!({"target_origin": ORIGIN, "expires_at": expires});
    let (code, answer) = call!(app, post(&embed_uri, None, &body));
    assert_eq!(code, 200, "{answer}");
    let url = answer["url"].as_str().expect("url");
    let sig = embed_signature(&KEY, id, ORIGIN, expires);
    assert_eq!(
        url,
        format!("http://sandbox.test/issuer/embed/{id}?origin=https%3A%2F%2Fapp.example&expires={expires}&sig={sig}")
    );
    let path = url.trim_start_matches("http://sandbox.test");
    let response = call_service(&app, get(path).to_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-security-policy"),
        format!("frame-ancestors {ORIGIN}")
    );
    assert_eq!(header(&response, CACHE_CONTROL.as_str()), "no-store");
    let html = String::from_utf8(to_bytes(response.into_body()).await.expect("body").to_vec())
        .expect("utf-8");
    let pan = match &sandbox
        .lock()
        .get(&at(Operation::Issue, "card_e"))
        .expect("card")
        .stored
    {
        Stored::IssuedCard { secrets, .. } => secrets.pan.clone(),
        _ => unreachable!("an issued card"),
    };
    assert!(
        html.contains(&format!(
            "{} {} {} {}",
            &pan[..4],
            &pan[4..8],
            &pan[8..12],
            &pan[12..]
        )),
        "{html}"
    );
    assert!(
        html.contains("Ada &lt;Lovelace&gt;"),
        "the cardholder is escaped: {html}"
    );

    let forged = path.replace("app.example", "evil.example");
    let response = call_service(&app, get(&forged).to_request()).await;
    assert_eq!(response.status(), 403);
    let past = expires - 120;
    let expired = format!(
        "/issuer/embed/{id}?origin=https%3A%2F%2Fapp.example&expires={past}&sig={}",
        embed_signature(&KEY, id, ORIGIN, past)
    );
    let response = call_service(&app, get(&expired).to_request()).await;
    assert_eq!(response.status(), 410);

    for bad in [
        json!({"target_origin": "https://app.example/x", "expires_at": expires}),
        json!({"target_origin": ORIGIN, "expires_at": expires - 120}),
        json!({"target_origin": ORIGIN, "expires_at": expires + EMBED_TTL_SECONDS_MAX}),
    ] {
        let (code, _) = call!(app, post(&embed_uri, None, &bad));
        assert_eq!(code, 400, "{bad}");
    }
    let (code, _) = call!(app, post("/issuer/cards/ic_nope/embed", None, &body));
    assert_eq!(code, 404);
}

#[actix_web::test]
async fn wallet_tokens_replay_and_a_decline_fault_means_not_supported() {
    let sandbox = sandbox();
    let app = service!(sandbox);
    let (_, card) = call!(
        app,
        post(
            "/issuer/cards",
            Some("card_w"),
            &issue_body("card_w", "visa")
        )
    );
    let uri = format!("/issuer/cards/{}/wallets", card["id"].as_str().expect("id"));
    let google = json!({"card_id": "card_w", "wallet": "google_pay", "device_id": "dev_1"});
    let (code, first) = call!(app, post(&uri, Some("tok_1"), &google));
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["status"], "requested");
    assert!(first["provider_token_id"]
        .as_str()
        .is_some_and(|t| t.starts_with("wt_")));
    let (_, again) = call!(app, post(&uri, Some("tok_1"), &google));
    assert_eq!(first, again);
    assert_eq!(executions(&sandbox, "wallet"), ["tok_1"]);

    arm(&sandbox, &[("wallet", "apple_pay")], "decline", None);
    let apple = json!({"card_id": "card_w", "wallet": "apple_pay"});
    let (code, refused) = call!(app, post(&uri, Some("tok_2"), &apple));
    assert_eq!(
        (code, &refused["error"]["code"]),
        (422, &json!(wire::CODE_WALLET_NOT_SUPPORTED))
    );
    let (code, _) = call!(app, post(&uri, Some("tok_3"), &google));
    assert_eq!(code, 200, "the fault matches its wallet only");

    let wrong_card = json!({"card_id": "card_x", "wallet": "google_pay"});
    let (code, answer) = call!(app, post(&uri, Some("tok_4"), &wrong_card));
    assert_eq!(
        (code, &answer["error"]["code"]),
        (422, &json!("card_mismatch"))
    );
    let (code, _) = call!(
        app,
        post("/issuer/cards/ic_nope/wallets", Some("tok_5"), &google)
    );
    assert_eq!(code, 404);
    let bad_wallet = json!({"card_id": "card_w", "wallet": "samsung_pay"});
    let (code, _) = call!(app, post(&uri, Some("tok_6"), &bad_wallet));
    assert_eq!(code, 400);
    assert_eq!(executions(&sandbox, "wallet"), ["tok_1", "tok_3"]);
}
