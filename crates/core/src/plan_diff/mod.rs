//! What changes between two renders, per cluster: objects added, changed (with their
//! fields) and removed, and the problems new in the later one. Pure: the CLI renders
//! both revisions and hands the plans in; a PR plan is this and a formatter.
//!
//! Secret values never appear: `data` and `stringData` of a Secret are compared, and
//! shown as `++++++++` (Argo CD's mask; `+++++++++` for a changed value), so a diff says
//! that a value changed, not what it became.

#[cfg(test)]
mod hostile;
pub mod live;
pub mod markdown;
pub mod waves;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::model::plan::Rendered;
use crate::model::{ObjectKey, Plan, Problem};

/// The mask shown instead of a Secret value.
pub const MASK: &str = "++++++++";

/// Two renders compared (`-o json` is this, serialised).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlanDiff {
    /// The earlier revision.
    pub from: String,
    /// The later revision.
    pub to: String,
    /// Per cluster in either render: what changes there (clusters without changes are
    /// left out).
    pub clusters: BTreeMap<String, ClusterDiff>,
    /// Problems of the later render that the earlier one did not have.
    pub problems: Vec<Problem>,
    /// The waves the changes move in, per RolloutPolicy that governs some of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<waves::RolloutPlan>,
}

/// One cluster's changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClusterDiff {
    /// Objects the later render places here and the earlier did not.
    pub added: Vec<Entry>,
    /// Objects in both whose manifests differ.
    pub changed: Vec<Changed>,
    /// Objects the earlier render placed here and the later does not.
    pub removed: Vec<Entry>,
    /// Objects the member refused in a live plan (`--live`): a conflict, an invalid
    /// field, a kind it does not serve.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Failed>,
}

impl ClusterDiff {
    /// `A added, C changed, R removed`.
    pub fn summary(&self) -> String {
        format!("{} added, {} changed, {} removed", self.added.len(), self.changed.len(), self.removed.len())
    }
}

/// An object a member would refuse, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failed {
    /// Which object.
    #[serde(flatten)]
    pub object: Entry,
    /// The member's reason.
    pub reason: String,
}

/// An object, by its identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.replicas` of an added or removed workload, on the side it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Override rules applied to an added or removed object, on the side it exists
    /// (`OverridePolicy ns/name rule N`, in the order they apply).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
}

/// A changed object and its changed fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed {
    /// Which object.
    #[serde(flatten)]
    pub object: Entry,
    /// The fields that differ, in document order.
    pub fields: Vec<FieldChange>,
    /// Override rules that apply in the later render and did not in the earlier.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overrides_added: Vec<String>,
    /// Override rules that applied in the earlier render and no longer do.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overrides_removed: Vec<String>,
}

/// One field that differs: absent on one side when added or removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// Dotted path (`spec.replicas`, `spec.template.spec.containers[0].image`).
    pub path: String,
    /// The earlier value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    /// The later value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
}

impl From<&ObjectKey> for Entry {
    fn from(key: &ObjectKey) -> Self {
        Entry {
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
            namespace: key.namespace.clone().unwrap_or_default(),
            name: key.name.clone(),
            replicas: None,
            overrides: Vec::new(),
        }
    }
}

impl Entry {
    fn placed(key: &ObjectKey, side: &Side) -> Self {
        Entry {
            replicas: side.manifest.pointer("/spec/replicas").and_then(Value::as_i64),
            overrides: side.overrides.clone(),
            ..Entry::from(key)
        }
    }
}

/// One object of one cluster in one render: its manifest and the override rules that
/// made it.
struct Side {
    manifest: Value,
    overrides: Vec<String>,
}

impl PlanDiff {
    /// Whether anything differs.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty() && self.problems.is_empty()
    }
}

