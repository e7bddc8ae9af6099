//! Stage 5, `render`: assignments → per-cluster objects ([`Plan`]) with replicas
//! revised, overrides applied, ownership recorded and server-owned fields stripped
//! (spec §6).

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::dependencies;
use crate::matching::{Binding, Claim};
use crate::model::cluster::PreviousPlacement;
use crate::model::plan::{Rendered, Revised, Source};
use crate::model::policy::ConflictResolution;
use crate::model::{Loaded, ObjectKey, Plan, Problem, ProblemReason, Template};
use crate::overrides::{self, OverrideError};
use crate::schedule::{Assignment, FitError};

mod manifest;

pub use manifest::{binding_name, conflict_resolution, release_replicas, revise_replicas, strip};

/// Label on every object flotilla applies; selects what flotilla manages.
pub const MANAGED_LABEL: &str = "flotilla.dev/managed";
/// Annotation naming the policy (or `namespace-sync`, `dependency`) behind an object.
pub const POLICY_ANNOTATION: &str = "flotilla.dev/policy";
/// Annotation naming the repo file that declares an object.
pub const SOURCE_ANNOTATION: &str = "flotilla.dev/source";
/// Set when the policy asks that member copies survive the template's deletion.
pub const PRESERVE_ANNOTATION: &str = "flotilla.dev/preserve-on-deletion";
/// Karmada's conflict-resolution annotation: `abort` or `overwrite`.
pub const CONFLICT_ANNOTATION: &str = "work.karmada.io/conflict-resolution";
/// Karmada's template label that leaves `spec.replicas` to the member (an HPA there).
pub const RETAIN_REPLICAS_LABEL: &str = "resourcetemplate.karmada.io/retain-replicas";

/// Where one template goes.
#[derive(Debug, Clone)]
struct Target {
    source: Source,
    clusters: BTreeMap<String, Option<i64>>,
    completions: BTreeMap<String, i64>,
    suspended: BTreeSet<String>,
    all_suspended: bool,
}

/// Builds the plan from placement results.
pub fn render(
    loaded: Loaded,
    revision: String,
    placed: Vec<(Binding, Result<Assignment, FitError>)>,
    mut problems: Vec<Problem>,
    unclaimed: Vec<usize>,
) -> Plan {
    // Targets and placement records are made on every core, then filed in template order.
    let outcomes: Vec<_> = placed
        .into_par_iter()
        .map(|(binding, result)| {
            let template = &loaded.templates[binding.template];
            match result {
                Ok(assignment) => {
                    let record = placement_record(template, &assignment);
                    Ok((binding.template, record, target(&loaded, binding, assignment)))
                }
                Err(e) => Err(Box::new(problem(template, None, ProblemReason::Unschedulable, e.to_string()))),
            }
        })
        .collect();
    let mut targets: BTreeMap<usize, Target> = BTreeMap::new();
    let mut placements = BTreeMap::new();
    for outcome in outcomes {
        match outcome {
            Ok((template, record, target)) => {
                placements.extend(record);
                targets.insert(template, target);
            }
            Err(problem) => problems.push(*problem),
        }
    }
    attach_dependencies(&loaded, &mut targets);
    // Templates no policy claimed may still travel as dependencies.
    let unclaimed =
        unclaimed.into_iter().filter(|i| !targets.contains_key(i)).map(|i| loaded.templates[i].key.clone()).collect();
    let revised = Revised::default();
    let results = render_targets(&loaded, &targets, &revised);
    // Every target is rendered: its per-cluster maps need not outlive it while the
    // entries are grouped (a large repository's peak).
    drop(targets);
    let clusters = by_cluster(&loaded, results, &mut problems);
    problems.sort_by(|a, b| (&a.object, &a.cluster, a.reason).cmp(&(&b.object, &b.cluster, b.reason)));
    Plan { revision, loaded, clusters, problems, placements, unclaimed, revised }
}

