//! The simulated card issuer driven through `HttpCardIssuer` and the
//! control client, on the simulator's own port-0 listener, with a stand-in
//! for Tern's webhook endpoint. No database: these tests exercise the
//! protocol both sides speak.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{json, Value};
use tern::sandbox::{serve, SandboxConfig};
use tern_actors::adapters::http::control::ExecutionFilter;
use tern_actors::adapters::http::wire::{self, FaultSpec};
use tern_actors::adapters::http::{HttpCardIssuer, HttpProviderConfig, SandboxControl};
use tern_actors::adapters::{install_crypto_provider, verify_signature};
use tern_actors::ports::{
    CardIssuer, CardNetwork, EmbedRequest, IssueRequest, IssuerStatus, ProviderError, Wallet,
    WalletOutcome, WalletRequest,
};
use tern_schema::vocabulary::{CardId, UserId};

use crate::helpers::sandbox_signature;

const ADAPTER_TIMEOUT: Duration = Duration::from_millis(800);
const HANG: Duration = Duration::from_secs(3);
const PENDING: Duration = Duration::from_millis(200);
const WEBHOOK_SECRET: &str = "issuer-test-webhook-secret";
const ORIGIN: &str = "https://app.example";

/// What Tern's webhook endpoint received: (signature header, body).
type Deliveries = Arc<Mutex<Vec<(String, String)>>>;

/// Stands in for Tern's webhook endpoint: records every delivery and
/// answers an authorization request with a decision, as Tern does.
#[derive(Clone, Default)]
struct Tern {
    seen: Deliveries,
}

async fn receive(seen: web::Data<Deliveries>, request: HttpRequest, body: String) -> HttpResponse {
    let signature = sandbox_signature(&request);
    let event: Value = serde_json::from_str(&body).unwrap_or_default();
    seen.lock().expect("lock").push((signature, body));
    if event["type"] == "authorization.request" {
        let approved = event["data"]["amount_minor"].as_i64() < Some(10_000);
        let reason = if approved { "" } else { "limit_exceeded" };
        return HttpResponse::Ok().json(json!({"approved": approved, "reason": reason}));
    }
    HttpResponse::Ok().json(json!({"received": true}))
}

impl Tern {
    fn start(&self) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = web::Data::new(self.seen.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(seen.clone())
                .route("/v1/webhooks/sandbox", web::post().to(receive))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .expect("listen")
        .run();
        actix_web::rt::spawn(server);
        base
    }

    /// The events of `kind` received so far, each signature checked.
    fn events(&self, kind: &str) -> Vec<Value> {
        let now = chrono::Utc::now().timestamp();
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|(signature, body)| {
                let event: Value = serde_json::from_str(body).expect("json");
                if event["type"] != kind {
                    return None;
                }
                verify_signature(
                    WEBHOOK_SECRET.as_bytes(),
                    signature,
                    body.as_bytes(),
                    now,
                    Duration::from_secs(300),
                )
                .expect("a valid signature");
                Some(event)
            })
            .collect()
    }

    /// Waits for the webhook of `kind` whose data has `field` = `value`.
    async fn wait_for(&self, kind: &str, field: &str, value: &str) -> Value {
        let started = Instant::now();
        loop {
            if let Some(event) = self
                .events(kind)
                .into_iter()
                .find(|e| e["data"][field] == value)
            {
                return event;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no {kind} webhook with {field} = {value}"
            );
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

struct Sim {
    issuer: HttpCardIssuer,
    control: SandboxControl,
}

async fn start(callback: Option<String>) -> Sim {
    install_crypto_provider();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind sandbox");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let mut config = SandboxConfig::new(callback, WEBHOOK_SECRET.into());
    config.timeout_hang = HANG;
    config.pending_delay = PENDING;
    config.webhook_retry_schedule = vec![Duration::from_millis(100)];
    actix_web::rt::spawn(serve(listener, config).expect("sandbox starts"));
    let adapter = HttpProviderConfig::new(&base).with_request_timeout(ADAPTER_TIMEOUT);
    Sim {
        issuer: HttpCardIssuer::new(&adapter).expect("issuer"),
        control: SandboxControl::new(&adapter).expect("control"),
    }
}

fn issue_request(network: CardNetwork) -> IssueRequest {
    let card_id = CardId::generate();
    IssueRequest {
        idempotency_key: card_id.to_string(),
        card_id,
        user_id: UserId::generate(),
        program_id: "SVC_VIRTUAL_USD".into(),
        network,
        card_type: tern_actors::ports::CardType::Virtual,
        currency: "USD".into(),
        cardholder: "Ada Lovelace".into(),
    }
}

fn wallet_request(provider_card_id: &str, card_id: &CardId, wallet: Wallet) -> WalletRequest {
    WalletRequest {
        idempotency_key: format!("wtok_{}", uuid::Uuid::new_v4().simple()),
        provider_card_id: provider_card_id.into(),
        card_id: card_id.clone(),
        wallet,
        device_id: Some("dev_1".into()),
    }
}

fn luhn_valid(pan: &str) -> bool {
    let sum: u32 = pan
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let digit = u32::from(b - b'0');
            match (i % 2, digit * 2) {
                (1, doubled) if doubled > 9 => doubled - 9,
                (1, doubled) => doubled,
                _ => digit,
            }
        })
        .sum();
    pan.len() == 16 && pan.bytes().all(|b| b.is_ascii_digit()) && sum % 10 == 0
}