/// Compares two renders, limited to `only` clusters when it is not empty. A manifest
/// whose overrides fail is left out of its side (the failure is a problem of that
/// render).
pub fn diff(from: &Plan, to: &Plan, only: &[String]) -> PlanDiff {
    let names: BTreeSet<&String> = from.clusters.keys().chain(to.clusters.keys()).collect();
    let mut clusters = BTreeMap::new();
    for name in names.into_iter().filter(|n| only.is_empty() || only.contains(n)) {
        let (before, after) = (placed(from, name), placed(to, name));
        let mut cluster = ClusterDiff::default();
        for (key, new) in &after {
            match before.get(key) {
                None => cluster.added.extend(side(to, new).map(|s| Entry::placed(key, &s))),
                // The same template text, deltas and override rules: the same manifest,
                // not worth building twice (revisions rendered through one parse cache
                // share what did not change).
                Some(old) if same(from, old, to, new) => {}
                Some(old) => {
                    if let (Some(old), Some(new)) = (side(from, old), side(to, new)) {
                        cluster.changed.extend(changed(key, &old, &new));
                    }
                }
            }
        }
        let gone = before.iter().filter(|(k, _)| !after.contains_key(*k));
        cluster.removed = gone.filter_map(|(k, r)| side(from, r).map(|s| Entry::placed(k, &s))).collect();
        if cluster != ClusterDiff::default() {
            clusters.insert(name.clone(), cluster);
        }
    }
    let known: BTreeSet<(String, Option<&str>, &str)> =
        from.problems.iter().map(|p| (p.object.spelled(), p.cluster.as_deref(), p.message.as_str())).collect();
    let problems = to
        .problems
        .iter()
        .filter(|p| !known.contains(&(p.object.spelled(), p.cluster.as_deref(), p.message.as_str())))
        .cloned()
        .collect();
    let rollouts = waves::plans(from, to, only);
    PlanDiff { from: from.revision.clone(), to: to.revision.clone(), clusters, problems, rollouts }
}

/// How one object differs between two sides, if it does.
fn changed(key: &ObjectKey, old: &Side, new: &Side) -> Option<Changed> {
    let mut fields = Vec::new();
    let (before, after) = masked(key, &old.manifest, &new.manifest);
    fields_between(&before, &after, &mut String::new(), &mut fields);
    let missing = |a: &Side, b: &Side| -> Vec<String> {
        a.overrides.iter().filter(|rule| !b.overrides.contains(rule)).cloned().collect()
    };
    let (overrides_added, overrides_removed) = (missing(new, old), missing(old, new));
    let any = !fields.is_empty() || !overrides_added.is_empty() || !overrides_removed.is_empty();
    any.then(|| Changed { object: Entry::from(key), fields, overrides_added, overrides_removed })
}

/// What one render places in one cluster, by key.
fn placed<'p>(plan: &'p Plan, cluster: &str) -> BTreeMap<&'p ObjectKey, &'p Rendered> {
    let items = plan.clusters.get(cluster).into_iter().flatten();
    items.map(|item| (&plan.loaded.templates[item.template].key, item)).collect()
}

/// Whether two placed objects are certainly the same manifest: one template text (the
/// parse cache shares it between revisions), the same deltas, the same override rules.
pub(crate) fn same(from: &Plan, a: &Rendered, to: &Plan, b: &Rendered) -> bool {
    let (ta, tb) = (&from.loaded.templates[a.template], &to.loaded.templates[b.template]);
    let rules_same = a.overrides.len() == b.overrides.len()
        && a.overrides.iter().zip(&b.overrides).all(|(x, y)| {
            x.rule == y.rule
                && Arc::ptr_eq(&from.loaded.override_policies[x.policy], &to.loaded.override_policies[y.policy])
        });
    ta.key == tb.key
        && ta.body.same(&tb.body)
        && (a.replicas, a.completions, a.suspended) == (b.replicas, b.completions, b.suspended)
        && rules_same
}

/// One placed object's manifest and the rules that made it; `None` when its overrides
/// fail (a problem of that render).
fn side(plan: &Plan, item: &Rendered) -> Option<Side> {
    let rule = |r: &crate::overrides::RuleRef| {
        let policy = &plan.loaded.override_policies[r.policy];
        format!("{} rule {}", policy.describe("OverridePolicy", "ClusterOverridePolicy"), r.rule)
    };
    Some(Side { manifest: plan.manifest(item).ok()?, overrides: item.overrides.iter().map(rule).collect() })
}

/// The top-level fields of a Secret that hold no value of it; every other field is
/// masked whatever its shape, so a mis-indented value (`password:` beside `stringData:`),
/// `data` written as one string or a list, or turned into a string by an override, is
/// masked too.
const SECRET_PLAIN_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "type", "immutable"];

/// The annotation `kubectl apply` copies a whole object into, values included.
const LAST_APPLIED: &str = "/annotations/kubectl.kubernetes.io~1last-applied-configuration";

