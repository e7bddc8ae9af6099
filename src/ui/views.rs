//! The controller's views of the fleet page: rollouts (waves, soak timers, gates with
//! their last values), failover (member health, taints, evictions, moves),
//! multi-cluster services (providers, consumers, endpoints), pull requests' plans and
//! previews, the history of applied revisions, and what the controller holds of each
//! member. All of it is the status `/status` serves, rendered; under
//! `flotilla ui` (no controller) these pages say where they come from.

use axum::extract::State;
use axum::response::Html;
use maud::{Markup, html};

use super::Ui;
use super::pages::{class_of, layout, member_url, t};
use crate::status::{RolloutStatus, Status};

/// Renders `view` of the controller's status, or says it needs a controller.
fn page(ui: &Ui, title: &str, view: impl FnOnce(&Status) -> Markup) -> Html<String> {
    let now = ui.now();
    let body = match &now.status {
        Some(status) => html! { h1 { (title) } (view(status)) },
        None => html! {
            h1 { (title) }
            p { "This view shows a running controller's state: open the page the controller serves (" code { "flotilla run --ui" } ")." }
        },
    };
    Html(layout(title, &now.fleet.revision, body).into_string())
}

fn or_dash(v: &Option<String>) -> String {
    v.as_deref().map(t).unwrap_or_else(|| "—".to_owned())
}

pub(super) async fn rollouts(State(ui): State<Ui>) -> Html<String> {
    page(&ui, "Rollouts", |status| {
        html! {
            @if status.rollouts.is_empty() { p { "No RolloutPolicy in this revision." } }
            @for (name, r) in &status.rollouts { (rollout(name, r)) }
        }
    })
}

fn rollout(name: &str, r: &RolloutStatus) -> Markup {
    html! {
        section.rollout data-rollout=(name) {
            h2 { (t(name)) }
            p {
                span class=(if r.state == "halted" { "unhealthy" } else { "healthy" }) { (t(&r.state)) }
                @if r.paused { " · paused" }
                @if r.reverted { " · reverted to " (or_dash(&r.last_good)) }
                " · revision " code { (or_dash(&r.revision)) }
                @if let Some(wave) = &r.wave { " · wave " (t(wave)) } @if let Some(b) = r.batch { " batch " (b) }
                @if let Some(until) = &r.soak_until { " · soaking until " (t(until)) }
                @if !r.windows_open { " · outside its windows" }
            }
            @if let Some(reason) = &r.reason { p.unhealthy { (t(reason)) } }
            @if !r.waves.is_empty() {
                table {
                    thead { tr { th scope="col" { "Wave" } th scope="col" { "Members" } th scope="col" { "Started" } th scope="col" { "Soaking" } th scope="col" { "Done" } } }
                    tbody { @for w in &r.waves {
                        tr { th scope="row" { (t(&w.wave)) }
                            td { @for (i, c) in w.clusters.iter().enumerate() { @if i > 0 { ", " } a href=(member_url(c)) { (t(c)) } } }
                            td { (or_dash(&w.started)) } td { (or_dash(&w.soaking)) } td { (or_dash(&w.done)) } }
                    } }
                }
            }
            @if !r.gates.is_empty() {
                h3 { "Gates" }
                ul { @for (gate, g) in &r.gates {
                    li class=(if g.passing { "healthy" } else { "unhealthy" }) {
                        (t(gate)) ": " @match g.value { Some(v) => (v), None => "no value" }
                        (if g.passing { " (passing)" } else { " (failing)" })
                        @if let Some(e) = &g.error { " — " (t(e)) }
                    }
                } }
            }
            @if !r.members.is_empty() {
                h3 { "Members" }
                ul { @for (m, seen) in &r.members { li { a href=(member_url(m)) { (t(m)) } ": " (t(seen)) } } }
            }
        }
    }
}

pub(super) async fn failover(State(ui): State<Ui>) -> Html<String> {
    page(&ui, "Failover", |status| {
        html! {
            h2 { "Member health" }
            @if status.health.is_empty() { p { "The failover loop is off, or has not judged a member yet." } }
            @else {
                table {
                    thead { tr { th scope="col" { "Member" } th scope="col" { "Ready" } th scope="col" { "Since" } th scope="col" { "Reason" } th scope="col" { "Taints" } } }
                    tbody { @for (m, h) in &status.health {
                        tr data-member=(m) {
                            th scope="row" { a href=(member_url(m)) { (t(m)) } }
                            td class=(if h.ready == "True" { "healthy" } else { "unhealthy" }) { (t(&h.ready)) }
                            td { (t(&h.since)) } td { (t(&h.reason)) }
                            td { @for taint in &h.taints { code { (t(taint)) } " " } }
                        }
                    } }
                }
            }
            @if let Some(f) = &status.failover {
                h2 { "Evictions" }
                @if f.evictions.is_empty() { p { "None hold." } }
                ul { @for e in &f.evictions { li { (t(e)) } } }
                h2 { "Moves" }
                @if f.moves.is_empty() { p { "None yet." } }
                @else {
                    table {
                        thead { tr { th scope="col" { "At" } th scope="col" { "Object" } th scope="col" { "From" } th scope="col" { "Reason" } th scope="col" { "Before" } th scope="col" { "After" } } }
                        tbody { @for m in &f.moves {
                            tr { td { (t(&m.at)) } td { (t(&m.object)) } td { (t(&m.from)) } td { (t(&m.reason)) }
                                td { (split(&m.before)) } td { @match &m.after { Some(a) => (split(a)), None => "pending" } } }
                        } }
                    }
                }
            }
        }
    })
}

