//! A pull request's preview environment: its render moved beside production. Every
//! namespaced object goes into `pr-<N>-<namespace>`, Namespaces are renamed alike (and
//! created where the repository relies on one it does not declare, such as `default`),
//! ServiceAccount subjects of RoleBindings follow their namespace, and cluster-scoped
//! objects are left out (named, so the comment can list them): a preview never shares
//! an object with production or with another preview. Every object carries the pull
//! request's number and the preview's expiry as labels. Pure, after `render` (and
//! `restrict`, so the scope still bounds what a pull request may touch).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::model::plan::{Rendered, Source};
use crate::model::{ObjectKey, Origin, Plan, Template};

/// Label naming the pull request a preview object belongs to.
pub const PREVIEW_LABEL: &str = "flotilla.dev/preview";
/// Label with the preview's expiry (Unix seconds).
pub const EXPIRES_LABEL: &str = "flotilla.dev/preview-expires";
/// Label with the head commit the preview runs.
pub const HEAD_LABEL: &str = "flotilla.dev/preview-head";

/// The longest namespace name Kubernetes accepts (an RFC 1123 label).
const MAX_NAMESPACE: usize = 63;

/// A plan moved into a pull request's namespaces.
#[derive(Debug)]
pub struct Relocated {
    /// The plan to apply, under the preview's own instance.
    pub plan: Plan,
    /// Cluster-scoped objects the preview leaves out.
    pub left_out: Vec<ObjectKey>,
}

/// The namespace that stands for `namespace` in pull request `number`'s preview:
/// `pr-<N>-<namespace>`, or, past 63 characters, cut and ended with a hash of the
/// whole name so that two long names stay apart.
pub fn namespace(number: u64, namespace: &str) -> String {
    crate::model::names::fit(format!("pr-{number}-{namespace}"), MAX_NAMESPACE)
}

/// Which preview: the pull request, the head it runs, and its expiry (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// The pull request's number.
    pub number: u64,
    /// The head commit (a hex object id, which fits a label value).
    pub head: String,
    /// When it is removed unless a push renews it.
    pub expires: u64,
}

/// Moves `plan` into the pull request's namespaces, labelling every object with the
/// stamp, so a restarted controller finds each preview, its head and its expiry in
/// the members themselves.
pub fn relocate(mut plan: Plan, stamp: &Stamp) -> Relocated {
    let number = stamp.number;
    let labels = json!({
        PREVIEW_LABEL: number.to_string(),
        HEAD_LABEL: stamp.head,
        EXPIRES_LABEL: stamp.expires.to_string(),
    });
    let kept: Vec<bool> =
        plan.loaded.templates.iter().map(|t| t.key.namespace.is_some() || is_namespace(&t.key)).collect();
    // Only what some cluster receives is worth naming.
    let mut left_out = BTreeSet::new();
    for items in plan.clusters.values_mut() {
        left_out
            .extend(items.iter().filter(|i| !kept[i.template]).map(|i| plan.loaded.templates[i.template].key.clone()));
        items.retain(|item| kept[item.template]);
    }
    for (template, kept) in plan.loaded.templates.iter_mut().zip(&kept) {
        if *kept {
            *template = Arc::new(moved(template, number, &labels));
        }
    }
    add_missing_namespaces(&mut plan, &labels);
    Relocated { plan, left_out: left_out.into_iter().collect() }
}

