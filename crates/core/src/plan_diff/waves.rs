//! The waves a plan moves in: for each RolloutPolicy of the later render whose governed
//! objects change, the batches its clusters move in, with the soak, gates, windows and
//! what a failure does (docs/rollouts.md). A change of nothing but `spec.replicas` goes
//! everywhere at once and shows no waves, unless the policy says
//! `replicaOnlyChanges: Waves`.

use std::time::Duration;

use serde::Serialize;

use crate::model::Plan;
use crate::model::rollout::{OnFailure, ReplicaOnlyChanges, WindowKind};
use crate::rollout::{Batch, Change, PolicyId, batches, change};

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

/// The waves of `to`'s RolloutPolicies for the change from `from`, in policy order:
/// for each policy whose governed objects change ([`crate::rollout::change`], as the
/// rollout loop decides), the batches of the clusters they change in. A change of
/// nothing but replica counts shows no waves unless the policy says
/// `replicaOnlyChanges: Waves`. Limited to `only` clusters when it is not empty.
pub fn plans(from: &Plan, to: &Plan, only: &[String]) -> Vec<RolloutPlan> {
    to.loaded
        .rollout_policies
        .iter()
        .filter_map(|policy| {
            let spec = &policy.spec;
            let moving = match change(from, to, &PolicyId::of(policy)) {
                Change::Same => return None,
                Change::ReplicasOnly(_) if spec.replica_only_changes == ReplicaOnlyChanges::Immediate => return None,
                Change::ReplicasOnly(clusters) | Change::Moves(clusters) => clusters,
            };
            let moving: std::collections::BTreeSet<String> =
                moving.into_iter().filter(|c| only.is_empty() || only.contains(c)).collect();
            if moving.is_empty() {
                return None;
            }
            let windows = spec
                .windows
                .iter()
                .map(|w| {
                    let kind = if w.kind == WindowKind::Deny { "deny" } else { "allow" };
                    let zone = w.time_zone.as_deref().unwrap_or("UTC");
                    format!("{kind} {} for {} ({zone})", w.schedule, spelled(w.duration))
                })
                .collect();
            Some(RolloutPlan {
                policy: PolicyId::of(policy).to_string(),
                batches: batches(spec, &to.loaded.clusters, &moving),
                min_success_time: spelled(spec.min_success_time),
                gates: spec.gates.iter().map(|g| g.name.clone()).collect(),
                windows,
                on_failure: if spec.on_failure == OnFailure::Revert { "Revert" } else { "Pause" }.into(),
            })
        })
        .collect()
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
