//! Cards over HTTP: issuance through the simulator's issuer, the status
//! table, limits, machine and session callers, and authorization decisions
//! through signed provider webhooks.

mod amounts;
mod authorizations;
mod holds;
mod intents;
mod lifecycle;
mod on_session;
mod races;
mod repeats;
mod secure;
mod standing;
mod wallet;
