//! The fleet page's HTML, rendered on the server (the basics work without JavaScript).
//! maud escapes every interpolated string for HTML, so a name or message from a
//! repository or a member lands as text; control characters are written out too.

use maud::{DOCTYPE, Markup, html};

use super::model::{COLUMNS, Cell, Filter, Fleet, Workload};
use crate::status::Status;
use flotilla_core::why::Explanation;

/// Text from a repository or a member, control characters written out (maud escapes
/// the HTML).
pub(super) fn t(text: &str) -> String {
    flotilla_core::escape::visible(text).into_owned()
}

/// A path segment of one of the page's URLs.
fn segment(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The URL of a workload's page.
pub fn workload_url(w: &Workload) -> String {
    let key = &w.key;
    match &key.namespace {
        Some(ns) => format!("/ui/workload/{}/{}/{}", segment(&key.kind), segment(ns), segment(&key.name)),
        None => format!("/ui/workload/{}/{}", segment(&key.kind), segment(&key.name)),
    }
}

pub(super) fn member_url(name: &str) -> String {
    format!("/ui/member/{}", segment(name))
}

pub(super) fn layout(title: &str, revision: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (t(title)) " · flotilla" }
                link rel="stylesheet" href="/ui/static/ui.css";
                script src="/ui/static/live.js" defer {}
            }
            body {
                header {
                    a href="/ui/" { "flotilla" }
                    nav.views {
                        a href="/ui/rollouts" { "Rollouts" } " "
                        a href="/ui/failover" { "Failover" } " "
                        a href="/ui/services" { "Services" } " "
                        a href="/ui/previews" { "Pull requests" } " "
                        a href="/ui/history" { "History" }
                    }
                    span.revision { "revision " code { (t(revision)) } }
                }
                main id="main" { (body) }
            }
        }
    }
}

pub(super) fn class_of(health: &str) -> &'static str {
    match health.split([' ', ':']).next().unwrap_or_default() {
        "Healthy" => "healthy",
        "Progressing" => "progressing",
        "Degraded" | "Missing" => "unhealthy",
        _ => "unknown",
    }
}

fn cell(member: &str, w: &Workload, c: &Cell) -> Markup {
    let desired = c.desired.map(|d| d.to_string()).unwrap_or_default();
    let shown = match (&c.ready, c.desired) {
        (Some(ready), _) => ready.clone(),
        (None, Some(d)) => format!("?/{d}"),
        (None, None) => String::new(),
    };
    html! {
        td class=(class_of(&c.health)) data-member=(member) data-workload=(w.path()) data-replicas=(desired) title=(t(&c.health)) {
            (shown) " " span.health { (t(&c.health)) }
        }
    }
}

/// The overview's filter form, holding the filter in force.
fn filters(fleet: &Fleet, filter: &Filter) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    html! {
        form method="get" action="/ui/" class="filters" {
            label { "Namespace " input name="namespace" value=(value(&filter.namespace)); }
            label { "Kind " input name="kind" value=(value(&filter.kind)); }
            label { "Labels " input name="label" value=(value(&filter.label)) placeholder="app=web,tier"; }
            label { "Member "
                select name="member" {
                    option value="" { "any" }
                    @for name in fleet.members.keys() {
                        option value=(name) selected[filter.member.as_deref() == Some(name.as_str())] { (t(name)) }
                    }
                }
            }
            label { "Health "
                select name="health" {
                    option value="" { "any" }
                    option value="healthy" selected[filter.health.as_deref() == Some("healthy")] { "healthy" }
                    option value="unhealthy" selected[filter.health.as_deref() == Some("unhealthy")] { "unhealthy" }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The overview: members × workloads, filtered and paged on the server.
pub fn overview(fleet: &Fleet, filter: &Filter) -> Markup {
    let (rows, kept, pages) = filter.page(fleet);
    let page = filter.page.unwrap_or(1).clamp(1, pages);
    let (columns, column, column_pages) = filter.columns(fleet);
    let link = |page: usize, column: usize| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("namespace", &filter.namespace),
            ("member", &filter.member),
            ("health", &filter.health),
            ("kind", &filter.kind),
            ("label", &filter.label),
        ] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                query.append_pair(k, v);
            }
        }
        query.append_pair("page", &page.to_string());
        if column > 1 {
            query.append_pair("columns", &column.to_string());
        }
        format!("/ui/?{}", query.finish())
    };
    let body = html! {
        h1 { "Fleet" }
        (filters(fleet, filter))
        @if let Err(why) = filter.selector() { p.unhealthy { "Label selector: " (t(&why)) } }
        p.count {
            (kept) " objects · page " (page) " of " (pages)
            @if column_pages > 1 { " · members " ((column - 1) * COLUMNS + 1) "–" ((column - 1) * COLUMNS + columns.len()) " of " (fleet.members.len()) }
        }
        table.fleet {
            thead { tr {
                th scope="col" { "Object" }
                @for (name, m) in columns.iter().map(|n| (*n, &fleet.members[*n])) {
                    th scope="col" {
                        a href=(member_url(name)) { (t(name)) }
                        @if m.error.is_some() { " " span.unhealthy { "unreachable" } }
                    }
                }
            } }
            tbody {
                @for w in &rows {
                    tr {
                        th scope="row" { a href=(workload_url(w)) { (t(&w.path())) } }
                        @for name in &columns {
                            @match w.cells.get(*name) {
                                Some(c) => (cell(name, w, c)),
                                None => td.absent data-member=(name) data-workload=(w.path()) { "—" },
                            }
                        }
                    }
                }
            }
        }
        nav.pages {
            @if page > 1 { a href=(link(page - 1, column)) rel="prev" { "← previous" } " " }
            @if page < pages { a href=(link(page + 1, column)) rel="next" { "next →" } }
            @if column > 1 { " " a href=(link(page, column - 1)) { "← members" } }
            @if column < column_pages { " " a href=(link(page, column + 1)) { "members →" } }
        }
    };
    layout("Fleet", &fleet.revision, body)
}