/// An expiry (Unix seconds) as a UTC date and time, for the comment.
pub fn expiry_text(unix: u64) -> String {
    let at = i64::try_from(unix).ok().and_then(|s| jiff::Timestamp::from_second(s).ok());
    at.map_or_else(|| format!("{unix} (Unix time)"), |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
}

fn is_namespace(key: &ObjectKey) -> bool {
    key.group().is_empty() && key.kind == "Namespace"
}

/// One template moved: its namespace (or, for a Namespace, its name), the namespace of
/// ServiceAccount subjects of a RoleBinding, and the preview's labels.
fn moved(template: &Template, number: u64, labels: &Value) -> Template {
    let mut key = template.key.clone();
    let mut object = template.object();
    if is_namespace(&key) {
        key.name = namespace(number, &key.name);
        object["metadata"]["name"] = Value::from(key.name.clone());
    } else if let Some(ns) = &key.namespace {
        let ns = namespace(number, ns);
        object["metadata"]["namespace"] = Value::from(ns.clone());
        key.namespace = Some(ns);
    }
    if key.group() == "rbac.authorization.k8s.io"
        && key.kind == "RoleBinding"
        && let Some(Value::Array(subjects)) = object.get_mut("subjects")
    {
        for subject in subjects.iter_mut().filter(|s| s["kind"] == "ServiceAccount") {
            let within = subject["namespace"].as_str().or(template.key.namespace.as_deref()).map(str::to_owned);
            if let Some(ns) = within {
                subject["namespace"] = Value::from(namespace(number, &ns));
            }
        }
    }
    label(&mut object, labels);
    Template {
        derived_from: template.derived_from.clone(),
        ..Template::new(key, template.labels.clone(), &object, template.origin.clone())
    }
}

fn label(object: &mut Value, labels: &Value) {
    let metadata = &mut object["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    for (k, v) in labels.as_object().into_iter().flatten() {
        metadata["labels"][k] = v.clone();
    }
}

/// Adds, per cluster, the preview Namespaces its objects need and the plan does not
/// declare there (production relies on `default` existing; a preview cannot).
fn add_missing_namespaces(plan: &mut Plan, labels: &Value) {
    let mut added: BTreeMap<String, usize> = BTreeMap::new();
    let templates = &mut plan.loaded.templates;
    for items in plan.clusters.values_mut() {
        let present: BTreeSet<String> = items
            .iter()
            .map(|i| &templates[i.template].key)
            .filter(|k| is_namespace(k))
            .map(|k| k.name.clone())
            .collect();
        let needed: BTreeSet<String> =
            items.iter().filter_map(|i| templates[i.template].key.namespace.clone()).collect();
        for ns in needed.difference(&present) {
            let index = *added.entry(ns.clone()).or_insert_with(|| {
                let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                label(&mut object, labels);
                let key =
                    ObjectKey { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, name: ns.clone() };
                let origin = Origin { file: "(preview)".into(), document: 0, line: 0 };
                templates.push(Arc::new(Template::new(key, Default::default(), &object, origin)));
                templates.len() - 1
            });
            items.push(Rendered {
                template: index,
                replicas: None,
                completions: None,
                overrides: Vec::new(),
                source: Source::Dependency { overwrite: false, preserve: false },
                suspended: false,
            });
        }
        items.sort_by(|a, b| templates[a.template].key.cmp(&templates[b.template].key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterState, Limits, RepoFiles};

    const FLEET: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: m1}\nspec: {syncMode: Push}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2, template: {spec: {containers: [{name: c, image: nginx}]}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: read, namespace: shop}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}\nsubjects: [{kind: ServiceAccount, name: app}, {kind: ServiceAccount, name: other, namespace: default}, {kind: User, name: jane}]\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: all}\nspec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}, {apiVersion: v1, kind: ConfigMap}, {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole}, {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}]\n  placement: {clusterAffinity: {clusterNames: [m1]}}\n";

    fn plan() -> Plan {
        let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
        files.files.insert("fleet.yaml".into(), FLEET.as_bytes().to_vec());
        crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap()
    }

    fn manifests(plan: &Plan) -> BTreeMap<String, Value> {
        let items = &plan.clusters["m1"];
        items.iter().map(|i| (plan.loaded.templates[i.template].key.spelled(), plan.manifest(i).unwrap())).collect()
    }

    #[test]
    fn objects_move_into_the_pull_requests_namespaces() {
        let stamp = Stamp { number: 7, head: "0d1a26e67d8f".into(), expires: 1_800_000_000 };
        let relocated = relocate(plan(), &stamp);
        let objects = manifests(&relocated.plan);
        let keys: Vec<&str> = objects.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "apps/v1/Deployment/pr-7-default/web",
                "rbac.authorization.k8s.io/v1/RoleBinding/pr-7-shop/read",
                "v1/ConfigMap/pr-7-shop/cfg",
                "v1/Namespace//pr-7-default",
                "v1/Namespace//pr-7-shop",
            ],
            "{keys:?}"
        );
        let web = &objects["apps/v1/Deployment/pr-7-default/web"];
        assert_eq!(web["metadata"]["namespace"], "pr-7-default");
        assert_eq!(web["metadata"]["labels"][PREVIEW_LABEL], "7");
        assert_eq!(web["metadata"]["labels"][EXPIRES_LABEL], "1800000000");
        assert_eq!(web["metadata"]["labels"][HEAD_LABEL], "0d1a26e67d8f");
        assert_eq!(web["spec"]["replicas"], 2);
        let subjects = &objects["rbac.authorization.k8s.io/v1/RoleBinding/pr-7-shop/read"]["subjects"];
        assert_eq!(subjects[0]["namespace"], "pr-7-shop", "a subject without namespace is the binding's own");
        assert_eq!(subjects[1]["namespace"], "pr-7-default");
        assert!(subjects[2].get("namespace").is_none(), "users have no namespace");
        assert_eq!(objects["v1/Namespace//pr-7-default"]["metadata"]["labels"][PREVIEW_LABEL], "7");
        let left: Vec<String> = relocated.left_out.iter().map(ObjectKey::spelled).collect();
        assert_eq!(left, ["rbac.authorization.k8s.io/v1/ClusterRole//reader"]);
    }

    #[test]
    fn expiries_read_as_utc() {
        assert_eq!(expiry_text(1_800_000_000), "2027-01-15 08:00 UTC");
    }

    #[test]
    fn long_names_are_cut_to_63_characters_and_stay_apart() {
        assert_eq!(namespace(12, "default"), "pr-12-default");
        let (a, b) = (namespace(12, &"a".repeat(60)), namespace(12, &format!("{}b", "a".repeat(59))));
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.starts_with("pr-12-aaaa") && !a.ends_with('-'), "{a}");
    }
}
