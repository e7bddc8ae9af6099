//! What a member's worker reports: each attempt's outcome (the cluster's line in
//! `/status`, its applied revision, what was kept or not pruned, the counters), and where
//! the member stands after every event (`/status` `members`, the member metrics).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use tracing::{error, info};

use super::step::{Phase, State};
use super::{Fleet, Target};
use crate::clusters;
use crate::metrics::{ClusterLabel, ErrorReason, MemberRevisionLabels, RevisionLabels};
use crate::status::MemberStatus;

/// Records one attempt's outcome.
pub(super) fn attempted(fleet: &Fleet, cluster: &str, target: &Target, outcome: clusters::Outcome, took: Duration) {
    let (metrics, mut head) = (&fleet.metrics, target.goal.revision.to_string());
    for hold in &target.holds {
        head += &format!(" ({} held at {})", hold.policy, hold.revision);
    }
    let label = ClusterLabel { cluster: cluster.to_owned() };
    metrics.reconcile_seconds.get_or_create(&label).observe(took.as_secs_f64());
    let line = match outcome {
        Ok(report) => {
            count_applied(fleet, cluster, &head, &report);
            if report.failed.is_empty() {
                fleet.board.update(|s| s.members.entry(cluster.to_owned()).or_default().last_success = Some(now()));
                metrics.member_last_success.get_or_create(&label).set(unix_now());
            }
            format!("{head}: {}", report.summary())
        }
        Err(e) => {
            metrics.error(cluster, ErrorReason::Reconcile);
            error!(cluster, error = %e, "cluster not reconciled");
            format!("{head}: failed: {e}")
        }
    };
    info!(cluster, "{line}");
    fleet.board.update(|s| s.clusters.insert(cluster.to_owned(), line));
}

/// Counts what one cluster's reconcile wrote and moves its revision gauge.
fn count_applied(fleet: &Fleet, cluster: &str, head: &str, report: &clusters::apply::Report) {
    let metrics = &fleet.metrics;
    let label = ClusterLabel { cluster: cluster.to_owned() };
    metrics.applied.get_or_create(&label).inc_by(report.applied.len() as u64);
    metrics.pruned.get_or_create(&label).inc_by(report.pruned.len() as u64);
    metrics.kept.get_or_create(&label).inc_by(report.kept.len() as u64);
    metrics.prune_refused.get_or_create(&label).set(i64::from(report.prune_refused.is_some()));
    fleet.board.update(|s| {
        match &report.prune_refused {
            Some(why) => s.prune_refused.insert(cluster.to_owned(), why.clone()),
            None => s.prune_refused.remove(cluster),
        };
        let failed: BTreeMap<String, String> =
            report.failed.iter().map(|(k, why)| (k.spelled(), why.clone())).collect();
        match failed.is_empty() {
            true => s.failed.remove(cluster),
            false => s.failed.insert(cluster.to_owned(), failed),
        };
        let kept: Vec<String> = report.kept.iter().map(|(k, why)| format!("{}: {why}", k.spelled())).collect();
        match kept.is_empty() {
            true => s.kept.remove(cluster),
            false => s.kept.insert(cluster.to_owned(), kept),
        };
    });
    for _ in &report.failed {
        metrics.error(cluster, ErrorReason::Object);
    }
    let old = fleet.board.update(|s| s.revisions.insert(cluster.to_owned(), head.to_owned()));
    if let Some(old) = old.filter(|old| old != head) {
        metrics.applied_revision.remove(&RevisionLabels { cluster: cluster.to_owned(), revision: old });
    }
    let labels = RevisionLabels { cluster: cluster.to_owned(), revision: head.to_owned() };
    metrics.applied_revision.get_or_create(&labels).set(1);
}

/// Shows where the member stands: its `/status` entry (and with it the fleet's
/// `applied` and `ready`), and its target and applied revisions as metrics.
pub(super) fn state(fleet: &Fleet, cluster: &str, state: &State) {
    let (target, applied) =
        (state.target().map(|g| g.revision.to_string()), state.applied().map(|g| g.revision.to_string()));
    let (shown, since, reason) = match state.phase() {
        Phase::Idle => ("idle", None, None),
        Phase::Current => ("current", None, None),
        Phase::Converging => ("converging", None, None),
        Phase::Incomplete { since, reason } => ("incomplete", Some(wall(since)), Some(reason)),
        Phase::Failing { since, reason } => ("failing", Some(wall(since)), Some(reason)),
        Phase::NotContacted => ("not contacted", None, Some("the member is not Ready".to_owned())),
        Phase::StandingBy => ("standing by", None, Some("another instance leads".to_owned())),
    };
    let before = fleet.board.update(|s| {
        let entry = s.members.entry(cluster.to_owned()).or_default();
        let before = (entry.target.clone(), entry.applied.clone());
        let last_success = entry.last_success.take();
        *entry = MemberStatus {
            target: target.clone(),
            applied: applied.clone(),
            state: shown.to_owned(),
            since,
            reason,
            failures: state.failures(),
            last_success,
        };
        s.settle();
        if let Some(applied) = applied.as_ref().filter(|a| before.1.as_ref() != Some(a)) {
            s.record_applied(cluster, applied, &now());
        }
        before
    });
    if before != (target.clone(), applied.clone()) {
        gauge(fleet, cluster, "target", before.0, target);
        gauge(fleet, cluster, "applied", before.1, applied);
    }
}

/// `flotilla_member_revision{cluster, revision, state}`: 1 for the member's target and
/// applied revisions.
fn gauge(fleet: &Fleet, cluster: &str, state: &str, old: Option<String>, new: Option<String>) {
    let labels =
        |revision: String| MemberRevisionLabels { cluster: cluster.to_owned(), revision, state: state.to_owned() };
    if let Some(old) = old.filter(|old| Some(old) != new.as_ref()) {
        fleet.metrics.member_revision.remove(&labels(old));
    }
    if let Some(new) = new {
        fleet.metrics.member_revision.get_or_create(&labels(new)).set(1);
    }
}

/// An instant as wall-clock time (RFC 3339).
fn wall(at: Instant) -> String {
    let ago = Instant::now().saturating_duration_since(at);
    crate::status::rfc3339(SystemTime::now() - ago)
}

fn now() -> String {
    crate::status::rfc3339(SystemTime::now())
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