/// Every (template, cluster) entry of `targets`, or the problem its overrides hit.
/// Override rules are resolved per template once and per cluster by target; those that
/// can fail are trial-applied here so a failing override is a problem now rather than an
/// error while writing the output.
fn render_targets(
    loaded: &Loaded,
    targets: &BTreeMap<usize, Target>,
    revised: &Revised,
) -> Vec<Result<(usize, Rendered), Box<Problem>>> {
    let by_name: BTreeMap<&str, (usize, &crate::model::Cluster)> =
        loaded.clusters.iter().enumerate().map(|(i, c)| (c.name.as_str(), (i, c))).collect();
    let index = overrides::index(loaded);
    targets
        .par_iter()
        .flat_map_iter(|(&template, target)| {
            let t = &loaded.templates[template];
            let policies = overrides::ordered_policies(loaded, &index, t);
            let by_name = &by_name;
            let mut trials = Trials::default();
            target.clusters.iter().map(move |(cluster, replicas)| {
                let (at, member) = by_name[cluster.as_str()];
                let rendered = Rendered {
                    template,
                    replicas: *replicas,
                    completions: target.completions.get(cluster).copied(),
                    overrides: overrides::rules_for(loaded, &policies, member),
                    source: in_cluster(loaded, target.source, cluster),
                    suspended: target.all_suspended || target.suspended.contains(cluster),
                };
                if !overrides::may_fail(loaded, &rendered.overrides) {
                    return Ok((at, rendered));
                }
                match trials.run(loaded, &rendered, revised) {
                    Ok(()) => Ok((at, rendered)),
                    Err(message) => {
                        Err(Box::new(problem(t, Some(cluster.clone()), ProblemReason::OverrideFailed, message)))
                    }
                }
            })
        })
        .collect()
}

/// A target's source as one cluster's entry holds it: a FederatedResourceQuota's names
/// that cluster's assignment.
fn in_cluster(loaded: &Loaded, source: Source, cluster: &str) -> Source {
    match source {
        Source::FederatedResourceQuota { quota, .. } => {
            let assignment = loaded.federated_resource_quotas[quota].spec.assignment(cluster).unwrap_or_default();
            Source::FederatedResourceQuota { quota, assignment }
        }
        other => other,
    }
}

