//! Outbound webhooks over HTTP (interface: Webhook endpoint management,
//! Events; decisions §8): endpoint management and its validation
//! (`endpoint`), and deliveries to a real HTTPS receiver started by the test
//! (`delivery`), each signature checked with the `standardwebhooks` crate.

mod delivery;
mod endpoint;
mod ssrf;