/// Both sides of a Secret with every value masked, as Argo CD masks them: an unchanged
/// value is `++++++++` on both sides, a changed one `++++++++` before and `+++++++++`
/// after, so the diff shows that it changed and nothing of what it is (not even a
/// digest a weak password could be guessed from). Masked by kind: under a map the keys
/// stay visible and each value is masked; any other shape is masked whole.
fn masked(key: &ObjectKey, before: &Value, after: &Value) -> (Value, Value) {
    let (mut before, mut after) = (before.clone(), after.clone());
    if !(key.group().is_empty() && key.kind == "Secret") {
        return (before, after);
    }
    mask_secret(&mut after, Some(&before));
    mask_secret(&mut before, None);
    (before, after)
}

/// A Secret with every value masked (`++++++++`), its keys left visible: for printing a
/// live one.
pub fn mask_secret_values(secret: &mut Value) {
    mask_secret(secret, None);
}

/// Masks every value of one side of a Secret; with `earlier` (the other side, for the
/// later one), a value that differs from the earlier one is marked changed.
fn mask_secret(secret: &mut Value, earlier: Option<&Value>) {
    let Some(fields) = secret.as_object_mut() else { return };
    for (name, value) in fields.iter_mut() {
        let was = earlier.and_then(|e| e.get(name));
        if name == "metadata" {
            if let Some(annotation) = value.pointer_mut(LAST_APPLIED) {
                *annotation = mask(annotation, was.and_then(|m| m.pointer(LAST_APPLIED)), earlier.is_some());
            }
        } else if SECRET_PLAIN_FIELDS.contains(&name.as_str()) {
            continue;
        } else if let Value::Object(entries) = value {
            for (entry, value) in entries.iter_mut() {
                *value = mask(value, was.and_then(|w| w.get(entry)), earlier.is_some());
            }
        } else {
            *value = mask(value, was, earlier.is_some());
        }
    }
}

/// The mask for one value: changed when it is the later side and differs from an
/// earlier value that existed.
fn mask(value: &Value, was: Option<&Value>, later: bool) -> Value {
    let changed = later && was.is_some_and(|was| was != value);
    Value::from(if changed { format!("{MASK}+") } else { MASK.to_owned() })
}

/// Every leaf that differs between `a` and `b`, with its dotted path, in path order.
pub fn field_changes(a: &Value, b: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    fields_between(a, b, &mut String::new(), &mut out);
    out
}

