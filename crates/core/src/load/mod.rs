//! Stage 1, `load`: repo files → typed, defaulted and validated objects ([`Loaded`]).
//!
//! Every file is split into documents, every document is parsed on its own (spread
//! over the cores with rayon), then the results are classified in file order so the
//! first error reported is always the same one. Any error fails the whole revision:
//! a plan is never built from half a repo.

mod admission;
mod cache;
mod error;
mod interpreted;
mod karmada;
mod scope;
mod split;
mod subset;
mod typed;

use typed::{Source, typed, typed_with_labels};
mod validate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::autoscale::{CronFederatedHpaSpec, FederatedHpaSpec};
use crate::model::cluster::{Cluster, ClusterSpec};
use crate::model::failover::ClusterTaintPolicySpec;
use crate::model::service::MultiClusterServiceSpec;
use crate::model::{Limits, Loaded, Named, ObjectKey, Origin, OverrideSpec, PropagationSpec, RepoFiles, Template};

pub use admission::Admission;
pub use cache::{HelmChart, ParseCache, load_cached};
pub use error::LoadError;
pub(crate) use error::yaml_error;
pub use scope::{FEDERATED_RESOURCE_QUOTA, declared_kinds, is_builtin_kind};
pub use split::{Chunk, split};
pub(crate) use validate::repository_path;

/// What one document turned out to be.
#[derive(Debug, Clone)]
enum Parsed {
    Template(Arc<scope::Raw>),
    Propagation(Arc<Named<PropagationSpec>>),
    Override(Arc<Named<OverrideSpec>>),
    Cluster(Box<Cluster>),
    FederatedHpa(Arc<Named<FederatedHpaSpec>>),
    CronFederatedHpa(Arc<Named<CronFederatedHpaSpec>>),
    MultiClusterService(Arc<Named<MultiClusterServiceSpec>>),
    FederatedResourceQuota(Arc<Named<crate::model::quota::FederatedResourceQuotaSpec>>),
    ClusterTaintPolicy(Arc<Named<ClusterTaintPolicySpec>>),
    Rollout(Arc<Named<crate::model::rollout::RolloutSpec>>),
    Customization(Arc<Named<crate::interpret::CustomizationSpec>>),
    HelmChart(Arc<Named<crate::model::source::HelmChartSpec>>),
    NotActedOn(Arc<crate::model::NotActedOn>),
}

/// Loads every manifest of a revision. See the module docs.
pub fn load(files: &RepoFiles, limits: &Limits) -> Result<Loaded, LoadError> {
    load_cached(files, &mut ParseCache::default(), limits)
}

/// The HelmCharts one file declares, read as [`load`] reads them, before anything else
/// is loaded (their output is part of what is).
pub fn helm_charts_in(file: &str, bytes: &[u8], limits: &Limits) -> Result<Vec<HelmChart>, LoadError> {
    let Ok(text) = std::str::from_utf8(bytes) else { return Ok(Vec::new()) };
    let shared: Arc<str> = Arc::from(file);
    let spent = AtomicUsize::new(0);
    let mut charts = Vec::new();
    // A document that names HelmChart and does not load fails here, with its own
    // error: left out, its values files would be read as manifests and the first error
    // shown would be theirs.
    for chunk in split(text).into_iter().filter(|c| c.text.contains("HelmChart")) {
        let (docs, _) = parse_document(&shared, &chunk, limits, &spent)?;
        charts.extend(docs.into_iter().filter_map(|(_, doc)| match doc {
            Parsed::HelmChart(chart) => Some(chart),
            _ => None,
        }));
    }
    Ok(charts)
}

/// Splits and parses every document into a JSON tree without interpreting it, as
/// [`load`] parses them: the floor under its cost, measured next to it by the benchmarks.
pub fn parse_only(files: &RepoFiles, limits: &Limits) -> Result<usize, LoadError> {
    let (chunks, _, _) = cache::split_files(files, &ParseCache::default(), limits)?;
    let parsed: Result<Vec<(Value, usize)>, LoadError> =
        chunks.par_iter().map(|(file, chunk)| parse_tree(file, chunk, limits)).collect();
    Ok(parsed?.len())
}

