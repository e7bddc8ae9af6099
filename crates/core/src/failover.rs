//! Failover's pure decisions, shared by the controller's failover loop and
//! `flotilla render --simulate-failure`: which taints a cluster's health brings (Karmada's
//! health taints and the repo's ClusterTaintPolicies), which opted-in workloads a
//! NoExecute taint evicts and after how long, and what moved between two renders.
//!
//! The render itself heeds the outcome through [`ClusterState`]: `taints` keep new
//! replicas off a failing member, `evictions` move the replicas already there.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::cluster::Evicted;
use crate::model::failover::{ClusterTaintPolicySpec, ConditionOperator, FailoverBehavior, MatchCondition};
use crate::model::plan::Source;
use crate::model::policy::{Taint, Toleration};
use crate::model::{Cluster, ClusterState, Named, ObjectKey, Plan};
use crate::schedule::filter::{cluster_matches, tolerates};

/// Karmada's taint on a cluster whose Ready condition is False.
pub const NOT_READY: &str = "cluster.karmada.io/not-ready";
/// Karmada's taint on a cluster whose Ready condition is Unknown.
pub const UNREACHABLE: &str = "cluster.karmada.io/unreachable";

/// The status of a cluster's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Readiness {
    /// It answers.
    True,
    /// It was reached and is not ready, or its probes fail.
    False,
    /// Nothing has been heard from it for the grace period.
    Unknown,
}

impl Readiness {
    /// `True`, `False` or `Unknown`, as the condition's status reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::True => "True",
            Readiness::False => "False",
            Readiness::Unknown => "Unknown",
        }
    }
}

/// The NoSchedule taint Karmada's cluster controller puts on an unhealthy cluster.
pub fn health_taint(ready: Readiness) -> Option<Taint> {
    let key = match ready {
        Readiness::True => return None,
        Readiness::False => NOT_READY,
        Readiness::Unknown => UNREACHABLE,
    };
    Some(Taint { key: key.into(), value: String::new(), effect: "NoSchedule".into(), time_added: None })
}

/// Whether `taint` is one of Karmada's health taints (a member that is not Ready).
pub fn is_health_taint(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" && (taint.key == NOT_READY || taint.key == UNREACHABLE)
}

/// Whether the health overlay holds `cluster` not Ready (it carries a health taint): a
/// member nothing should contact until it is Ready again.
pub fn held_not_ready(overlay: &ClusterState, cluster: &str) -> bool {
    overlay.taints.get(cluster).is_some_and(|t| t.iter().any(is_health_taint))
}

/// The taints the repo's ClusterTaintPolicies hold on `cluster` with these conditions,
/// starting from those they held before (`held`): a policy whose `addOnConditions` all
/// match adds its taints; one whose `removeOnConditions` all match removes them; with
/// neither, what it added stays (Karmada's ClusterTaintPolicy controller).
pub fn policy_taints(
    policies: &[std::sync::Arc<Named<ClusterTaintPolicySpec>>],
    cluster: &Cluster,
    conditions: &BTreeMap<String, String>,
    held: &[Taint],
) -> Vec<Taint> {
    let mut taints: BTreeSet<Taint> = held.iter().map(untimed).collect();
    for policy in policies {
        let spec = &policy.spec;
        if !spec.target_clusters.as_ref().is_none_or(|a| cluster_matches(a, cluster)) {
            continue;
        }
        let own = spec.taints.iter().map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            time_added: None,
        });
        if all_match(&spec.add_on_conditions, conditions) {
            taints.extend(own);
        } else if all_match(&spec.remove_on_conditions, conditions) {
            let own: Vec<Taint> = own.collect();
            taints.retain(|t| !own.iter().any(|o| o.key == t.key && o.effect == t.effect));
        }
    }
    taints.into_iter().collect()
}

fn untimed(taint: &Taint) -> Taint {
    Taint { time_added: None, ..taint.clone() }
}

/// An empty list never matches: a policy without `removeOnConditions` never removes.
fn all_match(tests: &[MatchCondition], conditions: &BTreeMap<String, String>) -> bool {
    !tests.is_empty()
        && tests.iter().all(|test| {
            let status = conditions.get(&test.condition_type).map(String::as_str).unwrap_or("Unknown");
            let listed = test.status_values.iter().any(|v| v == status);
            listed == (test.operator == ConditionOperator::In)
        })
}

/// How long a workload with `tolerations` stays on a cluster with `taint`: `None`,
/// for ever (the taint is not NoExecute, or a toleration has no `tolerationSeconds`);
/// `Some(0)`, not at all; else the shortest matching toleration (Kubernetes' rule).
pub fn tolerated_for(tolerations: &[Toleration], taint: &Taint) -> Option<i64> {
    if taint.effect != "NoExecute" {
        return None;
    }
    let matching: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
    if matching.is_empty() {
        return Some(0);
    }
    matching.iter().map(|t| t.toleration_seconds.map(|s| s.max(0))).collect::<Option<Vec<i64>>>()?.into_iter().min()
}

