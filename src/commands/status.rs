//! `flotilla status`: health of everything the repo places, per cluster; or, with
//! `--controller`, what a running controller reports.

use std::time::Duration;

use anyhow::Context;

use super::{Outcome, plan, report, runtime};
use crate::cli::{ListFormat, SourceArgs, StatusArgs};
use crate::clusters;
use crate::status::{AutoscalerStatus, Status};
use flotilla_core::escape::visible;

pub fn status(args: StatusArgs) -> anyhow::Result<Outcome> {
    if !args.controller.is_empty() {
        return controller_status(&args.controller, args.request_timeout, args.output);
    }
    let source = SourceArgs {
        repo: args.repo.clone().expect("clap requires it"),
        rev: args.rev.clone(),
        cluster_state: None,
        scope: None,
        // Reading status changes nothing: every revision is admitted.
        allow_no_execute_taint_policy: true,
    };
    let plan = plan(&source)?;
    let kubeconfig = clusters::connect::read(args.kubeconfig.as_deref().expect("clap requires it"))?;
    let timeout = args.request_timeout;
    let names: Vec<String> = plan.loaded.clusters.iter().map(|c| c.name.clone()).collect();
    let trust = clusters::connect::Trust::default();
    let plan_ref = &plan;
    let results = runtime()?.block_on(clusters::each(&kubeconfig, &names, trust, timeout, |client, name| async move {
        clusters::status::observe_cluster(&client, plan_ref, name).await
    }));
    let mut outcome = report(&plan);
    let mut observed = Vec::new();
    let mut errors = std::collections::BTreeMap::new();
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(o) => observed.push((name, o)),
            Err(e) => {
                eprintln!("error: {name}: {}", flotilla_core::escape::visible(&e));
                errors.insert(name, e);
                outcome = Outcome::Problems;
            }
        }
    }
    let objects = clusters::status::objects(&plan, &observed);
    if !objects.iter().all(|o| o.healthy) {
        outcome = Outcome::Problems;
    }
    match args.output {
        None | Some(ListFormat::Wide) => print!("{}", clusters::status::table(&objects, args.output.is_some())),
        Some(format) => {
            let report = serde_json::json!({ "revision": plan.revision, "objects": objects, "errors": errors });
            print!("{}", structured(&report, format)?);
        }
    }
    Ok(outcome)
}

/// `value` as `-o json` (indented, one trailing newline) or `-o yaml` print it.
pub(crate) fn structured(value: &impl serde::Serialize, format: ListFormat) -> anyhow::Result<String> {
    let value = serde_json::to_value(value)?;
    Ok(match format {
        ListFormat::Yaml => flotilla_core::yaml::to_string(&value).context("cannot write YAML")?,
        _ => serde_json::to_string_pretty(&value)? + "\n",
    })
}

/// Prints what running controllers report at `/status` (one, or every replica of a
/// sharded one), read through the same types that write it; exit 1 unless the newest
/// revision is applied everywhere (and, sharded, every member is owned exactly once).
fn controller_status(urls: &[String], timeout: Duration, output: Option<ListFormat>) -> anyhow::Result<Outcome> {
    let statuses: Vec<(String, Status)> =
        urls.iter().map(|url| fetch(url, timeout).map(|s| (url.clone(), s))).collect::<anyhow::Result<_>>()?;
    let owners = shard_owners(&statuses);
    match (output, statuses.as_slice()) {
        (None | Some(ListFormat::Wide), [(_, status)]) => print!("{}", show(status)),
        (None | Some(ListFormat::Wide), _) => {
            for (url, status) in &statuses {
                println!("== {}", flotilla_core::escape::visible(url));
                print!("{}", show(status));
            }
        }
        (Some(format), [(_, status)]) => print!("{}", structured(status, format)?),
        (Some(format), _) => {
            let by_url: std::collections::BTreeMap<&String, &Status> = statuses.iter().map(|(u, s)| (u, s)).collect();
            print!("{}", structured(&by_url, format)?);
        }
    }
    let shared_badly: Vec<&String> = owners.iter().filter(|(_, by)| by.len() != 1).map(|(m, _)| m).collect();
    if statuses.len() > 1 && output.is_none() {
        for (member, by) in &owners {
            if by.len() > 1 {
                println!("warning: {} is owned by {} replicas: {}", visible(member), by.len(), by.join(", "));
            }
        }
    }
    let healthy = statuses.iter().all(|(_, s)| s.healthy()) && shared_badly.is_empty();
    Ok(if healthy { Outcome::Clean } else { Outcome::Problems })
}