/// The same floor with every document read by serde-saphyr, as before the subset
/// reader: the benchmarks' measure of what [`subset`] saves.
pub fn parse_only_general(files: &RepoFiles, limits: &Limits) -> Result<usize, LoadError> {
    let (chunks, _, _) = cache::split_files(files, &ParseCache::default(), limits)?;
    let parsed: Result<Vec<Value>, LoadError> =
        chunks.par_iter().map(|(file, chunk)| parse_as::<Value>(file, chunk, limits)).collect();
    Ok(parsed?.len())
}

/// One document's tree and node count: the common subset of YAML read straight from
/// the parser's events ([`subset`]), anything else by serde-saphyr, whose errors and
/// budgets are the ones reported either way.
fn parse_tree(file: &str, chunk: &Chunk<'_>, limits: &Limits) -> Result<(Value, usize), LoadError> {
    if let Some(read) = subset::tree(chunk.text, limits) {
        return Ok(read);
    }
    let value: Value = parse_as(file, chunk, limits)?;
    let nodes = count_nodes(&value);
    Ok((value, nodes))
}

/// Parses YAML text embedded in a manifest (a FieldOverrider's `yaml` target) as a
/// document of the repository is parsed: the same reader, budgets and YAML 1.1 scalars.
pub fn parse_embedded(text: &str, limits: &Limits) -> Result<Value, serde_saphyr::Error> {
    match subset::tree(text, limits) {
        Some((value, _)) => Ok(value),
        None => serde_saphyr::from_str_with_options(text, parse_options(limits)),
    }
}

fn parse_options(limits: &Limits) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = limits.max_depth;
    budget.max_nodes = limits.max_nodes;
    budget.max_aliases = limits.max_aliases;
    budget.max_documents = 1;
    let mut alias_limits = serde_saphyr::options::AliasLimits::default();
    alias_limits.max_total_replayed_events = limits.max_nodes;
    // Kubernetes reads YAML 1.1 (sigs.k8s.io/yaml on go-yaml v2): `0644` is octal and
    // `yes`/`on` are booleans. Snippets are off so no source text reaches an error.
    serde_saphyr::options! {
        budget: Some(budget),
        alias_limits: alias_limits,
        legacy_octal_numbers: true,
        with_snippet: false,
    }
}

fn parse_error(file: &str, chunk: &Chunk<'_>, err: &serde_saphyr::Error) -> LoadError {
    yaml_error(file, chunk.document, chunk.line, err)
}

fn parse_as<T: DeserializeOwned>(file: &str, chunk: &Chunk<'_>, limits: &Limits) -> Result<T, LoadError> {
    serde_saphyr::from_str_with_options(chunk.text, parse_options(limits)).map_err(|e| parse_error(file, chunk, &e))
}

/// What one document holds, and its node count.
type Document = (Vec<(Origin, Parsed)>, usize);

/// One document's objects, and its node count. `spent` counts the revision's nodes so
/// far, across the threads parsing it; past [`Limits::max_total_nodes`] every parse stops.
fn parse_document(
    shared: &Arc<str>,
    chunk: &Chunk<'_>,
    limits: &Limits,
    spent: &AtomicUsize,
) -> Result<Document, LoadError> {
    let file: &str = shared;
    let origin = Origin { file: shared.clone(), document: chunk.document, line: chunk.line };
    if chunk.text.len() > limits.max_document_bytes {
        return Err(LoadError::DocumentTooLarge { origin, size: chunk.text.len(), limit: limits.max_document_bytes });
    }
    let over = || LoadError::TooManyNodes { limit: limits.max_total_nodes };
    if spent.load(Ordering::Relaxed) > limits.max_total_nodes {
        return Err(over());
    }
    let (value, nodes) = parse_tree(file, chunk, limits)?;
    if spent.fetch_add(nodes, Ordering::Relaxed) + nodes > limits.max_total_nodes {
        return Err(over());
    }
    classify(value, &origin, file, chunk, limits).map(|objects| (objects, nodes))
}