impl Sim {
    async fn arm(&self, matches: &[(&str, &str)], mode: &str, count: Option<u32>) {
        let fault = FaultSpec {
            target: "issuer".into(),
            matches: matches
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            mode: mode.into(),
            count,
        };
        self.control.arm_fault(&fault).await.expect("arm");
    }

    /// The issuer's executions of `operation`, by key.
    async fn executions(&self, operation: &str) -> Vec<String> {
        self.control
            .executions(ExecutionFilter::default())
            .await
            .expect("executions")
            .into_iter()
            .filter(|e| e.target == "issuer" && e.operation == operation)
            .map(|e| e.key)
            .collect()
    }
}

#[actix_web::test]
async fn cards_are_issued_once_found_by_key_and_their_status_mirrored() {
    let sim = start(None).await;
    let mut request = issue_request(CardNetwork::Visa);
    // Keys travel in a header and in a path segment: odd characters survive both.
    request.idempotency_key = format!("{} /?#%", request.card_id);
    let card = sim.issuer.issue(&request).await.expect("issue");
    assert!(card.provider_card_id.starts_with("ic_"), "{card:?}");
    assert!(card.last_four.len() == 4 && card.last_four.bytes().all(|b| b.is_ascii_digit()));
    let now = chrono::Utc::now();
    assert_eq!(card.expiry_year, chrono::Datelike::year(&now) + 3);
    assert_eq!(sim.issuer.issue(&request).await.expect("replay"), card);
    assert_eq!(
        sim.executions("issue").await,
        [request.idempotency_key.clone()]
    );
    assert_eq!(
        sim.issuer
            .find_issued(&request.idempotency_key)
            .await
            .expect("find"),
        Some(card.clone())
    );
    assert_eq!(
        sim.issuer.find_issued("card_never").await.expect("find"),
        None
    );

    let secrets = sim
        .issuer
        .secrets(&card.provider_card_id)
        .await
        .expect("secrets");
    assert!(luhn_valid(&secrets.pan) && secrets.pan.starts_with('4'));
    assert!(secrets.pan.ends_with(&card.last_four));
    assert_eq!(secrets.cvv.len(), 3);
    assert_eq!(
        (secrets.expiry_month, secrets.expiry_year),
        (card.expiry_month, card.expiry_year)
    );
    assert!(!format!("{secrets:?}").contains(&secrets.pan));

    let mastercard = sim
        .issuer
        .issue(&issue_request(CardNetwork::Mastercard))
        .await
        .expect("issue");
    let other = sim
        .issuer
        .secrets(&mastercard.provider_card_id)
        .await
        .expect("secrets");
    assert!(luhn_valid(&other.pan) && other.pan.starts_with('5'));
    assert_ne!(other.pan[6..15], secrets.pan[6..15]);

    let id = &card.provider_card_id;
    for status in [
        IssuerStatus::Frozen,
        IssuerStatus::Frozen,
        IssuerStatus::Active,
    ] {
        sim.issuer.set_status(id, status).await.expect("status");
    }
    assert_eq!(
        sim.executions("status").await,
        [format!("{id}:frozen:1"), format!("{id}:active:2")],
        "setting the status a card has executes nothing"
    );
    sim.issuer
        .set_status(id, IssuerStatus::Closed)
        .await
        .expect("close");
    let reopened = sim.issuer.set_status(id, IssuerStatus::Active).await;
    assert!(
        matches!(&reopened, Err(ProviderError::Permanent { status: 409, code, .. }) if code == "card_closed"),
        "{reopened:?}"
    );
    for unknown in [
        sim.issuer
            .set_status("ic_unknown", IssuerStatus::Frozen)
            .await,
        sim.issuer.secrets("ic_unknown").await.map(|_| ()),
    ] {
        assert!(
            matches!(unknown, Err(ProviderError::Permanent { status: 404, .. })),
            "{unknown:?}"
        );
    }
}