/// A workload that opted into failover, where the render put it.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    /// The workload.
    pub key: &'a ObjectKey,
    /// The cluster.
    pub cluster: &'a str,
    /// Replicas it runs there.
    pub replicas: i64,
    /// Its policy's `spec.failover`.
    pub failover: &'a FailoverBehavior,
    /// Its policy's `placement.clusterTolerations`.
    pub tolerations: &'a [Toleration],
    /// What a reschedule follows: see [`Placed::fingerprint`].
    placement: &'a crate::model::policy::Placement,
    template: &'a crate::model::Template,
}

impl Placed<'_> {
    /// The workload's replicas in Git and its policy's placement, digested. Karmada
    /// reschedules a workload (and so may bring replicas back to a member it was
    /// evicted from) only when one of these changes; an eviction lasts until then.
    pub fn fingerprint(&self) -> String {
        let replicas = self.template.workload().replicas;
        crate::diff::digest(&serde_json::Value::String(format!("{replicas}|{:?}", self.placement)))
    }
}

/// Every workload with replicas whose policy declares `spec.failover`, per cluster it
/// is rendered on. Nothing else is ever evicted: a ConfigMap, a Service, or a workload
/// without the opt-in stays where Git puts it, whatever the cluster's health.
pub fn opted_in(plan: &Plan) -> Vec<Placed<'_>> {
    let mut placed = Vec::new();
    for (cluster, items) in &plan.clusters {
        for item in items {
            let (Source::Policy(p), Some(replicas)) = (item.source, item.replicas) else { continue };
            let spec = &plan.loaded.propagation_policies[p].spec;
            let Some(failover) = &spec.failover else { continue };
            let template = &plan.loaded.templates[item.template];
            placed.push(Placed {
                key: &template.key,
                cluster,
                replicas,
                failover,
                tolerations: &spec.placement.cluster_tolerations,
                placement: &spec.placement,
                template,
            });
        }
    }
    placed
}

/// The state after `failed` clusters have been unreachable for longer than every
/// toleration, with eviction on: what `render --simulate-failure` renders. The
/// clusters get the unreachable taint and whatever the ClusterTaintPolicies add for
/// `Ready: Unknown`; each opted-in workload that does not tolerate a NoExecute taint
/// for ever is evicted, its old copy purged (kept only under `purgeMode: Never`).
pub fn simulate(plan: &Plan, failed: &[String]) -> ClusterState {
    let mut state = ClusterState { previous: plan.placements.clone(), ..ClusterState::default() };
    let conditions = BTreeMap::from([("Ready".to_owned(), Readiness::Unknown.as_str().to_owned())]);
    for cluster in plan.loaded.clusters.iter().filter(|c| failed.contains(&c.name)) {
        let mut taints = policy_taints(&plan.loaded.cluster_taint_policies, cluster, &conditions, &[]);
        taints.extend(health_taint(Readiness::Unknown));
        state.taints.insert(cluster.name.clone(), taints);
    }
    for placed in opted_in(plan) {
        let Some(taints) = state.taints.get(placed.cluster) else { continue };
        let declared = plan.loaded.clusters.iter().find(|c| c.name == placed.cluster).map(|c| &c.spec.taints);
        let evicts =
            taints.iter().chain(declared.into_iter().flatten()).any(|t| tolerated_for(placed.tolerations, t).is_some());
        if evicts {
            let never = placed.failover.cluster_purge() == crate::model::failover::PurgeMode::Never;
            let keep = never.then_some(placed.replicas);
            state
                .evictions
                .entry(placed.key.spelled())
                .or_default()
                .insert(placed.cluster.to_owned(), Evicted { keep });
        }
    }
    state
}

/// A workload whose replicas moved between two renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    /// The workload, spelled.
    pub object: String,
    /// Cluster → replicas before.
    pub before: BTreeMap<String, i64>,
    /// Cluster → replicas after.
    pub after: BTreeMap<String, i64>,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let clusters: BTreeSet<&String> = self.before.keys().chain(self.after.keys()).collect();
        let parts: Vec<String> = clusters
            .into_iter()
            .map(|c| {
                let (b, a) = (self.before.get(c).copied().unwrap_or(0), self.after.get(c).copied().unwrap_or(0));
                if a == b { format!("{c} {a}") } else { format!("{c} {b}→{a}") }
            })
            .collect();
        write!(f, "{}: {}", self.object, parts.join(", "))
    }
}

/// Workloads whose per-cluster replicas differ between `before` and `after`.
pub fn moves(before: &Plan, after: &Plan) -> Vec<Moved> {
    let keys: BTreeSet<&String> = before.placements.keys().chain(after.placements.keys()).collect();
    let clusters_of =
        |plan: &Plan, key: &String| plan.placements.get(key).map(|p| p.clusters.clone()).unwrap_or_default();
    keys.into_iter()
        .map(|key| Moved { object: key.clone(), before: clusters_of(before, key), after: clusters_of(after, key) })
        .filter(|m| m.before != m.after)
        .collect()
}

#[cfg(test)]
mod tests;
