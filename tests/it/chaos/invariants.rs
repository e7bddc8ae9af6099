//! The soak's invariants, read from the members, their audit logs and the served
//! repository, never from flotilla's own report.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

use super::model::{LABEL, MEMBERS, Model, NS};
use super::world::{HOST, RENEW_DEADLINE};
use crate::members::Members;

/// How late a write may reach a member after its sender's renew deadline: the time a
/// request takes on the wire, on a loaded two-core machine. Another replica can lead
/// only `LEASE - RENEW_DEADLINE` (1.33 s) after the deadline.
pub const IN_FLIGHT: Duration = Duration::from_millis(500);

/// Whether every member holds exactly the model's ConfigMaps; else what differs.
pub async fn converged(members: &Members, model: &Model) -> Result<(), String> {
    converged_but(members, model, None).await
}

/// Whether every member but `but` holds exactly the model's ConfigMaps.
pub async fn converged_but(members: &Members, model: &Model, but: Option<usize>) -> Result<(), String> {
    for (i, member) in MEMBERS.iter().enumerate().filter(|(i, _)| Some(*i) != but) {
        let held = held(members, member).await?;
        let expected = model.expected(i);
        if held != expected {
            return Err(format!("{member} holds {held:?}, expected {expected:?}"));
        }
    }
    Ok(())
}

async fn held(members: &Members, member: &str) -> Result<BTreeMap<String, String>, String> {
    let api: Api<ConfigMap> = Api::namespaced(members.client(member).await, NS);
    let listed = tokio::time::timeout(Duration::from_secs(3), api.list(&ListParams::default().labels(LABEL))).await;
    let list = listed.map_err(|_| format!("{member} did not answer"))?.map_err(|e| format!("{member}: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .map(|c| {
            let value = c.data.and_then(|d| d.get("value").cloned()).unwrap_or_default();
            (c.metadata.name.unwrap_or_default(), value)
        })
        .collect())
}

/// The audit events of every member and of the host, by cluster.
pub type Audits = BTreeMap<String, Vec<serde_json::Value>>;

pub fn audits(members: &Members) -> Audits {
    MEMBERS.iter().chain([&HOST]).map(|c| (c.to_string(), members.audit(c))).collect()
}

fn at(event: &serde_json::Value) -> SystemTime {
    let text = event["requestReceivedTimestamp"].as_str().expect("audit events carry their time");
    SystemTime::from(text.parse::<k8s_openapi::jiff::Timestamp>().expect("RFC 3339"))
}

fn succeeded(event: &serde_json::Value) -> bool {
    event["responseStatus"]["code"].as_u64().is_some_and(|c| (200..300).contains(&c))
}

fn sent_by(event: &serde_json::Value, pid: u32) -> bool {
    event["userAgent"].as_str().is_some_and(|ua| ua.starts_with("flotilla/") && ua.ends_with(&format!("-{pid})")))
}

fn is_flotilla(event: &serde_json::Value) -> bool {
    event["userAgent"].as_str().is_some_and(|ua| ua.starts_with("flotilla/"))
}

fn when(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t).map(|t| t.to_string()).unwrap_or_default()
}

