//! What the controller reports at `/status`, written by its loops and read back by
//! `flotilla status --controller` through these same types.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The controller's state as `/status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Whether this instance holds the lease (always, without leader election).
    #[serde(default)]
    pub leading: bool,
    /// Whether the controller is ready: leading, the branch reachable at the last fetch,
    /// and a cycle completed since it began to lead.
    #[serde(default)]
    pub ready: bool,
    /// Newest revision seen on the branch.
    pub head: Option<String>,
    /// Revision last applied to every cluster without a cluster-level failure.
    pub applied: Option<String>,
    /// Why the newest revision is not applied, if it is not.
    pub error: Option<String>,
    /// Why the branch could not be fetched, while it cannot ("source unavailable"); the
    /// last good revision is still reconciled on every resync meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_unavailable: Option<String>,
    /// Per cluster: the last outcome.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// Per cluster: the revision last applied there.
    #[serde(default)]
    pub revisions: BTreeMap<String, String>,
    /// Per cluster: why the last reconcile did not prune, while it does not.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prune_refused: BTreeMap<String, String>,
    /// Per cluster: objects that left Git and were left in place by the last reconcile
    /// (`apiVersion/kind/namespace/name: why`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kept: BTreeMap<String, Vec<String>>,
    /// Per autoscaler (`<kind> <namespace>/<name>`): what it decided.
    #[serde(default)]
    pub autoscalers: BTreeMap<String, AutoscalerStatus>,
    /// Per exported service (`<namespace>/<name>`): its providers and consumers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, ServiceStatus>,
    /// Per member: its Ready condition and taints, as the failover loop decides them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub health: BTreeMap<String, ClusterHealthStatus>,
    /// The evictions that hold and the latest moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverStatus>,
}

/// One member's health.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterHealthStatus {
    /// `True`, `False` or `Unknown`.
    pub ready: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// Why.
    pub reason: String,
    /// `key:effect` of each live taint.
    #[serde(default)]
    pub taints: Vec<String>,
}

/// What failover did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverStatus {
    /// One line per workload and member it was evicted from.
    #[serde(default)]
    pub evictions: Vec<String>,
    /// The latest moves, oldest first.
    #[serde(default)]
    pub moves: Vec<MoveStatus>,
}

/// One move: when, what, from, to, why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveStatus {
    /// When (RFC 3339).
    pub at: String,
    /// The workload.
    pub object: String,
    /// The member it left.
    pub from: String,
    /// Why.
    pub reason: String,
    /// What became of the old copy.
    pub purge: String,
    /// Replicas per member before.
    pub before: BTreeMap<String, i64>,
    /// Replicas per member after, once rendered.
    #[serde(default)]
    pub after: Option<BTreeMap<String, i64>>,
}

/// One exported service, as the endpoints loop keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceStatus {
    /// The Service consumers call.
    pub target: String,
    /// Per provider: `ready`, `unreachable`, `listing` or `conflict`, and its ready endpoints.
    pub providers: BTreeMap<String, ProviderStatus>,
    /// Per consumer: what it should hold, and whether it does.
    pub consumers: BTreeMap<String, ConsumerStatus>,
    /// The `Conflict` condition's message, while exports disagree on ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// A provider of an exported service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderStatus {
    /// `ready`, `unreachable`, `listing` or `conflict`.
    pub state: String,
    /// Its ready endpoints.
    pub endpoints: usize,
}

/// A consumer of an exported service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerStatus {
    /// Slices it should hold.
    pub slices: usize,
    /// Ready endpoints in them.
    pub endpoints: usize,
    /// Whether it holds exactly those slices.
    pub synced: bool,
}

impl Status {
    /// Whether the newest revision is applied everywhere, nothing failed and no cluster
    /// refused to prune (as `apply` exits 1 then).
    pub fn healthy(&self) -> bool {
        self.head == self.applied
            && self.error.is_none()
            && self.source_unavailable.is_none()
            && self.prune_refused.is_empty()
            && !self.clusters.values().any(|line| line.contains(": failed"))
    }
}

/// One autoscaler's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerStatus {
    /// `FederatedHPA` or `CronFederatedHPA`.
    pub kind: String,
    /// The target.
    pub target: String,
    /// Replicas in Git (or the state ConfigMap).
    pub current_replicas: Option<i64>,
    /// What the last sync decided.
    pub desired_replicas: Option<i64>,
    /// Last time a decision was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<String>,
    /// Current metrics.
    #[serde(default)]
    pub current_metrics: Vec<flotilla_core::autoscale::MetricValue>,
    /// Conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Why nothing changed, or what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// CronFederatedHPA: per rule, executions (newest first) and the next run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, RuleStatus>,
}

/// A condition as the HPA status reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// `AbleToScale`, `ScalingActive` or `ScalingLimited`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `True` or `False`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Explanation.
    pub message: String,
}

impl From<&flotilla_core::autoscale::Condition> for Condition {
    fn from(c: &flotilla_core::autoscale::Condition) -> Self {
        Self { kind: c.kind.into(), status: c.status.into(), reason: c.reason.into(), message: c.message.clone() }
    }
}

/// A CronFederatedHPA rule's history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleStatus {
    /// Next scheduled run (RFC 3339); none while suspended.
    pub next_execution_time: Option<String>,
    /// Successful runs, newest first.
    #[serde(default)]
    pub successful: Vec<String>,
    /// Failed runs, newest first.
    #[serde(default)]
    pub failed: Vec<String>,
}

/// The status every loop writes its part of, and the HTTP server reads.
#[derive(Debug, Default)]
pub struct Board {
    status: Mutex<Status>,
}

impl Board {
    /// Changes the status (a short critical section: no I/O inside `change`).
    pub fn update<T>(&self, change: impl FnOnce(&mut Status) -> T) -> T {
        change(&mut self.status.lock().expect("status lock"))
    }

    /// A copy of the status.
    pub fn snapshot(&self) -> Status {
        self.status.lock().expect("status lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_reads_back_as_it_was_written() {
        let mut status = Status { leading: true, head: Some("abc".into()), ..Default::default() };
        status.clusters.insert("member1".into(), "abc: applied 2".into());
        status.autoscalers.insert(
            "autoscaling.karmada.io/v1alpha1/FederatedHPA/default/nginx".into(),
            AutoscalerStatus {
                kind: "FederatedHPA".into(),
                conditions: vec![Condition { kind: "AbleToScale".into(), status: "True".into(), ..Default::default() }],
                ..Default::default()
            },
        );
        let text = serde_json::to_string(&status).unwrap();
        assert_eq!(serde_json::from_str::<Status>(&text).unwrap(), status);
        assert!(!status.healthy(), "nothing applied yet");
    }
}
