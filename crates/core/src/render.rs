//! Stage 5, `render`: assignments → per-cluster objects ([`Plan`]) with replicas
//! revised, overrides applied, ownership recorded and server-owned fields stripped
//! (spec §6).

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::dependencies;
use crate::matching::{Binding, Claim};
use crate::model::cluster::PreviousPlacement;
use crate::model::plan::{Rendered, Source};
use crate::model::policy::ConflictResolution;
use crate::model::{Loaded, ObjectKey, Plan, Problem, ProblemReason, Template};
use crate::overrides::{self, OverrideError};
use crate::schedule::{Assignment, FitError};

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
    let mut targets: BTreeMap<usize, Target> = BTreeMap::new();
    let mut placements = BTreeMap::new();
    for (binding, result) in placed {
        let template = &loaded.templates[binding.template];
        match result {
            Ok(assignment) => {
                record_placement(&mut placements, template, &assignment);
                targets.insert(binding.template, target(&loaded, binding, assignment));
            }
            Err(e) => problems.push(problem(template, None, ProblemReason::Unschedulable, e.to_string())),
        }
    }
    attach_dependencies(&loaded, &mut targets);
    let by_name: BTreeMap<&str, (usize, &crate::model::Cluster)> =
        loaded.clusters.iter().enumerate().map(|(i, c)| (c.name.as_str(), (i, c))).collect();
    let index = overrides::index(&loaded);
    // Override rules are resolved per template once and per cluster by target; they are
    // trial-applied here so a failing override is a problem now rather than an error
    // while writing the output.
    let results: Vec<Result<(usize, Rendered), Box<Problem>>> = targets
        .par_iter()
        .flat_map_iter(|(&template, target)| {
            let t = &loaded.templates[template];
            let policies = overrides::ordered_policies(&loaded, &index, t);
            let (loaded, by_name) = (&loaded, &by_name);
            let mut trials = Trials::default();
            target.clusters.iter().map(move |(cluster, replicas)| {
                let (at, member) = by_name[cluster.as_str()];
                let rendered = Rendered {
                    template,
                    replicas: *replicas,
                    completions: target.completions.get(cluster).copied(),
                    overrides: overrides::rules_for(loaded, &policies, member),
                    source: target.source,
                    suspended: target.all_suspended || target.suspended.contains(cluster),
                };
                if rendered.overrides.is_empty() {
                    return Ok((at, rendered));
                }
                match trials.run(loaded, &rendered) {
                    Ok(()) => Ok((at, rendered)),
                    Err(message) => {
                        Err(Box::new(problem(t, Some(cluster.clone()), ProblemReason::OverrideFailed, message)))
                    }
                }
            })
        })
        .collect();
    let clusters = by_cluster(&loaded, results, &mut problems);
    problems.sort_by(|a, b| (&a.object, &a.cluster, a.reason).cmp(&(&b.object, &b.cluster, b.reason)));
    // Templates no policy claimed may still travel as dependencies.
    let unclaimed =
        unclaimed.into_iter().filter(|i| !targets.contains_key(i)).map(|i| loaded.templates[i].key.clone()).collect();
    Plan { revision, loaded, clusters, problems, placements, unclaimed }
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

/// Override trials of one template: clusters that get the same rules and counts share
/// one trial.
#[derive(Default)]
struct Trials(Vec<Trial>);

