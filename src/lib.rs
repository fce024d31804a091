//! Tern: a payment settlement engine. This crate is the process and the HTTP
//! edge; actors live in `tern-actors`, persistence in `tern-schema`.

// The non-test build of this crate still denies string slices.
#![cfg_attr(test, allow(clippy::string_slice, reason = "a test may panic"))]

pub mod auth;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod http;
pub mod metrics;
pub mod openapi;
pub mod rate_limit;
pub mod sandbox;
pub mod startup;
pub mod state;
pub mod status;
pub mod telemetry;
pub mod validate;
