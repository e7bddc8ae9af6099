//! Why an object is where it is (`flotilla why`, and the fleet page's workload view):
//! which policy claimed it and why each other one that selects it did not, every
//! member's verdict (placed, with its replicas, or the filter that left it out), the
//! replica arithmetic, and the override rules applied per member with the fields each
//! changes. Pure: it reads a plan and the cluster state the plan was rendered with, and
//! its verdicts come from the scheduler's own filter, tiers and weights, so it cannot
//! tell a story the scheduler did not follow.

mod placement;
mod text;

use std::collections::BTreeMap;

use serde::Serialize;

pub use text::text;

use crate::matching::{self, MatchLevel};
use crate::model::plan::{Rendered, Source};
use crate::model::{ClusterState, Loaded, ObjectKey, Plan, Template};

/// The explanation of one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `apiVersion kind namespace/name`.
    pub object: String,
    /// Where it is declared (a chart's or kustomization's output file names it).
    pub origin: String,
    /// What claimed it: a policy, the namespace sync, a MultiClusterService… or nothing.
    pub claim: String,
    /// Every (Cluster)PropagationPolicy that selects it, and its verdict.
    pub policies: Vec<PolicyVerdict>,
    /// The replica scheduling strategy, when a policy placed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Replicas to place (a workload's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// How the replicas were divided, one line per step.
    pub arithmetic: Vec<String>,
    /// Every declared member, by name.
    pub members: BTreeMap<String, MemberVerdict>,
    /// The RolloutPolicy that moves its changes through the fleet in waves, if one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
    /// What the render could not do for it.
    pub problems: Vec<String>,
}

/// One policy that selects the object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyVerdict {
    /// `PropagationPolicy ns/name` or `ClusterPropagationPolicy name`.
    pub policy: String,
    /// How its best selector selects the object: `name`, `labelSelector`, or
    /// `apiVersion and kind`.
    pub selects_by: &'static str,
    /// Its `priority` (0 when unset).
    pub priority: i32,
    /// Whether it claims the object.
    pub claims: bool,
    /// Why it claims the object, or why it does not.
    pub why: String,
}

/// The object in one member.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberVerdict {
    /// Whether the plan puts it there.
    pub placed: bool,
    /// Its replicas there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Why it is there, or why not.
    pub why: String,
    /// The override rules applied there, in order, with the fields each changes.
    pub overrides: Vec<OverrideStep>,
    /// The rollout wave (and batch) in which a new revision of it reaches this member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
}

/// One override rule applied in one member.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverrideStep {
    /// `OverridePolicy ns/name` or `ClusterOverridePolicy name`.
    pub policy: String,
    /// Its index in `spec.overrideRules`.
    pub rule: usize,
    /// `path: before → after` per changed field (a Secret's values masked).
    pub fields: Vec<String>,
}

/// The explanation of the object `key` in `plan` (rendered with `state`), or `None` when
/// the plan has no such template.
pub fn explain(plan: &Plan, state: &ClusterState, key: &ObjectKey) -> Option<Explanation> {
    let loaded = &plan.loaded;
    let index = loaded.templates.iter().position(|t| &t.key == key)?;
    let template = &loaded.templates[index];
    let placed: BTreeMap<&str, &Rendered> = plan
        .clusters
        .iter()
        .filter_map(|(cluster, items)| items.iter().find(|r| r.template == index).map(|r| (cluster.as_str(), r)))
        .collect();
    let source = placed.values().next().map(|r| r.source).or_else(|| claimed_by(loaded, template));
    let winner = match source {
        Some(Source::Policy(p)) => Some(p),
        _ => None,
    };
    let mut explanation = Explanation {
        object: key.to_string(),
        origin: template.origin.to_string(),
        claim: claim(loaded, source),
        policies: policies(loaded, template, winner, source),
        strategy: None,
        replicas: None,
        arithmetic: Vec::new(),
        members: BTreeMap::new(),
        rollout: None,
        problems: plan
            .problems
            .iter()
            .filter(|p| &p.object == key)
            .map(|p| match &p.cluster {
                Some(cluster) => format!("{cluster}: {}", p.message),
                None => p.message.clone(),
            })
            .collect(),
    };
    placement::members(plan, state, template, &placed, source, &mut explanation);
    waves(loaded, index, &mut explanation);
    Some(explanation)
}

/// The waves a governing RolloutPolicy moves the object's members in.
fn waves(loaded: &Loaded, index: usize, out: &mut Explanation) {
    let Some(policy) = crate::rollout::governed(loaded)[index] else { return };
    let policy = &loaded.rollout_policies[policy];
    let placed: std::collections::BTreeSet<String> =
        out.members.iter().filter(|(_, m)| m.placed).map(|(name, _)| name.clone()).collect();
    let batches = crate::rollout::batches(&policy.spec, &loaded.clusters, &placed);
    let mut order = Vec::new();
    for (n, batch) in batches.iter().enumerate() {
        let name = format!("wave {}, batch {} (step {} of {})", batch.wave, batch.index + 1, n + 1, batches.len());
        for cluster in &batch.clusters {
            if let Some(member) = out.members.get_mut(cluster) {
                member.wave = Some(name.clone());
            }
        }
        order.push(format!("{} [{}]", batch.wave, batch.clusters.join(", ")));
    }
    let id = crate::rollout::PolicyId::of(policy);
    out.rollout = Some(format!("{id} moves a new revision in order: {}", order.join(" → ")));
}

