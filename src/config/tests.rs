use super::*;

fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    Config::from_lookup(move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
}

#[test]
fn defaults_match_the_decisions() {
    let config = config(&[]).expect("defaults are valid");
    assert_eq!(config.database_url, "sqlite://data/tern.db");
    assert_eq!(config.bind, "127.0.0.1:8080");
    assert_eq!(config.sandbox_bind.as_deref(), Some("127.0.0.1:8081"));
    assert_eq!(config.quote_ttl, Duration::from_secs(60));
    assert_eq!(config.card_hold_ttl, Duration::from_secs(7 * 86_400));
    assert_eq!(config.session_idle_ttl, Duration::from_secs(30 * 60));
    assert_eq!(config.settlement_retry_schedule.len(), 5);
    assert_eq!(
        config.webhook_retry_schedule[6],
        Duration::from_secs(36_000)
    );
    assert_eq!(config.secure_details_mode, SecureDetailsMode::Demo);
    assert!(config.self_service_registration);
    assert_eq!(config.mail_from, "Tern <no-reply@tern.local>");
    assert_eq!(config.smtp_url, None);
    assert_eq!(
        config.rate_limits.get("m2m_register"),
        Some(RateLimit {
            burst: 5,
            period: Duration::from_secs(3_600)
        })
    );
}

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7_200)));
    assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
    for bad in [
        "",
        "5",
        "s",
        "0s",
        "0d",
        "-1s",
        "1.5s",
        "5w",
        "1D",
        "99999999999999999999h",
        "999999999999999999d",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
    }
}

#[test]
fn the_otlp_endpoint_names_its_traces_url() {
    for (endpoint, url) in [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        (
            "https://otel.example/v1/traces",
            "https://otel.example/v1/traces",
        ),
    ] {
        let config = config(&[("TERN_OTLP_ENDPOINT", endpoint)]).expect(endpoint);
        assert_eq!(config.otlp_traces_url.as_deref(), Some(url));
    }
    assert_eq!(config(&[]).expect("defaults").otlp_traces_url, None);
}

#[test]
fn each_bad_value_names_its_variable() {
    let cases = [
        ("TERN_BIND", "localhost"),
        ("TERN_DATABASE_URL", "mysql://x"),
        ("TERN_QUOTE_TTL", "soon"),
        ("TERN_QUOTE_TTL", "0s"),
        ("TERN_CARD_HOLD_TTL", "a week"),
        ("TERN_CARD_HOLD_TTL", "0d"),
        ("TERN_CARD_HOLD_TTL", "366d"),
        ("TERN_OPERATOR_TOKEN", "short"),
        (
            "TERN_OPERATOR_TOKEN",
            "a token of enough length but with spaces",
        ),
        ("TERN_SESSION_IDLE_TTL", "half an hour"),
        ("TERN_SESSION_IDLE_TTL", "0s"),
        ("TERN_QUOTE_RATES", "EUR/USDC=0"),
        ("TERN_QUOTE_RATES", "EUR/USDC=1.08e0"),
        ("TERN_QUOTE_RATES", "XXX/USDT=1"),
        ("TERN_QUOTE_RATES", "EUR=1.08"),
        ("TERN_ENVIRONMENT", "staging"),
        ("TERN_COOKIE_SECURE", "maybe"),
        ("TERN_RATE_LIMITS", "login=ten/1m"),
        ("TERN_RATE_LIMITS", "bogus=1/1s"),
        ("TERN_SELF_SERVICE_REGISTRATION", "perhaps"),
        ("TERN_SETTLEMENT_RETRY_SCHEDULE", "1s,,2s"),
        ("TERN_SECURE_DETAILS_MODE", "peek"),
        ("TERN_LOG", "info,[[["),
        ("TERN_OTLP_ENDPOINT", "collector:4318"),
        ("TERN_OTLP_ENDPOINT", "grpc://collector:4317"),
        ("TERN_OTLP_ENDPOINT", "https://user:key@otel.example"),
        ("TERN_OTLP_ENDPOINT", "http://collector:4318?token=x"),
        ("TERN_SMTP_URL", "mail.example.com:25"),
        ("TERN_MAIL_FROM", "no-reply"),
        ("TERN_MAIL_FROM", "Tern <no-reply@tern.local"),
    ];
    for (variable, value) in cases {
        let err = config(&[(variable, value)]).expect_err(value);
        assert_eq!(err.variable, variable, "{value}");
    }
}

#[test]
fn production_refuses_the_sandbox_and_insecure_settings() {
    let err = config(&[("TERN_ENVIRONMENT", "production")]).expect_err("sandbox on");
    assert_eq!(err.variable, "TERN_SANDBOX_BIND");
    let err = config(&[
        ("TERN_ENVIRONMENT", "production"),
        ("TERN_SANDBOX_BIND", "off"),
        ("TERN_COOKIE_SECURE", "false"),
    ])
    .expect_err("insecure cookie");
    assert_eq!(err.variable, "TERN_COOKIE_SECURE");
    let ok = config(&[
        ("TERN_ENVIRONMENT", "production"),
        ("TERN_SANDBOX_BIND", "off"),
    ])
    .expect("valid");
    assert_eq!(ok.secure_details_mode, SecureDetailsMode::Disabled);
}

#[test]
fn quote_rates_override_the_defaults_pair_by_pair() {
    let config = config(&[("TERN_QUOTE_RATES", "EUR/USDC=1.0921")]).expect("valid");
    let rate = |code: &str, asset| {
        let currency = tern_schema::money::Currency::find(code).expect(code);
        config
            .quote_rates
            .get(currency, asset)
            .map(|r| r.to_string())
    };
    use tern_actors::ports::Asset;
    assert_eq!(rate("EUR", Asset::Usdc).as_deref(), Some("1.0921"));
    assert_eq!(rate("EUR", Asset::Usdt).as_deref(), Some("1.08"));
    assert_eq!(rate("USD", Asset::Usdt).as_deref(), Some("1"));
    assert_eq!(config.quote_pricing, Pricing::default());
}

#[test]
fn rate_limits_override_by_name_or_turn_off() {
    let limits = RateLimits::parse("login=3/1s").expect("valid");
    assert_eq!(
        limits.get("login"),
        Some(RateLimit {
            burst: 3,
            period: Duration::from_secs(1)
        })
    );
    assert_eq!(limits.get("resend").map(|l| l.burst), Some(3));
    assert_eq!(RateLimits::parse("off").expect("valid").get("login"), None);
}

#[test]
fn trusted_proxies_default_to_none_and_bad_ones_stop_the_start() {
    assert!(config(&[]).expect("valid").trusted_proxies.is_empty());
    let config_ok =
        config(&[("TERN_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.7,fd00::/8")]).expect("valid");
    let shown: Vec<String> = config_ok
        .trusted_proxies
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"]);
    for bad in ["10.0.0.0/33", "proxy.internal", "10.0.0.0/8;1.2.3.4"] {
        let err = config(&[("TERN_TRUSTED_PROXIES", bad)]).expect_err(bad);
        assert_eq!(err.variable, "TERN_TRUSTED_PROXIES");
    }
}
