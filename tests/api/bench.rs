//! The load tool works end to end: `tern bench settlements` against a
//! running server creates, completes and checks what it says, and `tern
//! bench webhooks` counts every signed delivery to its own receiver, `tern
//! bench logins` logs in while reading sessions, and `tern bench
//! authorizations` has every signed authorization request decided and each
//! card's holds match its approvals. Figures are printed, never asserted:
//! timing belongs to benchmarks, not tests.

use tern::config::RateLimits;

use crate::helpers::TestApp;

#[actix_web::test]
async fn bench_settlements_drives_pushes_to_completion_and_checks_the_ledger() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("off").expect("off is a valid setting");
    })
    .await;
    let args = ["settlements", "--url", &app.address, "--count", "40"];
    let stdout = tern_bench(
        &app,
        &[&args[..], &["-c", "8", "--amount", "2.50"]].concat(),
    )
    .await;
    assert!(stdout.contains("created:     40 in"), "{stdout}");
    assert!(stdout.contains("(succeeded 40, failed 0)"), "{stdout}");
    assert!(stdout.contains("create latency: p50"), "{stdout}");
    assert!(stdout.contains("ledger check: ok"), "{stdout}");
}

#[actix_web::test]
async fn bench_settlements_names_the_rate_limit_it_hits() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("m2m_register=1/1h").expect("valid limits");
    })
    .await;
    let run = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["bench", "settlements", "--url", &app.address])
            .args(["--count", "1", "--no-check"])
            .env("TERN_LOG", "warn")
            .output()
    };
    let first = run().await.expect("run tern bench");
    assert!(first.status.success(), "{first:?}");
    let second = run().await.expect("run tern bench");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(stderr.contains("TERN_RATE_LIMITS=off"), "{stderr}");
}

/// `tern bench <args>` as a child process (the server runs on the test's
/// own thread) against `app`'s database, for the ledger check; answers
/// stdout once it exited successfully.
async fn tern_bench(app: &TestApp, args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("bench")
        .args(args)
        .env("TERN_DATABASE_URL", app.database.url())
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    stdout
}

#[actix_web::test]
async fn bench_webhooks_receives_every_event_and_its_replay() {
    let tls = tempfile::tempdir().expect("tls dir");
    let dir = tls.path().to_str().expect("a UTF-8 path");
    // The certificates come first: the server reads its extra CA at startup.
    let made = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["bench", "webhook-tls", dir])
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern bench webhook-tls");
    let printed = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{made:?}");
    let ca = tls.path().join("ca.pem");
    let env = format!(
        "TERN_WEBHOOK_CA_FILE={} TERN_WEBHOOK_ALLOW_PRIVATE=true",
        ca.display()
    );
    assert!(printed.contains(&env), "{printed}");
    let app = TestApp::spawn_with(|config| {
        // A delivery that fails by chance is retried within the test.
        config.webhook_retry_schedule = vec![std::time::Duration::from_millis(200); 3];
        config.rate_limits = RateLimits::parse("off").expect("off is a valid setting");
        config.webhook_allow_private = true;
        config.webhook_ca_file = Some(ca.clone());
    })
    .await;

    let args = ["webhooks", "--url", &app.address, "-n", "20", "-c", "4"];
    let stdout = tern_bench(
        &app,
        &[&args[..], &["--replay", "--wait", "120", "--tls-dir", dir]].concat(),
    )
    .await;
    let counts = "100 received of 100 expected, 100 unique webhook-ids, 0 duplicates, \
                  0 bad signatures, 0 order violations";
    assert!(stdout.contains("(succeeded 20, failed 0)"), "{stdout}");
    assert!(
        stdout.contains(&format!("\ndeliveries: {counts}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("lag (status change to receipt): p50"),
        "{stdout}"
    );
    assert!(stdout.contains(", requeued 100\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("\nreplay deliveries: {counts}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("replay lag (replay request to receipt): p50"),
        "{stdout}"
    );
    assert!(stdout.contains("ledger check: ok"), "{stdout}");
    assert!(!stdout.contains("failed TLS handshakes"), "{stdout}");
}

/// The count that starts the line beginning with `prefix` in `stdout`.
fn count_after(stdout: &str, prefix: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in {stdout}"));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count in `{line}`"))
}

