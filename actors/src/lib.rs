//! Tern's actor runtime and entity actors. Knows nothing of HTTP: the edge
//! holds a [`runtime::Runtime`], sends messages through its registries and
//! maps [`runtime::RuntimeError`] to statuses.

// The non-test build of this crate still denies string slices.
#![cfg_attr(test, allow(clippy::string_slice, reason = "a test may panic"))]

pub mod adapters;
pub mod card;
pub mod mail_outbox;
pub mod metrics;
pub mod ports;
pub mod push;
pub mod quote;
pub mod runtime;
pub mod settlement;
pub mod trace;
pub mod transfer;
pub mod webhook;