/// Nodes of a parsed document (mappings, sequences and scalars), counted without
/// recursion.
fn count_nodes(value: &Value) -> usize {
    let mut pending = vec![value];
    let mut count = 0;
    while let Some(node) = pending.pop() {
        count += 1;
        match node {
            Value::Object(map) => pending.extend(map.values()),
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    count
}

/// What a parsed document is: a Karmada object (typed, defaulted, validated) or a
/// template.
fn classify(
    value: Value,
    origin: &Origin,
    file: &str,
    chunk: &Chunk<'_>,
    limits: &Limits,
) -> Result<Vec<(Origin, Parsed)>, LoadError> {
    let origin = origin.clone();
    if value.is_null() {
        return Ok(Vec::new());
    }
    let invalid = |message: String| LoadError::Invalid { origin: origin.clone(), message };
    let api_version = required_str(&value, "apiVersion").map_err(invalid)?;
    let kind = required_str(&value, "kind").map_err(invalid)?;
    if scope::is_karmada_group(api_version) || api_version.starts_with("flotilla.dev/") {
        validate::label_selectors(&value).map_err(invalid)?;
    }
    if api_version == "v1" && kind == "List" {
        return list_items(value, &origin);
    }
    let source = Source { chunk, tree: &value };
    let parsed = match karmada::object(api_version, kind, file, source, limits, &origin)? {
        Some(parsed) => parsed,
        None if scope::is_karmada_group(api_version) => match karmada::not_acted_on(api_version, kind) {
            Some(why) => {
                let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                let object = format!("{api_version} {kind} {name}");
                Parsed::NotActedOn(Arc::new(crate::model::NotActedOn { object, why, origin: origin.clone() }))
            }
            None => return Err(invalid(format!("{api_version} {kind} is not a Karmada kind flotilla knows"))),
        },
        None => Parsed::Template(Arc::new(scope::raw(value, &origin)?)),
    };
    Ok(vec![(origin, parsed)])
}

/// A `v1 List`: each item is a template of its own, located at the list's document.
fn list_items(value: Value, origin: &Origin) -> Result<Vec<(Origin, Parsed)>, LoadError> {
    let Some(Value::Array(items)) = value.get("items").cloned() else {
        return Err(LoadError::Invalid { origin: origin.clone(), message: "a List needs an items array".into() });
    };
    items.into_iter().map(|item| Ok((origin.clone(), Parsed::Template(Arc::new(scope::raw(item, origin)?))))).collect()
}

fn required_str<'v>(value: &'v Value, field: &str) -> Result<&'v str, String> {
    match value.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(format!("{field} must be a non-empty string")),
        None => Err(format!("missing {field}")),
    }
}

/// Turns raw template objects into keyed [`Template`]s: names checked, namespaces
/// defaulted by scope, ServiceImports given their derived Service, duplicates refused.
/// `keyed` is in file order; the result is sorted by key.
fn templates(keyed: Vec<Arc<Template>>) -> Result<Vec<Arc<Template>>, LoadError> {
    let mut sorted = keyed.clone();
    // Stable: equal keys keep file order.
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    if sorted.windows(2).all(|pair| pair[0].key != pair[1].key) {
        return Ok(sorted);
    }
    // Report the duplicate met first in file order, as a scan in that order would.
    let mut seen: BTreeMap<&ObjectKey, &Template> = BTreeMap::new();
    for template in &keyed {
        if let Some(first) = seen.insert(&template.key, template) {
            return Err(LoadError::Duplicate {
                key: Box::new(template.key.clone()),
                first: first.origin.clone(),
                second: template.origin.clone(),
            });
        }
    }
    unreachable!("a duplicate key was found by sorting")
}

/// Cross-document checks and the final, deterministic order.
fn finish(loaded: &mut Loaded) -> Result<(), LoadError> {
    loaded.clusters.sort_by(|a, b| a.name.cmp(&b.name));
    for pair in loaded.clusters.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(LoadError::Invalid {
                origin: pair[1].origin.clone(),
                message: format!("Cluster {} is declared twice; the other is at {}", pair[1].name, pair[0].origin),
            });
        }
    }
    unique_names(&mut loaded.propagation_policies, "PropagationPolicy", "ClusterPropagationPolicy")?;
    unique_names(&mut loaded.override_policies, "OverridePolicy", "ClusterOverridePolicy")?;
    unique_names(&mut loaded.federated_hpas, "FederatedHPA", "FederatedHPA")?;
    unique_names(&mut loaded.cron_federated_hpas, "CronFederatedHPA", "CronFederatedHPA")?;
    unique_names(&mut loaded.multi_cluster_services, "MultiClusterService", "MultiClusterService")?;
    unique_names(&mut loaded.federated_resource_quotas, "FederatedResourceQuota", "FederatedResourceQuota")?;
    unique_names(&mut loaded.cluster_taint_policies, "ClusterTaintPolicy", "ClusterTaintPolicy")?;
    unique_names(&mut loaded.customizations, "ResourceInterpreterCustomization", "ResourceInterpreterCustomization")?;
    unique_names(&mut loaded.helm_charts, "HelmChart", "HelmChart")?;
    scaled_sources(loaded)?;
    interpreted::interpret_templates(loaded)
}