/// Rendered entries grouped by cluster, each list in template order; failures join
/// `problems`.
fn by_cluster(
    loaded: &Loaded,
    results: Vec<Result<(usize, Rendered), Box<Problem>>>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, Vec<Rendered>> {
    let mut per_cluster: Vec<Vec<Rendered>> = vec![Vec::new(); loaded.clusters.len()];
    for result in results {
        match result {
            Ok((at, rendered)) => per_cluster[at].push(rendered),
            Err(p) => problems.push(*p),
        }
    }
    loaded
        .clusters
        .iter()
        .zip(per_cluster)
        .map(|(c, mut items)| {
            items.sort_by_key(|r| r.template);
            (c.name.clone(), items)
        })
        .collect()
}

/// Override trials of one template: clusters that get the same rules share one trial
/// when their counts are alike. Alike means set or unset, not equal: whether an override
/// applies never depends on a count's value (JSON patches here only add, remove and
/// replace; a field overrider needs a string, and a count is an integer), only on
/// whether the count was written into the object, so the clusters of a divided workload
/// share one trial however its replicas split.
#[derive(Default)]
struct Trials(Vec<Trial>);

impl Trials {
    /// Whether `rendered`'s overrides apply, trying them only for a combination not
    /// tried yet.
    fn run(&mut self, loaded: &Loaded, rendered: &Rendered, revised: &Revised) -> Result<(), String> {
        let counts = (rendered.replicas.is_some(), rendered.completions.is_some());
        let same = |(c, o, _): &&Trial| (*c, o.as_slice()) == (counts, rendered.overrides.as_slice());
        if let Some((.., outcome)) = self.0.iter().find(same) {
            return outcome.clone();
        }
        let outcome = trial(loaded, rendered, revised).map_err(|e| error_chain(&e));
        self.0.push((counts, rendered.overrides.clone(), outcome.clone()));
        outcome
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        message.push_str(": ");
        message.push_str(&c.to_string());
        cause = c.source();
    }
    message
}

/// A problem for `template`.
pub fn problem(template: &Template, cluster: Option<String>, reason: ProblemReason, message: String) -> Problem {
    Problem { object: template.key.clone(), origin: template.origin.clone(), cluster, reason, message }
}

/// What the next render must know of this placement, keyed by the object's spelling:
/// where its replicas went and which affinity term placed it (nothing for objects
/// without either).
fn placement_record(template: &Template, a: &Assignment) -> Option<(String, PreviousPlacement)> {
    let clusters: BTreeMap<String, i64> = a.clusters.iter().filter_map(|(c, r)| r.map(|r| (c.clone(), r))).collect();
    if clusters.is_empty() && a.observed_affinity.is_none() {
        return None;
    }
    Some((template.key.spelled(), PreviousPlacement { clusters, observed_affinity: a.observed_affinity.clone() }))
}

fn target(loaded: &Loaded, binding: Binding, assignment: Assignment) -> Target {
    let (source, suspension) = match binding.claim {
        Claim::Policy(p) => (Source::Policy(p), loaded.propagation_policies[p].spec.suspension.as_ref()),
        Claim::NamespaceSync => (Source::NamespaceSync, None),
        Claim::MultiClusterService(m) => (Source::MultiClusterService(m), None),
        Claim::FederatedResourceQuota(quota) => (Source::FederatedResourceQuota { quota, assignment: 0 }, None),
    };
    let all_suspended = suspension.and_then(|s| s.dispatching).unwrap_or(false);
    let suspended = suspension
        .and_then(|s| s.dispatching_on_clusters.as_ref())
        .map(|s| s.cluster_names.iter().cloned().collect())
        .unwrap_or_default();
    Target { source, clusters: assignment.clusters, completions: assignment.completions, suspended, all_suspended }
}

/// Adds dependencies to the union of their parents' clusters, on top of any placement
/// of their own; they carry no replica counts.
fn attach_dependencies(loaded: &Loaded, targets: &mut BTreeMap<usize, Target>) {
    let index: BTreeMap<&ObjectKey, usize> = loaded.templates.iter().enumerate().map(|(i, t)| (&t.key, i)).collect();
    let mut derived: BTreeMap<&ObjectKey, Vec<&ObjectKey>> = BTreeMap::new();
    for t in &loaded.templates {
        if let Some(source) = &t.derived_from {
            derived.entry(source).or_default().push(&t.key);
        }
    }
    // Each dependency's clusters, and whether any parent's policy overwrites or preserves.
    let mut extra: BTreeMap<usize, (BTreeSet<String>, bool, bool)> = BTreeMap::new();
    for (&parent, target) in targets.iter() {
        let template = &loaded.templates[parent];
        let policy = match target.source {
            Source::Policy(p) => Some(&loaded.propagation_policies[p].spec),
            _ => None,
        };
        let propagate = policy.is_some_and(|p| p.propagate_deps);
        let overwrite = policy.is_some_and(|p| p.conflict_resolution == Some(ConflictResolution::Overwrite));
        let preserve = policy.is_some_and(|p| p.preserve_resources_on_deletion == Some(true));
        let mut deps: BTreeSet<ObjectKey> =
            if propagate { dependencies::referenced(template) } else { BTreeSet::new() };
        deps.extend(derived.get(&template.key).into_iter().flatten().map(|k| (*k).clone()));
        for dep in deps.iter().filter_map(|k| index.get(k)) {
            let entry = extra.entry(*dep).or_default();
            entry.0.extend(target.clusters.keys().cloned());
            entry.1 |= overwrite;
            entry.2 |= preserve;
        }
    }
    for (dep, (clusters, overwrite, preserve)) in extra {
        let entry = targets.entry(dep).or_insert_with(|| Target {
            source: Source::Dependency { overwrite, preserve },
            clusters: BTreeMap::new(),
            completions: BTreeMap::new(),
            suspended: BTreeSet::new(),
            all_suspended: false,
        });
        for cluster in clusters {
            entry.clusters.entry(cluster).or_insert(None);
        }
    }
}

/// A trial's inputs (whether replicas and completions are set, the rules) and outcome.
type Trial = ((bool, bool), Vec<overrides::RuleRef>, Result<(), String>);

/// Whether the overrides of `rendered` apply: [`materialize`] up to the step that can
/// fail.
fn trial(loaded: &Loaded, rendered: &Rendered, revised: &Revised) -> Result<(), OverrideError> {
    let object = manifest::revised(loaded, rendered, revised)?;
    overrides::apply(&mut { object }, loaded, &rendered.overrides)
}