#[actix_web::test]
async fn an_embed_url_shows_the_card_only_to_its_origin_until_it_expires() {
    let sim = start(None).await;
    let card = sim
        .issuer
        .issue(&issue_request(CardNetwork::Visa))
        .await
        .expect("issue");
    let secrets = sim
        .issuer
        .secrets(&card.provider_card_id)
        .await
        .expect("secrets");
    let expires_at = chrono::Utc::now().naive_utc() + chrono::Duration::seconds(2);
    let url = sim
        .issuer
        .embed_url(&EmbedRequest {
            provider_card_id: card.provider_card_id.clone(),
            target_origin: ORIGIN.into(),
            expires_at,
        })
        .await
        .expect("embed url");
    let client = reqwest::Client::new();
    let page = client.get(&url).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        header("content-security-policy"),
        format!("frame-ancestors {ORIGIN}")
    );
    assert_eq!(header("cache-control"), "no-store");
    let html = page.text().await.expect("html");
    assert!(
        html.contains(&secrets.pan[..4]) && html.contains(&secrets.cvv),
        "{html}"
    );

    let mut forged = url::Url::parse(&url).expect("url");
    let pairs: Vec<(String, String)> = forged
        .query_pairs()
        .map(|(k, v)| match &*k {
            "origin" => (k.into_owned(), "https://evil.example".to_owned()),
            _ => (k.into_owned(), v.into_owned()),
        })
        .collect();
    forged.query_pairs_mut().clear().extend_pairs(pairs);
    let refused = client.get(forged).send().await.expect("forged");
    assert_eq!(refused.status(), 403);

    actix_web::rt::time::sleep(Duration::from_millis(2_100)).await;
    let expired = client.get(&url).send().await.expect("expired");
    assert_eq!(expired.status(), 410);

    let bad_origin = sim
        .issuer
        .embed_url(&EmbedRequest {
            provider_card_id: card.provider_card_id.clone(),
            target_origin: "https://app.example/path".into(),
            expires_at: chrono::Utc::now().naive_utc() + chrono::Duration::seconds(60),
        })
        .await;
    assert!(
        matches!(
            bad_origin,
            Err(ProviderError::Permanent { status: 400, .. })
        ),
        "{bad_origin:?}"
    );
}

