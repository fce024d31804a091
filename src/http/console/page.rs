//! The console's HTML, written with maud: every `(value)` is escaped, so a
//! merchant's name or a receiver's error text is shown, never run. The page
//! loads only its own stylesheet, and refreshes itself with a meta tag (no
//! script).

use maud::{html, Markup, DOCTYPE};

use super::view::{age, since, DeadMerchant, Stored, View};
use super::Notice;

/// Seconds between the page's own reloads.
pub const REFRESH_S: u32 = 5;
/// Where the stylesheet is served; the version busts caches on upgrade.
pub const STYLESHEET_PATH: &str = "/console/assets/console.css";

/// The stylesheet's URL, keyed by its content: it is cached for a year, so
/// a changed stylesheet must have a new URL even under the same version.
fn stylesheet_href() -> &'static str {
    static HREF: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HREF.get_or_init(|| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(super::STYLESHEET.as_bytes());
        format!("{STYLESHEET_PATH}?v={}", hex::encode(&digest[..6]))
    })
}

fn layout(title: &str, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // Not no-referrer: with it a browser sends `Origin: null` on its own
                // forms, which the Origin check refuses.
                meta name="referrer" content="same-origin";
                @if refresh {
                    // Back to /console itself, so a notice is shown once.
                    meta http-equiv="refresh" content=(format!("{REFRESH_S}; url=/console"));
                }
                title { (title) " · Tern" }
                link rel="stylesheet" href=(stylesheet_href());
            }
            body { (body) }
        }
    }
}

/// The sign-in form, with what went wrong the last time.
pub fn sign_in(error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        false,
        html! {
            main.narrow {
                h1 { "Tern console" }
                p { "Sign in with the operator token (" code { "TERN_OPERATOR_TOKEN" } ")." }
                @if let Some(error) = error {
                    p.error #sign-in-error role="alert" { (error) }
                }
                form method="post" action="/console/sign-in" {
                    label for="token" { "Operator token" }
                    input #token type="password" name="token" autocomplete="current-password" required autofocus;
                    button #sign-in type="submit" { "Sign in" }
                }
            }
        },
    )
}

/// The console is off until an operator token is configured.
pub fn off() -> Markup {
    layout(
        "Console off",
        false,
        html! {
            main.narrow {
                h1 { "Tern console" }
                p { "The console is off: set " code { "TERN_OPERATOR_TOKEN" } " and restart Tern to turn it on." }
            }
        },
    )
}

/// A refusal or failure, in words, with the way back.
pub fn error(title: &str, detail: &str) -> Markup {
    layout(
        title,
        false,
        html! {
            main.narrow {
                h1 { (title) }
                p #error { (detail) }
                p { a href="/console" { "Back to the console" } }
            }
        },
    )
}

/// The console itself.
pub fn console(view: &View, csrf: &str, notice: Option<&Notice>) -> Markup {
    layout(
        "Console",
        true,
        html! {
            header {
                h1 { "Tern console" }
                span.muted { "refreshed " (view.now.format("%Y-%m-%d %H:%M:%S UTC")) ", every " (REFRESH_S) " s" }
                @if !csrf.is_empty() {
                    form.inline method="post" action="/console/sign-out" {
                        input type="hidden" name="csrf" value=(csrf);
                        button #sign-out type="submit" { "Sign out" }
                    }
                }
            }
            main {
                @if let Some(notice) = notice {
                    p.notice #notice role="status" { (notice.text()) }
                }
                @if let Err(problem) = &view.stored {
                    p.error #database-error role="alert" { (problem) }
                }
                div.overview {
                    (node(view))
                    (actors(view))
                }
                (cluster(view))
                (stuck(view))
                @if let Ok(stored) = &view.stored {
                    (dead_letters(view, stored, csrf))
                }
                (failures(view))
            }
        },
    )
}