/// Per member a sharded controller's replicas name, the replicas that own it.
fn shard_owners(statuses: &[(String, Status)]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut owners: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for shard in statuses.iter().filter_map(|(_, s)| s.shard.as_ref()) {
        for member in &shard.clusters {
            owners.entry(member.clone()).or_default().push(shard.replica.clone());
        }
    }
    owners
}

/// A running controller's `/status` (`url`: its --listen address, as `http://ADDR`).
pub(crate) fn fetch(url: &str, timeout: Duration) -> anyhow::Result<Status> {
    let uri: http::Uri = format!("{}/status", url.trim_end_matches('/')).parse().context("invalid --controller URL")?;
    let body = runtime()?.block_on(async {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Empty<axum::body::Bytes>>();
        let get = tokio::time::timeout(timeout, client.get(uri.clone()));
        let response =
            get.await.context("the controller did not answer in time")?.context("cannot reach the controller")?;
        anyhow::ensure!(response.status().is_success(), "the controller answered {}", response.status());
        let bytes =
            http_body_util::BodyExt::collect(response.into_body()).await.context("reading the answer")?.to_bytes();
        anyhow::Ok(bytes)
    })?;
    serde_json::from_slice(&body).context("the controller's /status is not what it should be")
}

/// The controller's status as text.
fn show(status: &Status) -> String {
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut out = format!(
        "head      {}\napplied   {}\nerror     {}\n",
        text(&status.head),
        text(&status.applied),
        text(&status.error)
    );
    if let Some(why) = &status.source_unavailable {
        out += &format!("source    unavailable: {why}\n");
    }
    if !status.leading {
        out += "leading   no (standing by)\n";
    }
    if let Some(shard) = &status.shard {
        let role = if shard.leads_fleet { ", leads the fleet" } else { "" };
        let joining = if shard.joining { " (joining)" } else { "" };
        out += &format!(
            "shard     {}{role}{joining}: owns {} of {} live replicas' members: {}\n",
            visible(&shard.replica),
            shard.clusters.len(),
            shard.replicas.len(),
            visible(&shard.clusters.join(", "))
        );
    }
    for (cluster, line) in &status.clusters {
        out += &format!("{cluster:<12}{}\n", flotilla_core::escape::visible(line));
        if let Some(member) = status.members.get(cluster) {
            out += &show_member(member);
        }
        if let Some(h) = status.health.get(cluster).filter(|h| h.ready != "True" || !h.taints.is_empty()) {
            let taints = if h.taints.is_empty() { String::new() } else { format!("; taints {}", h.taints.join(", ")) };
            out += &format!("{:<12}Ready {} since {}: {}{taints}\n", "", h.ready, h.since, h.reason);
        }
        if let Some(why) = status.prune_refused.get(cluster) {
            out += &format!("{:<12}prune refused: {why}\n", "");
        }
        for kept in status.kept.get(cluster).into_iter().flatten() {
            out += &format!("{:<12}kept {kept}\n", "");
        }
    }
    for (name, autoscaler) in &status.autoscalers {
        out += &show_autoscaler(name, autoscaler);
    }
    for (name, service) in &status.services {
        out += &show_service(name, service);
    }
    out + &show_failover(status.failover.as_ref())
}

/// One member's worker: `state, target R applied R` and, when failing or not
/// contacted, since when and why.
fn show_member(m: &crate::status::MemberStatus) -> String {
    let short = |r: &Option<String>| r.as_deref().map_or("-".to_owned(), |r| r.chars().take(12).collect());
    let mut line = format!("{:<12}{}, target {} applied {}", "", m.state, short(&m.target), short(&m.applied));
    if let Some(since) = &m.since {
        line += &format!(" since {since}");
    }
    if m.failures > 0 {
        line += &format!(" ({} failed attempts)", m.failures);
    }
    if let Some(reason) = &m.reason {
        line += &format!(": {}", flotilla_core::escape::visible(reason));
    }
    line + "\n"
}

