//! What the controller reports at `/status`, written by its loops and read back by
//! `flotilla status --controller` through these same types.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

mod history;
mod rollouts;
pub use history::{AppliedStatus, PreviewStatus};
pub use rollouts::{FinishedStatus, GateStatus, RolloutStatus, WaveStatus};

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
    /// Per member this instance applies: its target and applied revisions and where it
    /// stands (each member converges on its own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub members: BTreeMap<String, MemberStatus>,
    /// The revision last published to the members, and to which (not shown: `members`
    /// and `applied` say it).
    #[serde(skip)]
    pub published: Option<(String, Vec<String>)>,
    /// Leading, the branch reachable, and a revision published since leading began (the
    /// fleet's half of `ready`; the members' half is that one of them is current).
    #[serde(skip)]
    pub fleet_ready: bool,
    /// Since the fleet's half last became true, every member had an outcome with one
    /// of them current (kept until the fleet's half drops, so deploys do not flap it).
    #[serde(skip)]
    members_settled: bool,
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
    /// Per RolloutPolicy (`RolloutPolicy ns/name`): its rollout.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rollouts: BTreeMap<String, RolloutStatus>,
    /// Per member: the objects its last attempt could not apply (`KEY` spelled out), and
    /// why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, BTreeMap<String, String>>,
    /// With `--sharding`: this replica's share of the members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardStatus>,
    /// The revisions the members applied, newest first (the last [`history::KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AppliedStatus>,
    /// Per pull request (its number): its plan and preview.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previews: BTreeMap<u64, PreviewStatus>,
}

/// One replica's share of the members (`--sharding`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    /// This replica (its membership Lease's holder).
    pub replica: String,
    /// The live replicas as this one sees them, itself included.
    pub replicas: Vec<String>,
    /// The members it owns (and applies).
    pub clusters: Vec<String>,
    /// Still joining: it owns nothing until its membership is a renew deadline old.
    #[serde(default)]
    pub joining: bool,
    /// Whether this replica holds the fleet's Lease (the fleet-wide loops run there).
    #[serde(default)]
    pub leads_fleet: bool,
}

/// Where one member stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// The revision it is to run.
    pub target: Option<String>,
    /// The revision last applied to it completely.
    pub applied: Option<String>,
    /// `current`, `incomplete` (applied, refused objects retried), `converging`,
    /// `failing`, `not contacted`, `standing by` or `idle`.
    pub state: String,
    /// Failing since when (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Why it is failing or not contacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Failed attempts at the target, in a row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// When an attempt last applied everything (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<String>,
}

impl Status {
    /// The reconcile loop published `revision` to `members`.
    pub fn expect(&mut self, revision: String, members: &[String]) {
        self.members.retain(|name, _| members.contains(name));
        self.published = Some((revision, members.to_vec()));
        self.settle();
    }

    /// Derives `applied` (the published revision, once every member it went to applied
    /// it) and `ready` from the members: the fleet's half, and once every member has an
    /// outcome (current, failed [`SETTLED_AFTER_FAILURES`] times in a row, or not
    /// contacted because the health loop holds it not Ready) with one of them current.
    /// A member stuck or down holds readiness for a few attempts at most; readiness then
    /// holds through later deploys.
    pub fn settle(&mut self) {
        let Some((revision, members)) = &self.published else {
            self.ready = false;
            return;
        };
        let current = |name: &String| {
            let applied = |m: &MemberStatus| m.applied.is_some() && m.applied == m.target;
            self.members.get(name).is_some_and(|m| applied(m) && m.applied.as_ref() == Some(revision))
        };
        let decided = |name: &String| {
            self.members.get(name).is_some_and(|m| match m.state.as_str() {
                "current" | "incomplete" | "not contacted" => true,
                "failing" => m.failures >= SETTLED_AFTER_FAILURES,
                _ => false,
            })
        };
        if members.iter().all(current) && self.applied.as_ref() != Some(revision) {
            self.applied = Some(revision.clone());
            self.error = None;
        }
        let settled = members.is_empty() || (members.iter().any(current) && members.iter().all(decided));
        self.members_settled = self.fleet_ready && (self.members_settled || settled);
        self.ready = self.members_settled;
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Failed attempts in a row after which a failing member no longer holds readiness: a
/// member starting up (its storage initializing, answering 429 for seconds) is given its
/// first retries, 1 + 2 + 4 + 8 s of backoff.
pub const SETTLED_AFTER_FAILURES: u32 = 5;

/// `at` in RFC 3339, as `/status` writes times.
pub fn rfc3339(at: std::time::SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(at).map(|t| t.to_string()).unwrap_or_default()
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

    #[test]
    fn applied_and_ready_follow_the_members() {
        let member = |target: &str, applied: Option<&str>, state: &str| MemberStatus {
            target: Some(target.into()),
            applied: applied.map(Into::into),
            state: state.into(),
            ..Default::default()
        };
        let names = ["m1".to_owned(), "m2".to_owned()];
        let mut s = Status { fleet_ready: true, ..Default::default() };
        s.expect("r1".into(), &names);
        assert!(!s.ready, "no member has an outcome yet");
        s.members.insert("m1".into(), member("r1", Some("r1"), "current"));
        s.members.insert("m2".into(), member("r1", None, "converging"));
        s.settle();
        assert!(!s.ready && s.applied.is_none(), "m2 has no outcome yet: {s:?}");
        s.members.insert("m2".into(), MemberStatus { failures: 1, ..member("r1", None, "failing") });
        s.settle();
        assert!(!s.ready, "a first failure is retried before it counts");
        s.members.insert("m2".into(), MemberStatus { failures: 4, ..member("r1", None, "failing") });
        s.settle();
        assert!(!s.ready, "a member starting up gets its first retries");
        s.members.insert("m2".into(), MemberStatus { failures: 5, ..member("r1", None, "failing") });
        s.settle();
        assert!(s.ready, "a member failing again and again does not hold readiness");
        assert_eq!(s.applied, None, "not applied everywhere");
        s.members.insert("m2".into(), member("r1", Some("r1"), "current"));
        s.error = Some("r0: old".into());
        s.settle();
        assert_eq!((s.applied.as_deref(), s.error.as_deref()), (Some("r1"), None));
        // A new revision: readiness holds through the deploy; applied waits for both.
        s.expect("r2".into(), &names);
        s.members.insert("m1".into(), member("r2", Some("r1"), "converging"));
        s.settle();
        assert!(s.ready && s.applied.as_deref() == Some("r1"));
        s.fleet_ready = false;
        s.settle();
        assert!(!s.ready, "the fleet's half drops it");
        // A revision applied with refused objects in every member: applied, and ready.
        let mut t = Status { fleet_ready: true, ..Default::default() };
        t.expect("r1".into(), &names);
        for name in &names {
            t.members.insert(name.clone(), member("r1", Some("r1"), "incomplete"));
        }
        t.settle();
        assert!(t.ready && t.applied.as_deref() == Some("r1"), "refused objects hold neither: {t:?}");
    }
}