/// The autoscalers write replica counts back into the file that declares their target.
/// A target a chart renders is written through the values key its HelmChart names for it
/// (`spec.replicaValues`); one without that key, or one a kustomization renders, has no
/// file to write to, so it is refused here, with what to do, rather than scaled in the
/// members and never recorded in Git.
fn scaled_sources(loaded: &Loaded) -> Result<(), LoadError> {
    let hpas = loaded.federated_hpas.iter().map(|h| (&h.origin, &h.namespace, &h.spec.scale_target_ref));
    let crons = loaded.cron_federated_hpas.iter().map(|c| (&c.origin, &c.namespace, &c.spec.scale_target_ref));
    for (origin, namespace, target) in hpas.chain(crons) {
        let key = target.key(namespace.as_deref().unwrap_or("default"));
        let Some(template) = loaded.templates.iter().find(|t| t.key == key) else { continue };
        let file = &template.origin.file;
        if !crate::model::source::is_output(file) {
            continue;
        }
        let invalid = |message: String| Err(LoadError::Invalid { origin: origin.clone(), message });
        if !crate::model::source::is_helm_output(file) {
            return invalid(format!(
                "spec.scaleTargetRef: {key} is rendered by a kustomization ({file}), and the autoscaler writes \
                 replicas back to the file that declares its target: declare the workload as a plain manifest, or \
                 leave it out of autoscaling and set its replicas in the kustomization"
            ));
        }
        let entry = format!("- {{kind: {}, name: {}, path: <values key>}}", key.kind, key.name);
        let Some(chart) = crate::sources::replicas::chart_of(&loaded.helm_charts, file) else {
            return invalid(format!(
                "spec.scaleTargetRef: {key} is rendered by a Helm chart ({file}): name the values key that sets its \
                 replicas in its HelmChart's spec.replicaValues ({entry}) and the autoscaler writes the count there"
            ));
        };
        let described = chart.describe("HelmChart", "HelmChart");
        if crate::sources::replicas::entry(chart, &key).is_none() {
            return invalid(format!(
                "spec.scaleTargetRef: {key} is rendered by {described} ({file}): name the values key that sets \
                 its replicas in that HelmChart's spec.replicaValues ({entry}) and the autoscaler writes the count \
                 there"
            ));
        }
    }
    Ok(())
}