/// Evictions that hold, then moves: `moved OBJECT from CLUSTER at T (why): before → after`.
fn show_failover(failover: Option<&crate::status::FailoverStatus>) -> String {
    let Some(f) = failover else { return String::new() };
    let mut out = String::new();
    for eviction in &f.evictions {
        out += &format!("evicted {eviction}\n");
    }
    let split = |m: &std::collections::BTreeMap<String, i64>| {
        m.iter().map(|(c, r)| format!("{c}={r}")).collect::<Vec<_>>().join(" ")
    };
    for m in &f.moves {
        let after = m.after.as_ref().map_or_else(|| "(not rendered yet)".to_owned(), split);
        out += &format!(
            "moved {} from {} at {} ({}, {}): {} → {after}\n",
            m.object,
            m.from,
            m.at,
            m.reason,
            m.purge,
            split(&m.before)
        );
    }
    out
}

/// `service ns/name → target`, then a line per provider and consumer.
fn show_service(id: &str, s: &crate::status::ServiceStatus) -> String {
    let mut out = format!(
        "service {id} → {}
",
        s.target
    );
    for (cluster, p) in &s.providers {
        out += &format!(
            "    provider {cluster}: {}, {} ready endpoints
",
            p.state, p.endpoints
        );
    }
    for (cluster, c) in &s.consumers {
        let synced = if c.synced { "in sync" } else { "catching up" };
        out += &format!(
            "    consumer {cluster}: {} slices, {} ready endpoints, {synced}
",
            c.slices, c.endpoints
        );
    }
    if let Some(conflict) = &s.conflict {
        out += &format!(
            "    Conflict: {conflict}
"
        );
    }
    out
}

fn show_autoscaler(id: &str, a: &AutoscalerStatus) -> String {
    // The id is the autoscaler's key, spelled; people read `Kind namespace/name`.
    let name = match id.parse::<flotilla_core::model::ObjectKey>() {
        Ok(key) => format!("{} {}/{}", key.kind, key.namespace.unwrap_or_default(), key.name),
        Err(_) => id.to_owned(),
    };
    let number = |v: Option<i64>| v.map_or("-".to_owned(), |n| n.to_string());
    let mut out = format!(
        "{name}  target {}  replicas {} → {}  last scale {}\n",
        a.target,
        number(a.current_replicas),
        number(a.desired_replicas),
        a.last_scale_time.as_deref().unwrap_or("-")
    );
    for m in &a.current_metrics {
        out += &match m.average_utilization {
            Some(u) => format!("    {} {u}% of request (recommends {})\n", m.name, m.recommends),
            None => format!("    {} {}m per pod (recommends {})\n", m.name, m.average_milli, m.recommends),
        };
    }
    for c in &a.conditions {
        out += &format!("    {} {} {}: {}\n", c.kind, c.status, c.reason, c.message);
    }
    if let Some(message) = &a.message {
        out += &format!("    {message}\n");
    }
    for (rule, r) in &a.rules {
        out += &format!("    rule {rule}: next {}\n", r.next_execution_time.as_deref().unwrap_or("-"));
        for run in r.successful.iter().chain(&r.failed) {
            out += &format!("      {run}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::MemberStatus;

    #[test]
    fn each_member_shows_its_target_applied_revision_and_state() {
        let mut status = Status::default();
        (status.head, status.applied) = (Some("b".repeat(40)), Some("a".repeat(40)));
        status
            .clusters
            .insert("member1".into(), format!("{}: 3 applied, 0 unchanged, 0 pruned, 0 failed", "b".repeat(40)));
        status.clusters.insert("member2".into(), format!("{}: failed: timed out\u{1b}[2K", "a".repeat(40)));
        let current = MemberStatus {
            target: Some("b".repeat(40)),
            applied: Some("b".repeat(40)),
            state: "current".into(),
            ..Default::default()
        };
        let failing = MemberStatus {
            target: Some("b".repeat(40)),
            applied: Some("a".repeat(40)),
            state: "failing".into(),
            since: Some("2026-12-04T17:00:00Z".into()),
            reason: Some("timed out after 10s".into()),
            failures: 4,
            ..Default::default()
        };
        status.members.insert("member1".into(), current);
        status.members.insert("member2".into(), failing);
        let text = show(&status);
        assert!(text.contains(&format!("current, target {0} applied {0}\n", "b".repeat(12))), "{text}");
        let want = format!(
            "failing, target {} applied {} since 2026-12-04T17:00:00Z (4 failed attempts): timed out after 10s\n",
            "b".repeat(12),
            "a".repeat(12)
        );
        assert!(text.contains(&want), "{text}");
        assert!(!text.contains('\u{1b}'), "a member's text reaches the terminal written out: {text:?}");
    }
}
