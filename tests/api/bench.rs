//! The load tool works end to end: `tern bench settlements` against a
//! running server creates, completes and checks what it says. Figures are
//! printed, never asserted: timing belongs to benchmarks, not tests.

use tern::config::RateLimits;

use crate::helpers::TestApp;

#[actix_web::test]
async fn bench_settlements_drives_pushes_to_completion_and_checks_the_ledger() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("off").expect("off is a valid setting");
    })
    .await;
    // A child process: the server runs on this test's own thread.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["bench", "settlements", "--url", &app.address])
        .args(["--count", "40", "--concurrency", "8", "--amount", "2.50"])
        .env("TERN_DATABASE_URL", app.database.url())
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
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