/// Deletions by flotilla in the soak's namespace that Git never asked for: a
/// ConfigMap deleted from a member while every revision pushed until then placed it
/// there, or any other kind the repository never removes (its Service, export and
/// import, the namespace). EndpointSlices are the endpoints loop's own and are
/// withdrawn by design; the web Deployment leaves a member whenever Git's count (the
/// autoscaler's, or an older one a rewind brings back) divides to 0 there, so its
/// deletions are not judged here (the settle checks it runs 2/2).
/// Returns the violations and how many deletions were checked.
pub fn unasked_deletions(audits: &Audits, history: &[(SystemTime, Model)]) -> (Vec<String>, usize) {
    let (mut violations, mut checked) = (vec![], 0);
    for (i, member) in MEMBERS.iter().enumerate() {
        for event in &audits[*member] {
            let r = &event["objectRef"];
            let ours = r["namespace"] == NS || (r["resource"] == "namespaces" && r["name"] == NS);
            if event["verb"] != "delete" || !is_flotilla(event) || !succeeded(event) || !ours {
                continue;
            }
            checked += 1;
            let (resource, name, t) =
                (r["resource"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or(""), at(event));
            let divided = resource == "deployments" && name == "web";
            let asked =
                resource == "endpointslices" || divided || resource == "configmaps" && removed(history, t, name, i);
            if !asked {
                violations.push(format!(
                    "{member}: {resource} {NS}/{name} deleted at {} by {} although no revision pushed before removed it there",
                    when(t),
                    event["userAgent"]
                ));
            }
        }
    }
    (violations, checked)
}

/// Whether a revision pushed before `t` removed `name` from member `i`: one that lacks
/// it after one that placed it there.
fn removed(history: &[(SystemTime, Model)], t: SystemTime, name: &str, i: usize) -> bool {
    let mut placed = false;
    for (_, model) in history.iter().take_while(|(pushed, _)| *pushed <= t) {
        let here = model.items.get(name).is_some_and(|item| item.members.contains(&i));
        if here {
            placed = true;
        } else if placed {
            return true;
        }
    }
    false
}

/// Writes by a replica that reached a cluster after its renew deadline (plus
/// [`IN_FLIGHT`]), counted from its last successful Lease write recorded by the host.
/// Returns the violations, the latest write measured against that deadline, and how
/// many writes were checked.
pub fn late_writes(audits: &Audits, replicas: &[(u32, String)]) -> (Vec<String>, Duration, usize) {
    let host = &audits[HOST];
    let (mut violations, mut latest, mut checked) = (vec![], Duration::ZERO, 0);
    for (pid, name) in replicas {
        let renewals: Vec<SystemTime> = host
            .iter()
            .filter(|e| e["objectRef"]["resource"] == "leases" && sent_by(e, *pid) && succeeded(e))
            .map(at)
            .collect();
        for cluster in MEMBERS.iter().chain([&HOST]) {
            for event in &audits[*cluster] {
                if !sent_by(event, *pid) || event["objectRef"]["resource"] == "leases" {
                    continue;
                }
                checked += 1;
                let t = at(event);
                let renewed = renewals.iter().rev().find(|r| **r <= t);
                let since = renewed.map(|r| t.duration_since(*r).unwrap_or_default());
                latest = latest.max(since.unwrap_or(Duration::MAX).min(Duration::from_secs(3600)));
                if since.is_none_or(|s| s > RENEW_DEADLINE + IN_FLIGHT) {
                    violations.push(format!(
                        "{cluster}: {} {} {}/{} at {} by {name} (pid {pid}), {} after its last renewal",
                        event["verb"],
                        event["objectRef"]["resource"],
                        event["objectRef"]["namespace"].as_str().unwrap_or(""),
                        event["objectRef"]["name"].as_str().unwrap_or(""),
                        when(t),
                        since.map_or("never".to_owned(), |s| format!("{s:?}"))
                    ));
                }
            }
        }
    }
    (violations, latest, checked)
}

/// `spec.replicas` of the web Deployment at `commit` of the served repository.
pub fn replicas_at(served: &Path, commit: &str) -> Option<i64> {
    let out = Command::new("git").args(["show", &format!("{commit}:web.yaml")]).current_dir(served).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().find_map(|l| l.strip_prefix("  replicas: ")).and_then(|v| v.split('#').next()?.trim().parse().ok())
}

/// The autoscaler's commits on the branch: each must change the count it says it
/// changes, from the count its parent held (a commit made twice, or on a stale
/// view, does not). Returns the violations and how many commits there were.
pub fn autoscaler_commits(served: &Path) -> (Vec<String>, usize) {
    let out = Command::new("git").args(["log", "--format=%H %P|%an|%s", "main"]).current_dir(served).output().unwrap();
    let log = String::from_utf8(out.stdout).unwrap();
    let mut violations = vec![];
    let mut count = 0;
    for line in log.lines() {
        let mut parts = line.splitn(3, '|');
        let (ids, author, subject) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap_or(""));
        if author != "flotilla-autoscaler" {
            continue;
        }
        count += 1;
        let mut ids = ids.split(' ');
        let (commit, parent) = (ids.next().unwrap(), ids.next().unwrap_or(""));
        let said = subject.split("replicas ").nth(1).and_then(|rest| {
            let (from, to) = rest.split_once(" → ")?;
            Some((from.trim().parse::<i64>().ok()?, to.split_whitespace().next()?.parse::<i64>().ok()?))
        });
        let held = (replicas_at(served, parent), replicas_at(served, commit));
        match (said, held) {
            (Some((from, to)), (Some(before), Some(after))) if from == before && to == after && from != to => {}
            _ => violations.push(format!(
                "autoscaler commit {commit} says {subject:?}, but the count went {:?} → {:?}",
                held.0, held.1
            )),
        }
    }
    (violations, count)
}

/// Resident memory of a process, in bytes.
pub fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches(" kB").trim();
    kb.parse::<u64>().ok().map(|kb| kb * 1024)
}
