//! The waves a plan moves in: for each RolloutPolicy of the later render that governs
//! an object the plan adds, changes or removes, the batches its clusters move in, with
//! the soak, gates, windows and what a failure does (docs/rollouts.md). A change of
//! nothing but `spec.replicas` goes everywhere at once and shows no waves, unless the
//! policy says `replicaOnlyChanges: Waves`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use super::{ClusterDiff, Entry};
use crate::model::rollout::{OnFailure, ReplicaOnlyChanges, WindowKind};
use crate::model::{ObjectKey, Plan};
use crate::rollout::{Batch, batches, governed};

/// One policy's waves for this plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPlan {
    /// `RolloutPolicy ns/name` or `ClusterRolloutPolicy name`.
    pub policy: String,
    /// The clusters whose governed objects change, in the order they move.
    pub batches: Vec<Batch>,
    /// The soak per batch, as written (`20s`).
    pub min_success_time: String,
    /// The gates' names.
    pub gates: Vec<String>,
    /// The windows, each as `deny 0 22 * * * for 8h (Europe/Berlin)`.
    pub windows: Vec<String>,
    /// `Pause` or `Revert`.
    pub on_failure: String,
}

/// The waves of `to`'s RolloutPolicies over `clusters`' changes, in policy order.
pub fn plans(from: &Plan, to: &Plan, clusters: &BTreeMap<String, ClusterDiff>) -> Vec<RolloutPlan> {
    let policies = &to.loaded.rollout_policies;
    if policies.is_empty() {
        return Vec::new();
    }
    // Which later policy governs a key: by the later render's templates, or for a
    // removed object, by the earlier render's, matched to the later policy of that name.
    let (later, earlier) = (governed(&to.loaded), governed(&from.loaded));
    let policy_of = |key: &ObjectKey| -> Option<usize> {
        if let Ok(i) = to.loaded.templates.binary_search_by(|t| t.key.cmp(key)) {
            return later[i];
        }
        let i = from.loaded.templates.binary_search_by(|t| t.key.cmp(key)).ok()?;
        let old = &from.loaded.rollout_policies[earlier[i]?];
        policies.iter().position(|p| p.namespace == old.namespace && p.name == old.name)
    };
    let mut moving: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for (cluster, diff) in clusters {
        let entries = diff.added.iter().chain(diff.changed.iter().map(|c| &c.object)).chain(&diff.removed);
        for policy in entries.filter_map(|e| policy_of(&key(e))) {
            moving.entry(policy).or_default().insert(cluster.clone());
        }
    }
    moving
        .into_iter()
        .filter(|(i, _)| {
            policies[*i].spec.replica_only_changes == ReplicaOnlyChanges::Waves || !replicas_only(from, to, *i)
        })
        .map(|(i, moving)| {
            let (policy, spec) = (&policies[i], &policies[i].spec);
            let name = match &policy.namespace {
                Some(ns) => format!("RolloutPolicy {ns}/{}", policy.name),
                None => format!("ClusterRolloutPolicy {}", policy.name),
            };
            let windows = spec
                .windows
                .iter()
                .map(|w| {
                    let kind = if w.kind == WindowKind::Deny { "deny" } else { "allow" };
                    let zone = w.time_zone.as_deref().unwrap_or("UTC");
                    format!("{kind} {} for {} ({zone})", w.schedule, spelled(w.duration))
                })
                .collect();
            RolloutPlan {
                policy: name,
                batches: batches(spec, &to.loaded.clusters, &moving),
                min_success_time: spelled(spec.min_success_time),
                gates: spec.gates.iter().map(|g| g.name.clone()).collect(),
                windows,
                on_failure: if spec.on_failure == OnFailure::Revert { "Revert" } else { "Pause" }.into(),
            }
        })
        .collect()
}

/// Whether the templates `policy` (of `to`) governs differ between the renders only in
/// `spec.replicas`, as an autoscaler's write-back does: such a change goes everywhere at
/// once unless the policy says `replicaOnlyChanges: Waves`.
fn replicas_only(from: &Plan, to: &Plan, policy: usize) -> bool {
    let target = &to.loaded.rollout_policies[policy];
    let mine = |plan: &Plan| -> BTreeMap<ObjectKey, serde_json::Value> {
        let governed = governed(&plan.loaded);
        plan.loaded
            .templates
            .iter()
            .zip(governed)
            .filter(|(_, p)| {
                p.is_some_and(|p| {
                    let p = &plan.loaded.rollout_policies[p];
                    p.namespace == target.namespace && p.name == target.name
                })
            })
            .map(|(t, _)| {
                let mut object = t.object();
                if let Some(spec) = object.get_mut("spec").and_then(serde_json::Value::as_object_mut) {
                    spec.remove("replicas");
                }
                (t.key.clone(), object)
            })
            .collect()
    };
    mine(from) == mine(to)
}

fn key(e: &Entry) -> ObjectKey {
    ObjectKey {
        api_version: e.api_version.clone(),
        kind: e.kind.clone(),
        namespace: (!e.namespace.is_empty()).then(|| e.namespace.clone()),
        name: e.name.clone(),
    }
}

/// A duration as Kubernetes writes it: `20s`, `5m`, `1h30m`, `1.5s`.
pub fn spelled(d: Duration) -> String {
    let (secs, millis) = (d.as_secs(), d.subsec_millis());
    if millis != 0 {
        return format!("{}s", d.as_secs_f64());
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if s > 0 || out.is_empty() {
        out += &format!("{s}s");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_spelled_as_kubernetes_writes_them() {
        let s = Duration::from_secs;
        assert_eq!(spelled(s(0)), "0s");
        assert_eq!(spelled(s(20)), "20s");
        assert_eq!(spelled(s(300)), "5m");
        assert_eq!(spelled(s(5400)), "1h30m");
        assert_eq!(spelled(s(3601)), "1h1s");
        assert_eq!(spelled(Duration::from_millis(1500)), "1.5s");
    }
}
