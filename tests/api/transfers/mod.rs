//! Transfers over HTTP (interface: Quotes, Transfers; decisions §3, §4, §7):
//! the saga against the real sandbox (`saga`: card charge, conversion,
//! on-chain payout, 3DS, retries, compensation and its alert) and the
//! request side (`requests`: validation, idempotency, lists, isolation,
//! scopes), and `leg_keys`: a leg's key is never a merchant's to take.
//! Every test that moves money ends by checking the simulator's
//! execution log (one execution per provider operation); teardown checks
//! the ledger.

mod leg_keys;
mod races;
mod requests;
mod saga;
