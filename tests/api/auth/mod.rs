//! Human accounts over HTTP: registration, login, sessions and their
//! cookie, CSRF, mailed tokens (outbox and a real SMTP sink), rate limits.

mod csrf;
mod email;
mod login;
mod register;
mod session_list;
mod sessions;