/// One workload: why it is where it is, and how it is in each member.
pub fn workload(fleet: &Fleet, w: &Workload, e: &Explanation, status: Option<&Status>, live: Option<Markup>) -> Markup {
    let spelled = w.key.spelled();
    let failed = |member: &str| status.and_then(|s| s.failed.get(member)).and_then(|f| f.get(&spelled));
    let body = html! {
        h1 { (t(&w.path())) }
        p { "Declared at " code { (t(&e.origin)) } }
        h2 { "Claimed by" }
        p { (t(&e.claim)) }
        @if !e.policies.is_empty() {
            ul.policies { @for p in &e.policies {
                li { (t(&p.policy)) " (by " (p.selects_by) ", priority " (p.priority) "): " (t(&p.why)) }
            } }
        }
        @if let Some(strategy) = &e.strategy {
            h2 { "Placement" }
            p { (t(strategy)) @if let Some(n) = e.replicas { ", " (n) " replicas" } }
            ul.arithmetic { @for line in &e.arithmetic { li { (t(line)) } } }
        }
        h2 { "Members" }
        table.members {
            thead { tr { th scope="col" { "Member" } th scope="col" { "Why" } th scope="col" { "Ready" } th scope="col" { "Health" } } }
            tbody { @for (name, m) in &e.members {
                @let c = w.cells.get(name);
                tr data-member=(name) data-replicas=(m.replicas.map(|r| r.to_string()).unwrap_or_default()) {
                    th scope="row" { a href=(member_url(name)) { (t(name)) } }
                    td {
                        (t(&m.why))
                        @for step in &m.overrides {
                            div.override { (t(&step.policy)) " rule " (step.rule)
                                ul { @for field in &step.fields { li { code { (t(field)) } } } }
                            }
                        }
                        @if let Some(wave) = &m.wave { div.wave { "rollout: " (t(wave)) } }
                        @if let Some(error) = failed(name) { div.unhealthy data-failed="" { "last apply failed: " (t(error)) } }
                    }
                    td { (c.and_then(|c| c.ready.clone()).unwrap_or_default()) }
                    td class=(c.map_or("unknown", |c| class_of(&c.health))) { (t(&c.map_or_else(|| "—".to_owned(), |c| c.health.clone()))) }
                }
            } }
        }
        @if let Some(live) = live { (live) }
        @if let Some(rollout) = &e.rollout { h2 { "Rollout" } p { (t(rollout)) } }
        @if !e.problems.is_empty() {
            h2 { "Problems" }
            ul.problems { @for p in &e.problems { li { (t(p)) } } }
        }
    };
    layout(&w.path(), &fleet.revision, body)
}

/// One member: what the plan places there and how each object is, and where the
/// controller stands with it (when a controller serves the page).
pub fn member(fleet: &Fleet, name: &str, status: Option<&Status>) -> Markup {
    let m = &fleet.members[name];
    let placed: Vec<(&Workload, &Cell)> =
        fleet.workloads.iter().filter_map(|w| w.cells.get(name).map(|c| (w, c))).collect();
    let body = html! {
        h1 { (t(name)) }
        p { (m.sync_mode) " member · " (m.objects) " objects placed" }
        @if let Some(error) = &m.error { p.unhealthy { "Not read: " (t(error)) } }
        @if let Some(status) = status { (super::views::member_status(name, status)) }
        h2 { "Objects" }
        table.members {
            thead { tr { th scope="col" { "Object" } th scope="col" { "Desired" } th scope="col" { "Ready" } th scope="col" { "Health" } } }
            tbody { @for (w, c) in &placed {
                tr data-member=(name) data-workload=(w.path()) data-replicas=(c.desired.map(|d| d.to_string()).unwrap_or_default()) {
                    th scope="row" { a href=(workload_url(w)) { (t(&w.path())) } }
                    td { (c.desired.map(|d| d.to_string()).unwrap_or_default()) }
                    td { (c.ready.clone().unwrap_or_default()) }
                    td class=(class_of(&c.health)) { (t(&c.health)) }
                }
            } }
        }
    };
    layout(name, &fleet.revision, body)
}

/// A page for what does not exist.
pub fn not_found(fleet: &Fleet, what: &str) -> Markup {
    layout(
        "Not found",
        &fleet.revision,
        html! { h1 { "Not found" } p { (t(what)) } p { a href="/ui/" { "The fleet" } } },
    )
}