/// The claim of a template placed nowhere: its policy, as matching picks it.
fn claimed_by(loaded: &Loaded, template: &Template) -> Option<Source> {
    let policies = &loaded.propagation_policies;
    let index = matching::PolicyIndex::new(
        policies.iter().enumerate().map(|(i, p)| (i, p.namespace.as_deref(), p.spec.resource_selectors.as_slice())),
    );
    matching::claiming(&index, template, |i| matching::Candidate {
        name: &policies[i].name,
        priority: policies[i].spec.priority,
        selectors: &policies[i].spec.resource_selectors,
    })
    .map(Source::Policy)
}

fn policy_name(loaded: &Loaded, p: usize) -> String {
    loaded.propagation_policies[p].describe("PropagationPolicy", "ClusterPropagationPolicy")
}

fn claim(loaded: &Loaded, source: Option<Source>) -> String {
    match source {
        Some(Source::Policy(p)) => policy_name(loaded, p),
        Some(Source::NamespaceSync) => "the namespace sync: a Namespace goes to every member".into(),
        Some(Source::Dependency { .. }) => {
            "its dependents' policies: it follows the workloads that use it (propagateDeps)".into()
        }
        Some(Source::MultiClusterService(m)) => {
            let m = &loaded.multi_cluster_services[m];
            format!("MultiClusterService {}/{}", m.namespace.as_deref().unwrap_or("default"), m.name)
        }
        Some(Source::FederatedResourceQuota { quota, .. }) => {
            let q = &loaded.federated_resource_quotas[quota];
            format!("FederatedResourceQuota {}/{}", q.namespace.as_deref().unwrap_or("default"), q.name)
        }
        None => "nothing: no PropagationPolicy or ClusterPropagationPolicy selects it".into(),
    }
}

fn level_name(level: MatchLevel) -> &'static str {
    match level {
        MatchLevel::Name => "name",
        MatchLevel::LabelSelector => "labelSelector",
        _ => "apiVersion and kind",
    }
}

/// Every policy that selects the template, the winner first, as Karmada's detector
/// ranks them: a policy of the object's namespace before a cluster-wide one, then
/// priority, then how closely it selects, then name.
fn policies(loaded: &Loaded, template: &Template, winner: Option<usize>, source: Option<Source>) -> Vec<PolicyVerdict> {
    let namespace = template.key.namespace.as_deref();
    let selecting = loaded.propagation_policies.iter().enumerate().filter_map(|(i, p)| {
        let in_scope = p.namespace.is_none() || p.namespace.as_deref() == namespace;
        let level = matching::policy_level(&p.spec.resource_selectors, &template.key, &template.labels);
        (in_scope && level != MatchLevel::Mismatch).then_some((i, level))
    });
    let selecting: Vec<(usize, MatchLevel)> = selecting.collect();
    let won = winner.and_then(|w| selecting.iter().find(|(i, _)| *i == w).copied());
    let mut out: Vec<PolicyVerdict> = selecting
        .iter()
        .map(|&(i, level)| {
            let p = &loaded.propagation_policies[i];
            let why = match (won, source) {
                (Some((w, _)), _) if w == i => "claims it".to_owned(),
                (Some((w, wl)), _) => lost(loaded, (i, level), (w, wl)),
                (None, Some(source)) => format!("{} takes the object instead", claim(loaded, Some(source))),
                (None, None) => "claims nothing: it is not in the object's scope".to_owned(),
            };
            PolicyVerdict {
                policy: policy_name(loaded, i),
                selects_by: level_name(level),
                priority: p.spec.priority.unwrap_or(0),
                claims: won.is_some_and(|(w, _)| w == i),
                why,
            }
        })
        .collect();
    out.sort_by_key(|v| !v.claims);
    out
}

/// Why policy `p` lost to `w`, each with its match level.
fn lost(loaded: &Loaded, (p, level): (usize, MatchLevel), (w, wl): (usize, MatchLevel)) -> String {
    let (policy, winner) = (&loaded.propagation_policies[p], &loaded.propagation_policies[w]);
    let (priority, winning) = (policy.spec.priority.unwrap_or(0), winner.spec.priority.unwrap_or(0));
    let name = policy_name(loaded, w);
    if winner.namespace.is_some() && policy.namespace.is_none() {
        format!("loses to {name}: a policy in the object's own namespace goes before cluster-wide ones")
    } else if priority != winning {
        format!("loses to {name}: its priority {priority} is below {winning}")
    } else if level != wl {
        format!("loses to {name}, which selects it by {} (more specific goes first)", level_name(wl))
    } else {
        format!("loses to {name}: same priority and match, and that name sorts first")
    }
}

#[cfg(test)]
mod tests;
