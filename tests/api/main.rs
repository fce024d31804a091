//! Black-box tests: the real application on a free port, spoken to over
//! HTTP. Each test owns its database and merchants, so tests run in
//! parallel. Set TERN_TEST_DATABASE_URL to run them on PostgreSQL.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]
#![allow(clippy::string_slice, reason = "test code: a bad slice fails the test")]

mod helpers;
mod nodes;
mod otlp_receiver;
mod processes;
mod smtp_sink;

mod api_keys;
mod audit;
mod audit_verify;
mod auth;
mod bench;
mod binary;
mod cards;
mod console;
mod console_browser;
mod console_nodes;
mod crash;
mod crash_cards;
mod crash_transfers;
mod devices;
mod devices_on_session;
mod docs;
mod errors;
mod issuer_provider;
mod ledger;
mod ledger_append_only;
mod m2m;
mod mail;
mod mail_outbox;
mod merchant_status;
mod metrics;
mod migrations;
mod notifications;
mod ops;
mod provider_health;
mod provider_webhooks;
mod providers;
mod quotes;
mod rate_limits;
mod settlements;
mod settlements_on_session;
mod several_nodes;
mod several_nodes_cards;
mod several_nodes_failover;
mod strangers;
mod teardown;
mod tracing;
mod transfers;
mod webhook_receiver;
mod webhooks;