#[actix_web::test]
async fn bench_logins_logs_in_and_reads_sessions_meanwhile() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits =
            RateLimits::parse("login=1000000/1s,register=1000000/1s").expect("valid limits");
    })
    .await;
    let args = ["logins", "--url", &app.address, "--users", "2", "-c", "4"];
    let stdout = tern_bench(
        &app,
        &[
            &args[..],
            &["--readers", "1", "--duration", "1s", "--baseline", "500ms"],
        ]
        .concat(),
    )
    .await;
    assert!(count_after(&stdout, "logins:  ") > 0, "{stdout}");
    assert!(count_after(&stdout, "/me idle: ") > 0, "{stdout}");
    assert!(count_after(&stdout, "/me under logins: ") > 0, "{stdout}");
    assert_eq!(stdout.matches("(failed 0)").count(), 3, "{stdout}");
    assert!(stdout.contains("login latency: p50"), "{stdout}");
    assert!(stdout.contains("/me idle server time: p50"), "{stdout}");
    assert!(
        stdout.contains("/me under logins server time: p50"),
        "{stdout}"
    );
    assert!(stdout.contains("/me under logins latency: p50"), "{stdout}");
}

#[actix_web::test]
async fn bench_logins_names_the_rate_limits_it_needs() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("register=1/1h").expect("valid limits");
    })
    .await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["bench", "logins", "--url", &app.address, "--users", "2"])
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("TERN_RATE_LIMITS=login=1000000/1s,register=1000000/1s"),
        "{stderr}"
    );
}

/// A server whose registrations are not limited, and the bench's arguments
/// for it with its webhook secret.
async fn authorizations_app() -> (TestApp, String) {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits =
            RateLimits::parse("login=1000000/1s,register=1000000/1s").expect("valid limits");
    })
    .await;
    let secret = app
        .state
        .config
        .card_provider_webhook_secret
        .clone()
        .expect("a secret is always resolved at start");
    (app, secret)
}

#[actix_web::test]
async fn bench_authorizations_decides_every_request_and_holds_what_it_approved() {
    let (app, secret) = authorizations_app().await;
    let args = ["authorizations", "--url", &app.address, "-n", "120"];
    let stdout = tern_bench(
        &app,
        &[
            &args[..],
            &["-c", "8", "--cards", "3", "--amount-minor", "2"],
            &["--webhook-secret", &secret],
        ]
        .concat(),
    )
    .await;
    assert!(
        stdout.contains("decisions:  120 answered of 120 in"),
        "{stdout}"
    );
    assert!(stdout.contains("\nnon-200:    none\n"), "{stdout}");
    assert!(stdout.contains("approved:   120, declined 0\n"), "{stdout}");
    assert!(stdout.contains("decisions latency: p50"), "{stdout}");
    assert!(stdout.contains("holds: ok on 3 card(s)"), "{stdout}");
    assert!(!stdout.contains("MISMATCH"), "{stdout}");
    assert!(stdout.contains("ledger check: ok"), "{stdout}");
}

#[actix_web::test]
async fn bench_authorizations_clears_every_approval() {
    let (app, secret) = authorizations_app().await;
    let args = ["authorizations", "--url", &app.address, "-n", "30"];
    let stdout = tern_bench(
        &app,
        &[
            &args[..],
            &[
                "-c",
                "4",
                "--cards",
                "2",
                "--clear",
                "--webhook-secret",
                &secret,
            ],
        ]
        .concat(),
    )
    .await;
    assert!(stdout.contains("approved:   30, declined 0\n"), "{stdout}");
    assert!(
        stdout.contains("clearings:  30 cleared of 30 in"),
        "{stdout}"
    );
    assert!(stdout.contains("holds: ok on 2 card(s)"), "{stdout}");
    assert!(stdout.contains("ledger check: ok"), "{stdout}");
}

#[actix_web::test]
async fn bench_authorizations_names_the_rate_limits_it_needs() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("register=1/1h").expect("valid limits");
    })
    .await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["bench", "authorizations", "--url", &app.address])
        .args(["--cards", "2", "-n", "2", "--webhook-secret", "any"])
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("TERN_RATE_LIMITS=login=1000000/1s,register=1000000/1s"),
        "{stderr}"
    );
}