impl Trials {
    /// Whether `rendered`'s overrides apply, trying them only for a combination not
    /// tried yet.
    fn run(&mut self, loaded: &Loaded, rendered: &Rendered) -> Result<(), String> {
        let same = |(r, c, o, _): &&Trial| {
            (*r, *c, o.as_slice()) == (rendered.replicas, rendered.completions, rendered.overrides.as_slice())
        };
        if let Some((.., outcome)) = self.0.iter().find(same) {
            return outcome.clone();
        }
        let outcome = trial(loaded, rendered).map_err(|e| error_chain(&e));
        self.0.push((rendered.replicas, rendered.completions, rendered.overrides.clone(), outcome.clone()));
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

fn record_placement(placements: &mut BTreeMap<String, PreviousPlacement>, template: &Template, a: &Assignment) {
    let clusters: BTreeMap<String, i64> = a.clusters.iter().filter_map(|(c, r)| r.map(|r| (c.clone(), r))).collect();
    if !clusters.is_empty() || a.observed_affinity.is_some() {
        placements.insert(
            template.key.spelled(),
            PreviousPlacement { clusters, observed_affinity: a.observed_affinity.clone() },
        );
    }
}

fn target(loaded: &Loaded, binding: Binding, assignment: Assignment) -> Target {
    let (source, suspension) = match binding.claim {
        Claim::Policy(p) => (Source::Policy(p), loaded.propagation_policies[p].spec.suspension.as_ref()),
        Claim::NamespaceSync => (Source::NamespaceSync, None),
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
    let mut extra: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for (&parent, target) in targets.iter() {
        let template = &loaded.templates[parent];
        let propagate =
            matches!(target.source, Source::Policy(p) if loaded.propagation_policies[p].spec.propagate_deps);
        let mut deps: BTreeSet<ObjectKey> =
            if propagate { dependencies::referenced(template) } else { BTreeSet::new() };
        deps.extend(derived.get(&template.key).into_iter().flatten().map(|k| (*k).clone()));
        for dep in deps.iter().filter_map(|k| index.get(k)) {
            extra.entry(*dep).or_default().extend(target.clusters.keys().cloned());
        }
    }
    for (dep, clusters) in extra {
        let entry = targets.entry(dep).or_insert_with(|| Target {
            source: Source::Dependency,
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

impl Plan {
    /// The full object for one rendered entry.
    pub fn manifest(&self, rendered: &Rendered) -> Result<Value, OverrideError> {
        materialize(&self.loaded, rendered)
    }

    /// Every manifest of one cluster, in output order.
    pub fn manifests<'a>(&'a self, cluster: &str) -> impl Iterator<Item = Result<Value, OverrideError>> + 'a {
        self.clusters.get(cluster).into_iter().flatten().map(|r| self.manifest(r))
    }
}

/// A trial's inputs (replicas, completions, rules) and outcome.
type Trial = (Option<i64>, Option<i64>, Vec<overrides::RuleRef>, Result<(), String>);

/// Whether the overrides of `rendered` apply: [`materialize`] up to the step that can
/// fail.
fn trial(loaded: &Loaded, rendered: &Rendered) -> Result<(), OverrideError> {
    let template = &loaded.templates[rendered.template];
    let mut object = Value::clone(&template.object);
    revise_replicas(&mut object, &template.key, rendered.replicas, rendered.completions);
    overrides::apply(&mut object, loaded, &rendered.overrides)
}

fn materialize(loaded: &Loaded, rendered: &Rendered) -> Result<Value, OverrideError> {
    let template = &loaded.templates[rendered.template];
    let mut object = Value::clone(&template.object);
    revise_replicas(&mut object, &template.key, rendered.replicas, rendered.completions);
    overrides::apply(&mut object, loaded, &rendered.overrides)?;
    if template.labels.get(RETAIN_REPLICAS_LABEL).map(String::as_str) == Some("true") {
        release_replicas(&mut object);
    }
    decorate(&mut object, loaded, template, rendered.source);
    strip(&mut object, &template.key);
    Ok(object)
}

/// Karmada's binding name for a template: `lower(name with ':' → '.') + "-" + lower(kind)`
/// (`GenerateBindingName`, vector `names-binding-table`). flotilla has no binding objects;
/// this is for tools that correlate flotilla's output with a Karmada installation.
pub fn binding_name(kind: &str, name: &str) -> String {
    format!("{}-{}", name.replace(':', "."), kind).to_lowercase()
}

/// Sets the assigned replicas: Deployment, ReplicaSet, StatefulSet `spec.replicas`;
/// Job `spec.parallelism` (and `spec.completions` when split).
pub fn revise_replicas(object: &mut Value, key: &ObjectKey, replicas: Option<i64>, completions: Option<i64>) {
    let field = match (key.group(), key.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => "replicas",
        ("batch", "Job") => "parallelism",
        _ => return,
    };
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(r) = replicas {
        spec.insert(field.into(), Value::from(r));
    }
    if let Some(c) = completions {
        spec.insert("completions".into(), Value::from(c));
    }
}

fn decorate(object: &mut Value, loaded: &Loaded, template: &Template, source: Source) {
    let (policy, resolution, preserve) = match source {
        Source::Policy(p) => {
            let policy = &loaded.propagation_policies[p];
            let overwrite = policy.spec.conflict_resolution == Some(ConflictResolution::Overwrite);
            let preserve = policy.spec.preserve_resources_on_deletion.unwrap_or(false);
            (policy.describe("PropagationPolicy", "ClusterPropagationPolicy"), overwrite, preserve)
        }
        Source::NamespaceSync => ("namespace-sync".to_owned(), false, false),
        Source::Dependency => ("dependency".to_owned(), false, false),
    };
    let resolution = conflict_resolution(template.annotation(CONFLICT_ANNOTATION), resolution);
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = object_map(metadata, "labels");
    labels.insert(MANAGED_LABEL.into(), "true".into());
    let annotations = object_map(metadata, "annotations");
    annotations.insert(POLICY_ANNOTATION.into(), policy.into());
    annotations.insert(SOURCE_ANNOTATION.into(), template.origin.file.to_string().into());
    annotations.insert(CONFLICT_ANNOTATION.into(), resolution.into());
    if preserve {
        annotations.insert(PRESERVE_ANNOTATION.into(), "true".into());
    }
}

/// Drops `spec.replicas` so server-side apply leaves it to whoever scales the workload
/// in the member (Karmada's retain-replicas; a member HPA).
pub fn release_replicas(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
}

/// Karmada's `mergeConflictResolution`: a template annotation of `overwrite` or `abort`
/// wins; otherwise the policy's choice.
pub fn conflict_resolution(template_annotation: Option<&str>, policy_overwrite: bool) -> &'static str {
    match template_annotation {
        Some("overwrite") => "overwrite",
        Some("abort") => "abort",
        _ if policy_overwrite => "overwrite",
        _ => "abort",
    }
}

fn object_map<'a>(metadata: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let entry = metadata.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("just made an object")
}

/// Removes what members must not receive (spec §6.3 step 10), plus
/// `kubectl.kubernetes.io/last-applied-configuration`, which can carry a whole Secret.
pub fn strip(object: &mut Value, key: &ObjectKey) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    root.remove("status");
    if let Some(metadata) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "resourceVersion",
            "selfLink",
            "uid",
            "ownerReferences",
            "finalizers",
        ] {
            metadata.remove(field);
        }
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if key.kind == "Deployment" {
                annotations.remove("deployment.kubernetes.io/revision");
                annotations.remove("deployment.kubernetes.io/revision-history");
            }
            if key.kind == "PersistentVolumeClaim" {
                annotations.remove("volume.kubernetes.io/selected-node");
            }
        }
    }
    let spec = root.get_mut("spec").and_then(Value::as_object_mut);
    match (key.group(), key.kind.as_str(), spec) {
        ("", "Service", Some(spec)) if spec.get("clusterIP").and_then(Value::as_str) != Some("None") => {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        ("batch", "Job", Some(spec)) => strip_job(spec),
        _ => {}
    }
}

fn strip_job(spec: &mut Map<String, Value>) {
    spec.remove("ttlSecondsAfterFinished");
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    const GENERATED: [&str; 4] =
        ["controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"];
    if let Some(labels) = spec.get_mut("selector").and_then(|s| s.get_mut("matchLabels")).and_then(Value::as_object_mut)
    {
        for l in &GENERATED[..2] {
            labels.remove(*l);
        }
    }
    let template_labels =
        spec.get_mut("template").and_then(|t| t.get_mut("metadata")).and_then(|m| m.get_mut("labels"));
    if let Some(labels) = template_labels.and_then(Value::as_object_mut) {
        for l in GENERATED {
            labels.remove(l);
        }
    }
}
