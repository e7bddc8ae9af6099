//! flotilla's render pipeline: one revision of a Git repo of resource templates and
//! Karmada policies in, what every member cluster must run out. Pure: no network,
//! filesystem, clock or randomness; what comes from the world is an argument.
//!
//! ```text
//!  RepoFiles ──load──▶ Loaded {templates, policies, overrides, clusters, autoscalers}
//!     ──bind──▶ Bindings (template + winning policy)
//!     ──place─▶ Assignments (cluster → replicas, or why none)   ◀── ClusterState
//!     ──render─▶ Plan {cluster → manifests (overrides applied), problems}
//!     ──restrict─▶ Plan without what the instance's scope forbids   ◀── Project
//!     ──finish─▶ Share {objects finished one at a time, complete with instance and digest; protected}
//!                 ◀── Context (instance, workloads a member HPA scales)
//! ```
//!
//! Load errors fail the revision (nothing half-loaded is ever planned); placement and
//! override failures are per object and land in [`Plan::problems`] while everything
//! else still renders.

pub mod autoscale;
pub mod dependencies;
pub mod diff;
pub mod escape;
pub mod failover;
pub mod finish;
pub mod interpret;
pub mod inventory;
pub mod load;
pub mod matching;
pub mod model;
pub mod multicluster;
pub mod overrides;
pub mod ownership;
pub mod plan_diff;
pub mod preview;
pub mod project;
pub mod render;
pub mod rollout;
pub mod schedule;
pub mod sources;
pub mod status;
pub mod why;
pub mod yaml;
pub mod yaml_edit;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use rayon::prelude::*;

pub use load::LoadError;

/// Test support: `text` as the one file of revision `revision`, rendered.
#[cfg(test)]
pub(crate) fn plan_of(revision: &str, text: &str) -> Plan {
    let mut files = RepoFiles { revision: revision.into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), text.as_bytes().to_vec());
    plan(&files, &ClusterState::default(), &Limits::default()).unwrap()
}
use matching::{Binding, Claim};
use model::{ClusterState, Limits, Loaded, Plan, Problem, ProblemReason, RepoFiles};

/// Renders one revision: load → bind → place → render.
pub fn plan(files: &RepoFiles, state: &ClusterState, limits: &Limits) -> Result<Plan, LoadError> {
    let loaded = load::load(files, limits)?;
    Ok(plan_loaded(loaded, files.revision.clone(), state))
}

/// The stages after `load`, for callers that cache loaded revisions.
pub fn plan_loaded(loaded: Loaded, revision: String, state: &ClusterState) -> Plan {
    let (bindings, unclaimed) = matching::bind(&loaded);
    let (bindings, problems) = check_dependent_overrides(&loaded, bindings);
    // One placer per policy, made when its first template is placed.
    let placers: Vec<OnceLock<schedule::Placer<'_>>> =
        loaded.propagation_policies.iter().map(|_| OnceLock::new()).collect();
    let placed = bindings
        .into_par_iter()
        .map(|binding| {
            let template = &loaded.templates[binding.template];
            let result = match binding.claim {
                Claim::Policy(p) => placers[p]
                    .get_or_init(|| {
                        schedule::Placer::new(&loaded.propagation_policies[p].spec.placement, &loaded.clusters)
                    })
                    .place(template, state),
                Claim::NamespaceSync => Ok(schedule::Assignment {
                    clusters: loaded.clusters.iter().map(|c| (c.name.clone(), None)).collect(),
                    ..Default::default()
                }),
                Claim::FederatedResourceQuota(q) => {
                    let quota = &loaded.federated_resource_quotas[q].spec;
                    let assigned = loaded.clusters.iter().filter(|c| quota.assignment(&c.name).is_some());
                    Ok(schedule::Assignment {
                        clusters: assigned.map(|c| (c.name.clone(), None)).collect(),
                        ..Default::default()
                    })
                }
                Claim::MultiClusterService(m) => {
                    let placement = multicluster::placement(&loaded.multi_cluster_services[m].spec, &loaded.clusters);
                    schedule::place(template, &placement, &loaded.clusters, state)
                }
            };
            (binding, result)
        })
        .collect();
    drop(placers);
    render::render(loaded, revision, placed, problems, unclaimed)
}

/// Karmada waits until every OverridePolicy named in `dependentOverrides` exists; a
/// render cannot wait, so such templates are reported and left out.
fn check_dependent_overrides(loaded: &Loaded, bindings: Vec<Binding>) -> (Vec<Binding>, Vec<Problem>) {
    let existing: BTreeSet<(Option<&str>, &str)> =
        loaded.override_policies.iter().map(|p| (p.namespace.as_deref(), p.name.as_str())).collect();
    let mut problems = Vec::new();
    let kept = bindings
        .into_iter()
        .filter(|b| {
            let Claim::Policy(p) = b.claim else {
                return true;
            };
            let policy = &loaded.propagation_policies[p];
            let missing: Vec<&str> = policy
                .spec
                .dependent_overrides
                .iter()
                .filter(|name| !existing.contains(&(policy.namespace.as_deref(), name.as_str())))
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                return true;
            }
            let message = format!(
                "{} depends on override policies that do not exist: {}",
                policy.describe("PropagationPolicy", "ClusterPropagationPolicy"),
                missing.join(", ")
            );
            problems.push(render::problem(
                &loaded.templates[b.template],
                None,
                ProblemReason::DependentOverridesMissing,
                message,
            ));
            false
        })
        .collect();
    (kept, problems)
}