#[actix_web::test]
async fn wallet_tokens_are_confirmed_by_signed_webhook_and_a_declined_wallet_is_not_supported() {
    let tern = Tern::default();
    let sim = start(Some(tern.start())).await;
    let issued = issue_request(CardNetwork::Mastercard);
    let card = sim.issuer.issue(&issued).await.expect("issue");
    let google = wallet_request(&card.provider_card_id, &issued.card_id, Wallet::GooglePay);
    let outcome = sim
        .issuer
        .provision_wallet(&google)
        .await
        .expect("provision");
    let WalletOutcome::Requested { provider_token_id } = &outcome else {
        panic!("expected a request, got {outcome:?}");
    };
    assert!(provider_token_id.starts_with("wt_"));
    assert_eq!(
        sim.issuer.provision_wallet(&google).await.expect("replay"),
        outcome
    );
    let event = tern
        .wait_for("wallet_token.updated", "token_id", &google.idempotency_key)
        .await;
    assert!(event["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("evt_")));
    assert_eq!(
        event["data"],
        json!({
            "card_id": issued.card_id,
            "token_id": google.idempotency_key,
            "provider_token_id": provider_token_id,
            "wallet": "google_pay",
            "status": "active",
        })
    );
    assert_eq!(
        sim.executions("wallet").await,
        [google.idempotency_key.as_str()]
    );

    sim.arm(&[("wallet", "apple_pay")], "decline", None).await;
    let apple = wallet_request(&card.provider_card_id, &issued.card_id, Wallet::ApplePay);
    assert!(matches!(
        sim.issuer.provision_wallet(&apple).await.expect("refusal"),
        WalletOutcome::NotSupported { reason } if reason.contains("apple_pay")
    ));

    sim.arm(
        &[
            ("wallet", "google_pay"),
            ("card_id", issued.card_id.as_str()),
        ],
        "fail",
        Some(1),
    )
    .await;
    let failing = wallet_request(&card.provider_card_id, &issued.card_id, Wallet::GooglePay);
    assert!(matches!(
        sim.issuer
            .provision_wallet(&failing)
            .await
            .expect("accepted"),
        WalletOutcome::Requested { .. }
    ));
    let event = tern
        .wait_for("wallet_token.updated", "token_id", &failing.idempotency_key)
        .await;
    assert_eq!(event["data"]["status"], "failed");
    assert_eq!(sim.executions("wallet").await.len(), 2);
}

#[actix_web::test]
async fn issuer_faults_map_to_port_errors_and_recovery_finds_the_one_card() {
    let sim = start(None).await;
    let transient = issue_request(CardNetwork::Visa);
    sim.arm(
        &[("card_id", transient.card_id.as_str())],
        "transient",
        Some(1),
    )
    .await;
    let err = sim.issuer.issue(&transient).await.expect_err("503");
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
    assert_eq!(
        sim.issuer
            .find_issued(&transient.idempotency_key)
            .await
            .expect("find"),
        None
    );
    sim.issuer
        .issue(&transient)
        .await
        .expect("the retry issues");

    let declined = issue_request(CardNetwork::Visa);
    sim.arm(
        &[("user_id", declined.user_id.as_str())],
        "decline",
        Some(1),
    )
    .await;
    let err = sim.issuer.issue(&declined).await.expect_err("declined");
    assert!(
        matches!(&err, ProviderError::Permanent { status: 422, code, .. } if code == "issue_declined")
            && !err.is_retryable(),
        "{err:?}"
    );

    let hung = issue_request(CardNetwork::Mastercard);
    sim.arm(
        &[("card_id", hung.card_id.as_str())],
        "timeout_after_success",
        Some(1),
    )
    .await;
    let started = Instant::now();
    let err = sim.issuer.issue(&hung).await.expect_err("timeout");
    assert!(
        started.elapsed() < HANG,
        "the adapter gave up at its timeout"
    );
    assert!(
        matches!(
            err,
            ProviderError::Unknown {
                timed_out: true,
                ..
            }
        ) && err.needs_inquiry(),
        "{err:?}"
    );
    let found = sim
        .issuer
        .find_issued(&hung.idempotency_key)
        .await
        .expect("find")
        .expect("the card was issued");
    assert_eq!(sim.issuer.issue(&hung).await.expect("resend"), found);

    sim.arm(&[("operation", "status")], "transient", Some(1))
        .await;
    let err = sim
        .issuer
        .set_status(&found.provider_card_id, IssuerStatus::Frozen)
        .await
        .expect_err("503");
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
    assert!(sim.executions("status").await.is_empty());
    let mut issued = sim.executions("issue").await;
    issued.sort();
    let mut expected = vec![transient.idempotency_key, hung.idempotency_key];
    expected.sort();
    assert_eq!(issued, expected, "one execution per card, none declined");
}

#[actix_web::test]
async fn played_card_events_reach_tern_signed_and_answer_its_decision() {
    let tern = Tern::default();
    let sim = start(Some(tern.start())).await;
    let swipe = |amount_minor| wire::AuthorizationControl {
        card_id: "card_play".into(),
        amount_minor,
        currency: "USD".into(),
        merchant: Some("Corner Cafe".into()),
        mcc: Some("5814".into()),
        channel: None,
        country: None,
    };
    let approved = sim.control.authorize(&swipe(1_250)).await.expect("swipe");
    assert_eq!(approved.status, 200);
    assert_eq!(approved.decision, json!({"approved": true, "reason": ""}));
    let authorization_id = approved.authorization_id.clone().expect("id");
    assert!(authorization_id.starts_with("auth_"));
    assert!(approved.event_id.starts_with("evt_sbx_"));
    let event = tern
        .wait_for(
            "authorization.request",
            "authorization_id",
            &authorization_id,
        )
        .await;
    assert_eq!(event["id"], approved.event_id.as_str());
    assert_eq!(
        event["data"],
        json!({
            "authorization_id": authorization_id,
            "card_id": "card_play",
            "amount_minor": 1_250,
            "currency": "USD",
            "merchant": "Corner Cafe",
            "mcc": "5814",
            "channel": "pos",
            "country": "US",
        })
    );
    let declined = sim.control.authorize(&swipe(50_000)).await.expect("swipe");
    assert_eq!(declined.decision["approved"], false);

    let cleared = sim
        .control
        .clear(&wire::ClearingControl {
            authorization_id: authorization_id.clone(),
            card_id: "card_play".into(),
            amount_minor: None,
            currency: "USD".into(),
        })
        .await
        .expect("clearing");
    assert_eq!(cleared.status, 200);
    let event = tern
        .wait_for(
            "authorization.clearing",
            "authorization_id",
            &authorization_id,
        )
        .await;
    assert_eq!(
        event["data"]["amount_minor"], 1_250,
        "the authorized amount"
    );

    let partial = sim
        .control
        .reverse(&wire::ReversalControl {
            authorization_id: authorization_id.clone(),
            card_id: "card_play".into(),
            amount_minor: Some(250),
        })
        .await
        .expect("reversal");
    assert_eq!(partial.status, 200);
    assert_eq!(
        partial.authorization_id.as_deref(),
        Some(authorization_id.as_str())
    );
    let event = tern
        .wait_for(
            "authorization.reversal",
            "authorization_id",
            &authorization_id,
        )
        .await;
    assert_eq!(event["id"], partial.event_id.as_str());
    assert_eq!(
        event["data"],
        json!({"authorization_id": authorization_id, "card_id": "card_play", "amount_minor": 250})
    );
    sim.control
        .reverse(&wire::ReversalControl {
            authorization_id: "auth_rest".into(),
            card_id: "card_play".into(),
            amount_minor: None,
        })
        .await
        .expect("reversal of the rest");
    let event = tern
        .wait_for("authorization.reversal", "authorization_id", "auth_rest")
        .await;
    assert_eq!(
        event["data"],
        json!({"authorization_id": "auth_rest", "card_id": "card_play"}),
        "no amount: the rest of the hold"
    );

    let refunded = sim
        .control
        .refund_to_card(&wire::CardRefundControl {
            card_id: "card_play".into(),
            amount_minor: 300,
            currency: "USD".into(),
            authorization_id: Some(authorization_id.clone()),
            merchant: None,
        })
        .await
        .expect("refund");
    let refund_id = refunded.refund_id.expect("refund id");
    let event = tern
        .wait_for("refund.succeeded", "refund_id", &refund_id)
        .await;
    assert_eq!(event["data"]["card_id"], "card_play");
    assert_eq!(event["data"]["amount_minor"], 300);

    let bad = sim
        .control
        .authorize(&wire::AuthorizationControl {
            channel: Some("telepathy".into()),
            ..swipe(100)
        })
        .await;
    assert!(
        matches!(bad, Err(ProviderError::Permanent { status: 400, .. })),
        "{bad:?}"
    );
    assert!(
        sim.control
            .executions(ExecutionFilter::default())
            .await
            .expect("executions")
            .is_empty(),
        "played events are not executions"
    );

    let unconnected = start(None).await;
    let err = unconnected
        .control
        .authorize(&swipe(100))
        .await
        .expect_err("no callback");
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
}