/// Leaf differences between `a` and `b`, with dotted paths.
fn fields_between(a: &Value, b: &Value, path: &mut String, out: &mut Vec<FieldChange>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => fields_between(u, v, path, out),
                    (u, v) => out.push(FieldChange { path: path.clone(), from: u.cloned(), to: v.cloned() }),
                }
                path.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                match (x.get(i), y.get(i)) {
                    (Some(u), Some(v)) => fields_between(u, v, path, out),
                    (u, v) => out.push(FieldChange { path: path.clone(), from: u.cloned(), to: v.cloned() }),
                }
                path.truncate(len);
            }
        }
        _ if a != b => out.push(FieldChange { path: path.clone(), from: Some(a.clone()), to: Some(b.clone()) }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{ClusterState, Limits, RepoFiles};

    /// A fleet of two clusters, a Deployment and a Secret, as text to tweak, then plan.
    struct Fleet {
        revision: String,
        text: String,
    }

    impl Fleet {
        fn with_selectors(self, selectors: &str) -> Plan {
            let text = self
                .text
                .replace("[{apiVersion: apps/v1, kind: Deployment}, {apiVersion: v1, kind: Secret}]", selectors);
            Fleet { text, ..self }.plan()
        }

        fn with_clusters(self, clusters: &str) -> Plan {
            let text = self.text.replace("clusterNames: [m1, m2]", &format!("clusterNames: {clusters}"));
            Fleet { text, ..self }.plan()
        }

        fn plan(self) -> Plan {
            let mut files = RepoFiles { revision: self.revision, ..Default::default() };
            files.files.insert("fleet.yaml".into(), self.text.into_bytes());
            crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap()
        }
    }

    fn plan(revision: &str, replicas: i64, secret: &str, extra: &str) -> Fleet {
        let text = format!(
            "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: m1}}\nspec: {{syncMode: Push}}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: m2}}\nspec: {{syncMode: Push}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {replicas}\n  template: {{spec: {{containers: [{{name: c, image: nginx}}]}}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: creds}}\nstringData: {{password: {secret}}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}, {{apiVersion: v1, kind: Secret}}{extra}]\n  placement:\n    clusterAffinity: {{clusterNames: [m1, m2]}}\n    replicaScheduling: {{replicaSchedulingType: Divided}}\n"
        );
        Fleet { revision: revision.into(), text }
    }

    #[test]
    fn placement_replica_splits_and_field_changes_per_cluster() {
        // Divided by equal weights: 1 replica goes to m1 alone, 10 split 5/5.
        let from = plan("r1", 1, "hunter2", "").plan();
        let to = plan("r2", 10, "hunter2", "").plan();
        let d = diff(&from, &to, &[]);
        assert_eq!((d.from.as_str(), d.to.as_str()), ("r1", "r2"));
        let m1 = &d.clusters["m1"];
        assert_eq!(m1.changed.len(), 1);
        assert_eq!(m1.changed[0].object.name, "web");
        assert_eq!(m1.changed[0].fields[0].path, "spec.replicas");
        assert_eq!(
            (m1.changed[0].fields[0].from.clone(), m1.changed[0].fields[0].to.clone()),
            (Some(json!(1)), Some(json!(5)))
        );
        let m2 = &d.clusters["m2"];
        assert_eq!(m2.added.iter().map(|e| (e.name.as_str(), e.replicas)).collect::<Vec<_>>(), [("web", Some(5))]);
        assert!(diff(&from, &from, &[]).is_empty());
        assert_eq!(diff(&from, &to, &["m2".to_owned()]).clusters.keys().collect::<Vec<_>>(), ["m2"]);
    }

    #[test]
    fn secret_values_are_masked_but_their_change_shows() {
        let d = diff(&plan("r1", 1, "hunter2", "").plan(), &plan("r2", 1, "correct-horse", "").plan(), &[]);
        let text = serde_json::to_string(&d).unwrap();
        assert!(!text.contains("hunter2") && !text.contains("correct-horse"), "{text}");
        let change = &d.clusters["m1"].changed[0];
        assert_eq!((change.object.kind.as_str(), change.fields[0].path.as_str()), ("Secret", "stringData.password"));
        assert!(change.fields[0].from.as_ref().unwrap().as_str().unwrap().starts_with(MASK));
        assert_ne!(change.fields[0].from, change.fields[0].to);
    }

    #[test]
    fn secret_values_are_masked_whatever_their_shape() {
        let secret = |body: &str| {
            serde_json::from_str::<Value>(&format!(
                r#"{{"apiVersion": "v1", "kind": "Secret", "metadata": {{"name": "s"}}, {body}}}"#
            ))
            .unwrap()
        };
        let key = ObjectKey::new("v1", "Secret", Some("default"), "s");
        let cases = [
            // Mis-indented: the value sits beside stringData, not under it.
            (r#""stringData": null"#, r#""stringData": null, "password": "correct-horse-battery""#),
            // data as one base64 string, as a list, as a number.
            (r#""data": "aHVudGVyMg==""#, r#""data": "Y29ycmVjdC1ob3JzZQ==""#),
            (r#""data": ["hunter2"]"#, r#""data": ["correct-horse-battery"]"#),
            (r#""data": {"p": "aHVudGVyMg=="}"#, r#""data": "Y29ycmVjdC1ob3JzZQ==""#),
            (
                r#""stringData": {"p": "hunter2"}, "type": "Opaque""#,
                r#""stringData": {"p": "correct-horse-battery"}, "type": "Opaque""#,
            ),
        ];
        for (before, after) in cases {
            let (b, a) = masked(&key, &secret(before), &secret(after));
            let mut fields = Vec::new();
            fields_between(&b, &a, &mut String::new(), &mut fields);
            let shown = serde_json::to_string(&fields).unwrap();
            for value in ["hunter2", "aHVudGVyMg", "correct-horse", "Y29ycmVjdC1ob3JzZQ"] {
                assert!(!shown.contains(value), "{value} shown for {after}: {shown}");
            }
            assert!(!fields.is_empty() && shown.contains(MASK), "the change still shows: {shown}");
        }
        let annotated = |password: &str| {
            let applied = format!(r#"{{"stringData":{{"p":"{password}"}}}}"#);
            let annotations =
                serde_json::json!({"kubectl.kubernetes.io/last-applied-configuration": applied, "team": "a"});
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": annotations}})
        };
        let (b, a) = masked(&key, &annotated("hunter2"), &annotated("correct-horse"));
        let text = format!("{b} {a}");
        assert!(
            !text.contains("hunter2") && !text.contains("correct-horse") && text.contains(r#""team":"a""#),
            "{text}"
        );
        // Only Secrets are masked.
        let config = serde_json::json!({"kind": "ConfigMap", "data": "plain"});
        assert_eq!(masked(&ObjectKey::new("v1", "ConfigMap", Some("default"), "c"), &config, &config).0, config);
    }

    #[test]
    fn override_rules_that_start_to_apply_are_named() {
        let mut with = plan("r2", 1, "x", "");
        with.text += "---\napiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: tag, namespace: default}\nspec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  overrideRules:\n  - targetCluster: {clusterNames: [m1]}\n    overriders: {labelsOverrider: [{operator: add, value: {tier: web}}]}\n";
        let d = diff(&plan("r1", 1, "x", "").plan(), &with.plan(), &[]);
        let web = &d.clusters["m1"].changed[0];
        assert_eq!(web.overrides_added, ["OverridePolicy default/tag rule 0"]);
        assert_eq!(web.fields[0].path, "metadata.labels.tier");
        assert!(!d.clusters.contains_key("m2"), "the rule targets m1 only");
    }

    #[test]
    fn revisions_sharing_a_parse_cache_still_show_placement_changes() {
        let fleet = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: m1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: m2}\nspec: {syncMode: Push}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2, template: {spec: {containers: [{name: c, image: nginx}]}}}\n";
        let policy = |clusters: &str| {
            format!(
                "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}]\n  placement:\n    clusterAffinity: {{clusterNames: {clusters}}}\n    replicaScheduling: {{replicaSchedulingType: Divided}}\n"
            )
        };
        let mut cache = crate::load::ParseCache::default();
        let mut render = |revision: &str, clusters: &str| {
            let mut files = RepoFiles { revision: revision.into(), ..Default::default() };
            files.files.insert("fleet.yaml".into(), fleet.as_bytes().to_vec());
            files.files.insert("policy.yaml".into(), policy(clusters).into_bytes());
            // As Git lists them: blob ids by content.
            files.ids.insert("fleet.yaml".into(), "blob-fleet".into());
            files.ids.insert("policy.yaml".into(), format!("blob-policy-{clusters}"));
            let loaded = crate::load::load_cached(&files, &mut cache, &Limits::default()).unwrap();
            crate::plan_loaded(loaded, files.revision, &ClusterState::default())
        };
        let (one, two) = (render("r1", "[m1]"), render("r2", "[m1, m2]"));
        let web = |p: &Plan| p.loaded.templates.iter().find(|t| t.key.name == "web").unwrap().body.clone();
        assert!(web(&one).same(&web(&two)), "the unchanged file is shared");
        let d = diff(&one, &two, &[]);
        assert_eq!(d.clusters["m1"].changed[0].fields[0].to, Some(json!(1)), "{d:?}");
        assert_eq!(d.clusters["m2"].added[0].replicas, Some(1));
        assert!(diff(&two, &render("r3", "[m1, m2]"), &[]).is_empty());
    }

    #[test]
    fn removed_objects_and_new_problems() {
        // The later revision drops the Secret from the policy: removed everywhere.
        let without = plan("r2", 1, "x", "").with_selectors("[{apiVersion: apps/v1, kind: Deployment}]");
        let d = diff(&plan("r1", 1, "x", "").plan(), &without, &[]);
        assert_eq!(d.clusters["m1"].removed.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["Secret"]);
        // A policy that names a cluster that does not exist: a problem new in `to`.
        let nowhere = plan("r3", 1, "x", "").with_clusters("[m9]");
        let d = diff(&plan("r1", 1, "x", "").plan(), &nowhere, &[]);
        assert!(
            !d.problems.is_empty() && d.problems.iter().all(|p| p.reason == crate::model::ProblemReason::Unschedulable)
        );
        assert!(diff(&nowhere, &nowhere, &[]).problems.is_empty(), "old problems are not new");
    }
}