fn unique_names<S>(items: &mut [Arc<Named<S>>], namespaced: &str, cluster: &str) -> Result<(), LoadError> {
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for pair in items.windows(2) {
        if (&pair[0].namespace, &pair[0].name) == (&pair[1].namespace, &pair[1].name) {
            return Err(LoadError::Invalid {
                origin: pair[1].origin.clone(),
                message: format!(
                    "{} is declared twice; the other is at {}",
                    pair[1].describe(namespaced, cluster),
                    pair[0].origin
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(kind: &str, name: &str) -> String {
        format!("apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: default\n")
    }

    /// A revision whose files carry ids; `elided` files are listed by id only.
    fn revision(files: &[(&str, &str, &str)], elided: &[&str]) -> RepoFiles {
        let mut repo = RepoFiles::default();
        for (path, id, content) in files {
            repo.ids.insert(path.to_string(), id.to_string());
            if !elided.contains(path) {
                repo.files.insert(path.to_string(), content.as_bytes().to_vec());
            }
        }
        repo
    }

    fn keys(loaded: &Loaded) -> Vec<String> {
        loaded.templates.iter().map(|t| format!("{} @ {}", t.key, t.origin)).collect()
    }

    #[test]
    fn unchanged_files_come_from_the_cache_and_only_the_last_revision_is_held() {
        let (a, b1, b2) =
            (doc("ConfigMap", "a") + "---\n" + &doc("Secret", "s"), doc("ConfigMap", "b"), doc("ConfigMap", "c"));
        let limits = Limits::default();
        let mut cache = ParseCache::default();
        let first = revision(&[("a.yaml", "id-a", &a), ("b.yaml", "id-b1", &b1)], &[]);
        load_cached(&first, &mut cache, &limits).unwrap();
        assert_eq!(cache.size("a.yaml", "id-a"), Some(a.len()));
        // The next revision changes b.yaml; a.yaml is not even read.
        let second = revision(&[("a.yaml", "id-a", ""), ("b.yaml", "id-b2", &b2)], &["a.yaml"]);
        let cached = load_cached(&second, &mut cache, &limits).unwrap();
        let full = load(&revision(&[("a.yaml", "id-a", &a), ("b.yaml", "id-b2", &b2)], &[]), &limits).unwrap();
        assert_eq!(keys(&cached), keys(&full));
        assert_eq!(
            keys(&cached),
            [
                "v1 ConfigMap default/a @ a.yaml: document 1 (line 1)",
                "v1 ConfigMap default/c @ b.yaml: document 1 (line 1)",
                "v1 Secret default/s @ a.yaml: document 2 (line 6)"
            ]
        );
        assert_eq!(cache.len(), 2, "b.yaml's first version is dropped");
        assert_eq!(cache.size("b.yaml", "id-b1"), None);
    }

    #[test]
    fn a_prefilled_cache_loads_as_an_uncached_load_and_drops_what_the_load_did_not_use() {
        let (a, b, broken) = (doc("ConfigMap", "a"), doc("ConfigMap", "b"), "kind: [".to_owned());
        let limits = Limits::default();
        let mut cache = ParseCache::default();
        let ahead = [("a.yaml", "id-a", a.as_bytes()), ("other.yaml", "id-o", b.as_bytes())];
        cache.prefill(ahead.iter().copied().chain([("bad.yaml", "id-x", broken.as_bytes())]), &limits);
        assert_eq!(cache.len(), 2, "the file that does not parse is left to the load");
        let files = revision(&[("a.yaml", "id-a", &a), ("b.yaml", "id-b", &b)], &["a.yaml"]);
        let cached = load_cached(&files, &mut cache, &limits).unwrap();
        let full = load(&revision(&[("a.yaml", "id-a", &a), ("b.yaml", "id-b", &b)], &[]), &limits).unwrap();
        assert_eq!(keys(&cached), keys(&full));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.size("other.yaml", "id-o"), None, "a prefilled file this revision did not hold is dropped");
        // A broken file prefilled nowhere still fails the load with its origin.
        let mut cache = ParseCache::default();
        cache.prefill([("bad.yaml", "id-x", broken.as_bytes())], &limits);
        let failed = load_cached(&revision(&[("bad.yaml", "id-x", &broken)], &[]), &mut cache, &limits);
        let plain = load(&revision(&[("bad.yaml", "id-x", &broken)], &[]), &limits);
        assert_eq!(failed.unwrap_err().to_string(), plain.unwrap_err().to_string());
    }

    #[test]
    fn a_duplicate_key_is_named_with_its_own_line() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n\
                    metadata:\n  name: b\n  labels:\n    team: x\n    team: y\ndata: {}\n";
        let files = revision(&[("cm.yaml", "id", text)], &[]);
        let err = load(&files, &Limits::default()).unwrap_err().to_string();
        assert_eq!(err, "cm.yaml: document 2 (line 11): the key `team` appears twice in one mapping; keep one");
        assert!(!err.contains("DuplicateKeyPolicy"));
        // Control characters in the key are shown, not sent to the terminal.
        let hostile =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  \"k\\e[31m\": 1\n  \"k\\e[31m\": 2\n";
        let err = load(&revision(&[("cm.yaml", "id", hostile)], &[]), &Limits::default()).unwrap_err().to_string();
        assert!(err.starts_with("cm.yaml: document 1 (line 6): the key `k"), "{err}");
        assert!(!err.contains('\u{1b}'), "{err:?}");
    }

    #[test]
    fn cached_templates_are_rescoped_when_a_crd_changes_scope() {
        let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n";
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names: {kind: Widget, plural: widgets}\n";
        let limits = Limits::default();
        let mut cache = ParseCache::default();
        let first = load_cached(&revision(&[("w.yaml", "id-w", widget)], &[]), &mut cache, &limits).unwrap();
        assert_eq!(first.templates[0].key.namespace.as_deref(), Some("default"));
        let second = revision(&[("w.yaml", "id-w", ""), ("crd.yaml", "id-crd", crd)], &["w.yaml"]);
        let second = load_cached(&second, &mut cache, &limits).unwrap();
        let widget = second.templates.iter().find(|t| t.key.kind == "Widget").unwrap();
        assert_eq!(widget.key.namespace, None, "the cached Widget follows the new CRD's scope");
    }

    #[test]
    fn nodes_are_budgeted_per_revision_cached_files_included() {
        // Each document is well under the per-document budget; together they are not.
        let doc = |i: usize| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\nbomb:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n  b: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            )
        };
        let many: String = (0..20).map(doc).collect();
        let limits = Limits { max_total_nodes: 1_500, ..Limits::default() };
        let repo = revision(&[("many.yaml", "m1", &many)], &[]);
        assert_eq!(load(&repo, &limits).unwrap_err(), LoadError::TooManyNodes { limit: 1_500 });
        assert!(load(&repo, &Limits::default()).is_ok());
        // A cached file's nodes count in the next revision, which adds a little more.
        let mut cache = ParseCache::default();
        let half: String = (0..10).map(doc).collect();
        let limits = Limits { max_total_nodes: 2_000, ..Limits::default() };
        load_cached(&revision(&[("half.yaml", "h1", &half)], &[]), &mut cache, &limits).unwrap();
        let next = revision(&[("half.yaml", "h1", &half), ("more.yaml", "x1", &half)], &["half.yaml"]);
        assert_eq!(load_cached(&next, &mut cache, &limits).unwrap_err(), LoadError::TooManyNodes { limit: 2_000 });
    }

    #[test]
    fn a_failed_load_keeps_the_cache_and_reports_as_uncached() {
        let limits = Limits::default();
        let mut cache = ParseCache::default();
        let good = doc("ConfigMap", "a");
        load_cached(&revision(&[("a.yaml", "id-a", &good)], &[]), &mut cache, &limits).unwrap();
        let broken = revision(&[("a.yaml", "id-a", ""), ("b.yaml", "id-b", "key: [unclosed\n")], &["a.yaml"]);
        let cached = load_cached(&broken, &mut cache, &limits).unwrap_err();
        let full = load(&revision(&[("a.yaml", "id-a", &good), ("b.yaml", "id-b", "key: [unclosed\n")], &[]), &limits);
        assert_eq!(Err(cached), full.map(|_| ()));
        assert_eq!(cache.size("a.yaml", "id-a"), Some(good.len()), "still cached after the failure");
        // A file neither read nor cached is an error, not a silently missing file.
        let missing = revision(&[("z.yaml", "id-z", "")], &["z.yaml"]);
        assert!(matches!(load_cached(&missing, &mut cache, &limits), Err(LoadError::Invalid { .. })));
    }

    #[test]
    fn an_autoscaler_of_a_rendered_workload_is_refused_with_what_to_do() {
        let deployment =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {replicas: 2}\n";
        let hpa = "apiVersion: autoscaling.karmada.io/v1alpha1\nkind: FederatedHPA\nmetadata: {name: web, namespace: shop}\n\
                   spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 5}\n";
        let plain = revision(&[("web.yaml", "w", deployment), ("hpa.yaml", "h", hpa)], &[]);
        assert!(load(&plain, &Limits::default()).is_ok());
        let rendered =
            revision(&[("helm:shop/web:web/templates/web.yaml", "w", deployment), ("hpa.yaml", "h", hpa)], &[]);
        let error = load(&rendered, &Limits::default()).unwrap_err().to_string();
        assert!(error.starts_with("hpa.yaml: document 1"), "{error}");
        assert!(error.contains("rendered by a Helm chart (helm:shop/web:web/templates/web.yaml)"), "{error}");
        assert!(error.contains("spec.replicaValues (- {kind: Deployment, name: web, path: <values key>})"), "{error}");
        // A FederatedHPA of another workload is not affected.
        let other = hpa.replace("name: web}", "name: api}");
        let elsewhere =
            revision(&[("helm:shop/web:web/templates/web.yaml", "w", deployment), ("hpa.yaml", "h", &other)], &[]);
        assert!(load(&elsewhere, &Limits::default()).is_ok());
    }
}
