//! `flotilla status`: health of everything the repo places, per cluster; or, with
//! `--controller`, what a running controller reports.

use std::time::Duration;

use anyhow::Context;

use super::{Outcome, plan, report, runtime};
use crate::cli::{SourceArgs, StatusArgs};
use crate::clusters;
use crate::status::{AutoscalerStatus, Status};

pub fn status(args: StatusArgs) -> anyhow::Result<Outcome> {
    if let Some(url) = &args.controller {
        return controller_status(url, args.request_timeout);
    }
    let source = SourceArgs {
        repo: args.repo.clone().expect("clap requires it"),
        rev: args.rev.clone(),
        cluster_state: None,
        scope: None,
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
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(o) => observed.push((name, o)),
            Err(e) => {
                eprintln!("error: {name}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    let (table, healthy) = clusters::status::table(&observed);
    print!("{table}");
    if !healthy {
        outcome = Outcome::Problems;
    }
    Ok(outcome)
}

/// Prints what a running controller reports at `/status`, read through the same types
/// that write it; exit 1 unless the newest revision is applied everywhere.
fn controller_status(url: &str, timeout: Duration) -> anyhow::Result<Outcome> {
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
    let status: Status = serde_json::from_slice(&body).context("the controller's /status is not what it should be")?;
    print!("{}", show(&status));
    Ok(if status.healthy() { Outcome::Clean } else { Outcome::Problems })
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
    for (cluster, line) in &status.clusters {
        out += &format!("{cluster:<12}{line}\n");
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