fn split(replicas: &std::collections::BTreeMap<String, i64>) -> String {
    replicas.iter().map(|(m, n)| format!("{}: {n}", t(m))).collect::<Vec<_>>().join(", ")
}

pub(super) async fn services(State(ui): State<Ui>) -> Html<String> {
    page(&ui, "Services", |status| {
        html! {
            @if status.services.is_empty() { p { "No exported service in this revision." } }
            @for (name, s) in &status.services {
                section.service data-service=(name) {
                    h2 class=(if s.conflict.is_none() && s.consumers.values().all(|c| c.synced) { "healthy" } else { "unhealthy" }) { (t(name)) }
                    p { "Target " code { (t(&s.target)) } }
                    @if let Some(c) = &s.conflict { p.unhealthy { (t(c)) } }
                    h3 { "Providers" }
                    ul { @for (m, p) in &s.providers { li { a href=(member_url(m)) { (t(m)) } ": " (t(&p.state)) ", " (p.endpoints) " endpoints" } } }
                    h3 { "Consumers" }
                    ul { @for (m, c) in &s.consumers {
                        li class=(if c.synced { "healthy" } else { "progressing" }) {
                            a href=(member_url(m)) { (t(m)) } ": " (c.slices) " slices, " (c.endpoints) " endpoints" (if c.synced { "" } else { ", syncing" })
                        }
                    } }
                }
            }
        }
    })
}

pub(super) async fn previews(State(ui): State<Ui>) -> Html<String> {
    page(&ui, "Pull requests", |status| {
        html! {
            @if status.previews.is_empty() { p { "No open pull request has been planned (the preview loop runs with " code { "--forge" } ")." } }
            @else {
                table {
                    thead { tr { th scope="col" { "Pull request" } th scope="col" { "Head" } th scope="col" { "Planned" } th scope="col" { "Members that change" } th scope="col" { "Preview" } } }
                    tbody { @for (number, p) in &status.previews {
                        tr data-pull=(number) {
                            th scope="row" {
                                @match &p.link { Some(link) => a href=(link) rel="noreferrer" { "#" (number) }, None => { "#" (number) } }
                                @if !p.title.is_empty() { " " (t(&p.title)) }
                            }
                            td { code { (t(short(&p.head))) } }
                            td { (t(&p.planned)) }
                            td {
                                @if let Some(e) = &p.error { span.unhealthy { "does not render: " (t(e)) } }
                                @else if p.clusters.is_empty() { "none" }
                                @else { ul { @for (m, line) in &p.clusters { li { a href=(member_url(m)) { (t(m)) } ": " (t(line)) } } } }
                            }
                            td { @match &p.expires { Some(at) => { "running, until " (t(at)) }, None => "—" } }
                        }
                    } }
                }
            }
        }
    })
}

pub(super) async fn history(State(ui): State<Ui>) -> Html<String> {
    page(&ui, "History", |status| {
        html! {
            @if status.history.is_empty() { p { "No member has applied a revision since this controller started." } }
            @else {
                table {
                    thead { tr { th scope="col" { "Revision" } th scope="col" { "First applied" } th scope="col" { "On every member" } th scope="col" { "Members" } } }
                    tbody { @for h in &status.history {
                        tr data-revision=(h.revision) {
                            th scope="row" { code { (t(short(&h.revision))) } }
                            td { (t(&h.first)) }
                            td class=(if h.everywhere.is_some() { "healthy" } else { "progressing" }) { (or_dash(&h.everywhere)) }
                            td { @for (i, (m, at)) in h.members.iter().enumerate() { @if i > 0 { ", " } a href=(member_url(m)) title=(t(at)) { (t(m)) } } }
                        }
                    } }
                }
            }
        }
    })
}

/// A revision's first 12 characters (a commit id stays recognisable).
fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// What the controller holds of one member: its target and applied revision, where it
/// stands, its last error, its health and taints, and what it did not prune.
pub(super) fn member_status(name: &str, status: &Status) -> Markup {
    let m = status.members.get(name);
    let health = status.health.get(name);
    html! {
        h2 { "Convergence" }
        @match m {
            None => p { "This controller does not apply to this member (yet)." },
            Some(m) => dl.member {
                dt { "State" } dd class=(class_of(match m.state.as_str() { "current" => "Healthy", "failing" => "Degraded", _ => "Progressing" })) data-state=(m.state) { (t(&m.state)) }
                dt { "Target revision" } dd { code { (or_dash(&m.target)) } }
                dt { "Applied revision" } dd { code { (or_dash(&m.applied)) } }
                @if let Some(reason) = &m.reason { dt { "Last error" } dd.unhealthy { (t(reason)) } }
                @if m.failures > 0 { dt { "Failures in a row" } dd { (m.failures) } }
                @if let Some(since) = &m.since { dt { "Failing since" } dd { (t(since)) } }
                dt { "Last success" } dd { (or_dash(&m.last_success)) }
            },
        }
        @if let Some(h) = health {
            p { "Ready " (t(&h.ready)) " since " (t(&h.since)) @if !h.reason.is_empty() { ": " (t(&h.reason)) } }
            @if !h.taints.is_empty() { p { "Taints: " @for taint in &h.taints { code { (t(taint)) } " " } } }
        }
        @if let Some(why) = status.prune_refused.get(name) { p.unhealthy { "Prune refused: " (t(why)) } }
        @if let Some(kept) = status.kept.get(name) {
            p { "Left in place: " } ul { @for k in kept { li { (t(k)) } } }
        }
    }
}
