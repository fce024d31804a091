//! The operator console in a real browser: Debian's headless chromium
//! driven through its chromedriver (WebDriver) against the real `tern`
//! binary. A receiver is down, a transfer's webhook events are
//! dead-lettered; the operator signs in by typing the token, sees the
//! events, starts the receiver, presses Replay, and watches them leave the
//! list (the page refreshes itself) while the receiver gets them signed.
//!
//! Needs /usr/bin/chromium and /usr/bin/chromedriver (`.ci/run` installs
//! them). Without them the test says so loudly and passes, unless
//! TERN_REQUIRE_BROWSER=1, as in CI. TERN_CONSOLE_SCREENSHOT=PATH saves a
//! screenshot of the console showing the dead letters (the README's
//! docs/operate/console.png).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

use crate::helpers::webhooks::{SUCCEEDED_TYPES, WAIT_MAX, WHSEC_SECRET};
use crate::helpers::RequestExt;
use crate::processes::{free_port, put_endpoint_at, quote_at, transfer_at, Cluster, Process};
use crate::webhook_receiver::{verify, Receiver};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const TOKEN: &str = "console-browser-operator-token-0123";
/// How long the driver and the browser may take to start.
const DRIVER_WAIT_MAX: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Whether the browser is here; without it the test is skipped unless CI
/// requires it.
fn browser_available() -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var("TERN_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "TERN_REQUIRE_BROWSER=1 but {CHROMIUM} or {CHROMEDRIVER} is missing \
             (apt-get install chromium chromium-driver, as .ci/run does)"
        );
        eprintln!(
            "\n\n*** SKIPPED the console browser test: {CHROMIUM} or {CHROMEDRIVER} is missing. \
             Install Debian's chromium and chromium-driver to run it (see README, Console). ***\n\n"
        );
    }
    present
}