/// This process.
fn node(view: &View) -> Markup {
    let node = &view.node;
    html! {
        section #node {
            h2 { "Node" }
            dl {
                dt { "id" } dd { (node.id.as_deref().unwrap_or("single process")) }
                dt { "version" } dd { (node.version) " (" (node.build) ")" }
                dt { "environment" } dd { (node.environment) }
                dt { "database" } dd { (node.backend) }
                dt { "started" } dd { (node.started_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                dt { "uptime" } dd #uptime { (age(node.uptime_s)) }
            }
        }
    }
}

/// The nodes sharing the database (PostgreSQL), as `tern status` counts them.
fn cluster(view: &View) -> Markup {
    html! {
        @if let Ok(Stored { nodes: Some(nodes), .. }) = &view.stored {
            section #cluster {
                h2 { "Nodes" }
                @if nodes.is_empty() {
                    p.muted { "No node has registered." }
                } @else {
                    table #nodes {
                        thead { tr { th { "id" } th { "address" } th { "started" } th { "last heartbeat" } th { "live" } th.num { "slots" } } }
                        tbody {
                            @for row in nodes {
                                tr.node {
                                    td { (row.id) }
                                    td { (row.advertise_url.as_deref().unwrap_or("-")) }
                                    td.nowrap { (row.started_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                                    td { (age(since(view.now, row.heartbeat_at))) " ago" }
                                    td { @if row.live { "yes" } @else { strong { "no" } } }
                                    td.num { (row.slots) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn actors(view: &View) -> Markup {
    html! {
        section #actors {
            h2 { "Actors" }
            table {
                thead {
                    tr {
                        th { "kind" } th.num { "live" } th.num { "backlog" } th.num { "restarts" }
                        th.num { "crashes" } th.num { "stuck" } th.num { "oldest in flight" }
                    }
                }
                tbody {
                    @for (kind, figures) in &view.kinds {
                        tr data-kind=(kind) {
                            td { (kind) }
                            td.num { (figures.live_actors) }
                            td.num { (figures.mailbox_backlog) " / " (figures.mailbox_capacity) }
                            td.num { (figures.restarts) }
                            td.num { (figures.crashes) }
                            td.num { @if figures.stuck_count > 0 { strong { (figures.stuck_count) } } @else { "0" } }
                            td.num { (age(i64::try_from(figures.oldest_in_flight_ms / 1_000).unwrap_or(i64::MAX))) }
                        }
                    }
                }
            }
        }
    }
}

fn stuck(view: &View) -> Markup {
    let more = view.stuck_total.saturating_sub(view.stuck.len() as u64);
    html! {
        section #stuck {
            h2 { "Stuck entities (" (view.stuck_total) ")" }
            @if view.stuck.is_empty() {
                p.muted { "None." }
            } @else {
                table {
                    thead { tr { th { "kind" } th { "id" } th { "for" } th { "reason" } } }
                    tbody {
                        @for (kind, entity) in &view.stuck {
                            tr.stuck {
                                td { (kind) }
                                td { code { (entity.id) } }
                                td { (age(i64::try_from(entity.age_ms / 1_000).unwrap_or(i64::MAX))) }
                                td { (entity.reason) }
                            }
                        }
                    }
                }
                @if more > 0 {
                    p.muted { (more) " more not listed (" code { "/health/actors" } " lists up to 20 per kind)." }
                }
            }
        }
    }
}

fn dead_letters(view: &View, stored: &Stored, csrf: &str) -> Markup {
    let more = stored.dead_total.saturating_sub(stored.dead_listed as i64);
    html! {
        section #dead-letters {
            h2 { "Dead-lettered webhook events (" (stored.dead_total) ")" }
            @if stored.dead.is_empty() {
                p.muted #no-dead-letters { "None." }
            }
            @for merchant in &stored.dead {
                (dead_merchant(view, merchant, csrf))
            }
            @if more > 0 {
                p.muted { (more) " more not listed; replay these first." }
            }
        }
    }
}

fn dead_merchant(view: &View, merchant: &DeadMerchant, csrf: &str) -> Markup {
    html! {
        h3.merchant data-merchant=(merchant.merchant_id) {
            (merchant.name.as_deref().unwrap_or("(unknown merchant)"))
            " " span.muted { code { (merchant.merchant_id) } }
        }
        table.dead-letters {
            thead {
                tr {
                    th { "transfer" } th { "event" } th.num { "attempts" }
                    th { "last error" } th { "dead for" } th { "" }
                }
            }
            tbody {
                @for transfer in &merchant.transfers {
                    @for (n, event) in transfer.events.iter().enumerate() {
                        tr.dead-letter data-event=(event.event_id) data-transfer=(transfer.transfer_id) {
                            @if n == 0 {
                                td rowspan=(transfer.events.len()) { code { (transfer.transfer_id) } }
                            }
                            td { (event.event_type) }
                            td.num { (event.attempts) }
                            td.error-text {
                                @if let Some(code) = event.last_status_code { "HTTP " (code) ": " }
                                (event.last_error.as_deref().unwrap_or("-"))
                            }
                            td { (age(since(view.now, event.dead_since))) }
                            @if n == 0 {
                                td rowspan=(transfer.events.len()) {
                                    @if !csrf.is_empty() {
                                        form.replay method="post" action="/console/replay" data-transfer=(transfer.transfer_id) {
                                            input type="hidden" name="csrf" value=(csrf);
                                            input type="hidden" name="merchant_id" value=(merchant.merchant_id);
                                            input type="hidden" name="transfer_id" value=(transfer.transfer_id);
                                            button type="submit" { "Replay" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn failures(view: &View) -> Markup {
    html! {
        section #provider-failures {
            h2 { "Latest provider failures on this node" }
            @if view.failures.is_empty() {
                p.muted { "None since this node started." }
            } @else {
                table {
                    thead { tr { th { "provider" } th { "operation" } th { "outcome" } th { "error" } th { "when" } } }
                    tbody {
                        @for failure in &view.failures {
                            tr.provider-failure {
                                td { (failure.provider) }
                                td { (failure.operation) }
                                td { (failure.outcome) }
                                td.error-text { (failure.error) }
                                td { (age((view.now - failure.at).num_seconds())) " ago" }
                            }
                        }
                    }
                }
            }
        }
    }
}