/// chromedriver on a free port, killed when dropped, and a browser
/// session on it with a profile of its own.
struct Browser {
    client: Option<Client>,
    _driver: Process,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        let port = free_port();
        let driver = Process(
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start chromedriver"),
        );
        let url = format!("http://127.0.0.1:{port}");
        crate::processes::wait_ready(&reqwest::Client::new(), &format!("{url}/status")).await;
        let profile = tempfile::tempdir().expect("profile dir");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,1100",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal");
        };
        let started = Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if started.elapsed() < DRIVER_WAIT_MAX => {
                    eprintln!("browser not ready yet: {error}");
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
                Err(error) => panic!("no browser session: {error}"),
            }
        };
        Browser {
            client: Some(client),
            _driver: driver,
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

/// A merchant whose endpoint is the (down) receiver, and a transfer whose
/// five events are dead-lettered; answers the transfer id.
async fn dead_lettered_transfer(cluster: &Cluster, receiver: &Receiver) -> String {
    let api_key = cluster.register("Console Browser Ltd").await;
    let url = |path: &str| format!("{}{path}", cluster.base);
    let (client, base) = (&cluster.client, cluster.base.as_str());
    put_endpoint_at(
        client,
        base,
        &api_key,
        &receiver.url("/hooks"),
        WHSEC_SECRET,
    )
    .await;
    let quote = quote_at(client, base, &api_key).await;
    let created: Value = transfer_at(client, base, &api_key, &quote)
        .read_json()
        .await;
    let transfer_id = created["id"].as_str().expect("id").to_owned();
    let started = Instant::now();
    loop {
        let listed: Value = cluster
            .client
            .get(url(&format!(
                "/v1/webhooks/deliveries?status=dead&transfer_id={transfer_id}"
            )))
            .bearer_auth(&api_key)
            .read_json()
            .await;
        if listed["count"] == SUCCEEDED_TYPES.len() {
            return transfer_id;
        }
        assert!(started.elapsed() < WAIT_MAX, "not dead-lettered: {listed}");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The dead-letter rows of the transfer on the page now.
async fn rows(client: &Client, transfer_id: &str) -> usize {
    let selector = format!("tr.dead-letter[data-transfer=\"{transfer_id}\"]");
    client
        .find_all(Locator::Css(&selector))
        .await
        .map(|rows| rows.len())
        .unwrap_or(0)
}

#[actix_web::test]
async fn an_operator_replays_a_dead_letter_in_a_real_browser() {
    if !browser_available() {
        return;
    }
    let receiver = Receiver::start().await;
    receiver.stop();
    let env = [
        ("TERN_OPERATOR_TOKEN", TOKEN.to_owned()),
        ("TERN_COOKIE_SECURE", "false".to_owned()),
        ("TERN_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        (
            "TERN_WEBHOOK_CA_FILE",
            receiver.ca_file().display().to_string(),
        ),
        ("TERN_WEBHOOK_RETRY_SCHEDULE", "100ms,100ms".to_owned()),
    ];
    let cluster = Cluster::start_with("200ms,200ms,200ms", &env).await;
    let transfer_id = dead_lettered_transfer(&cluster, &receiver).await;

    let browser = Browser::start().await;
    let client = browser.client();
    client
        .goto(&format!("{}/console", cluster.base))
        .await
        .expect("open the console");
    client
        .find(Locator::Css("#token"))
        .await
        .expect("the sign-in form")
        .send_keys(TOKEN)
        .await
        .expect("type the token");
    client
        .find(Locator::Css("#sign-in"))
        .await
        .expect("the sign-in button")
        .click()
        .await
        .expect("sign in");
    let row = format!("tr.dead-letter[data-transfer=\"{transfer_id}\"]");
    if let Err(error) = client
        .wait()
        .at_most(WAIT_MAX)
        .for_element(Locator::Css(&row))
        .await
    {
        let page = client.source().await.unwrap_or_default();
        panic!("the dead-lettered events are not listed ({error}): {page}");
    }
    // The page reloads itself every 5 s; a reload between finding an element
    // and using it would make it stale. Each look below starts from a page
    // just loaded (WebDriver's navigation waits for the load), so the next
    // reload is seconds away.
    let console = format!("{}/console", cluster.base);
    reload(client, &console).await;
    assert_eq!(rows(client, &transfer_id).await, SUCCEEDED_TYPES.len());
    let page = client.source().await.expect("source");
    assert!(page.contains("Console Browser Ltd"), "{page}");
    assert!(page.contains("connection failed"), "{page}");
    if let Ok(path) = std::env::var("TERN_CONSOLE_SCREENSHOT") {
        let png = client.screenshot().await.expect("screenshot");
        std::fs::write(&path, png).expect("write the screenshot");
        eprintln!("console screenshot saved to {path}");
    }

    receiver.restart();
    reload(client, &console).await;
    let button = format!("form.replay[data-transfer=\"{transfer_id}\"] button");
    client
        .find(Locator::Css(&button))
        .await
        .expect("the replay button")
        .click()
        .await
        .expect("press replay");
    let notice = client
        .wait()
        .at_most(WAIT_MAX)
        .for_element(Locator::Css("#notice"))
        .await
        .expect("a notice after the replay")
        .text()
        .await
        .expect("notice text");
    assert_eq!(
        notice,
        format!("replayed 5 events of transfer {transfer_id}")
    );
    // The events leave the list once delivered.
    let started = Instant::now();
    loop {
        reload(client, &console).await;
        if rows(client, &transfer_id).await == 0 {
            break;
        }
        assert!(started.elapsed() < WAIT_MAX, "the dead letters stay listed");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let received = receiver.wait_for(SUCCEEDED_TYPES.len(), WAIT_MAX).await;
    let kinds: Vec<String> = received
        .iter()
        .map(|request| match verify(WHSEC_SECRET, request) {
            Ok(body) => body["type"].as_str().unwrap_or_default().to_owned(),
            Err(error) => panic!("signature of {request:?}: {error}"),
        })
        .collect();
    assert_eq!(kinds, SUCCEEDED_TYPES);
    browser.close().await;
}

/// Loads the console afresh and waits for its dead-letter section, so that
/// what follows reads a whole page, not one being replaced.
async fn reload(client: &Client, console: &str) {
    client.goto(console).await.expect("load the console");
    client
        .wait()
        .at_most(WAIT_MAX)
        .for_element(Locator::Css("#dead-letters"))
        .await
        .expect("the dead-letter section");
}
