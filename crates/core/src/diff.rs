//! Stage 6, `diff`: desired objects against what a cluster has — what to apply, what
//! to prune, and whether a live object drifted. Pure: the executor fetches the live
//! objects and the inventory and passes them in.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::Value;

use crate::inventory::Inventory;
use crate::model::ObjectKey;
use crate::schedule::capacity::milli;

/// Annotation holding a digest of the manifest flotilla last applied.
pub const APPLIED_DIGEST: &str = "flotilla.dev/applied-digest";

/// Annotation that keeps an object in its cluster when it leaves Git (`disabled`).
pub const PRUNE_ANNOTATION: &str = "flotilla.dev/prune";

/// Whether a live object opted out of prune, in any of the spellings users bring along:
/// ours (`flotilla.dev/prune: disabled`), Flux's (`kustomize.toolkit.fluxcd.io/prune:
/// disabled`) and Argo CD's (`Prune=false` among `argocd.argoproj.io/sync-options`).
pub fn prune_disabled<'a>(mut annotation: impl FnMut(&str) -> Option<&'a str>) -> bool {
    let disabled = |v: Option<&str>| v.is_some_and(|v| v.trim() == "disabled");
    disabled(annotation(PRUNE_ANNOTATION))
        || disabled(annotation("kustomize.toolkit.fluxcd.io/prune"))
        || annotation("argocd.argoproj.io/sync-options")
            .is_some_and(|options| options.split(',').any(|o| o.trim() == "Prune=false"))
}

/// Why a prune was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PruneRefused {
    /// Nothing is desired at all: an empty render never prunes.
    #[error("the render for this cluster is empty; refusing to prune {0} objects")]
    EmptyRender(usize),
    /// More than the budget would go.
    #[error("pruning {count} of {inventory} objects is over the deletion budget of {percent}%; use --force-prune")]
    OverBudget {
        /// Objects to delete.
        count: usize,
        /// Objects in the inventory.
        inventory: usize,
        /// The budget.
        percent: u8,
    },
}

/// Deletion safety settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneBudget {
    /// Largest share of the inventory one run may delete, in percent.
    pub percent: u8,
    /// Skip the budget and the empty-render guard (`--force-prune`).
    pub force: bool,
}

impl Default for PruneBudget {
    fn default() -> Self {
        Self { percent: 50, force: false }
    }
}

/// Objects to delete: in the inventory, no longer desired, and not `protected` (objects
/// with render problems or suspended dispatching keep what they have). Refused when the
/// render is empty or the share is over budget, unless forced.
pub fn select_prune(
    desired: &BTreeSet<ObjectKey>,
    inventory: &Inventory,
    protected: &BTreeSet<ObjectKey>,
    budget: PruneBudget,
) -> Result<Vec<ObjectKey>, PruneRefused> {
    let gone: Vec<ObjectKey> =
        inventory.objects.iter().filter(|k| !desired.contains(*k) && !protected.contains(*k)).cloned().collect();
    if gone.is_empty() || budget.force {
        return Ok(gone);
    }
    if desired.is_empty() {
        return Err(PruneRefused::EmptyRender(gone.len()));
    }
    if gone.len() * 100 > inventory.objects.len() * usize::from(budget.percent) {
        return Err(PruneRefused::OverBudget {
            count: gone.len(),
            inventory: inventory.objects.len(),
            percent: budget.percent,
        });
    }
    Ok(gone)
}

/// Order of application: Namespaces, then CRDs, then everything else; deletion runs in
/// the reverse order.
pub fn apply_rank(key: &ObjectKey) -> u8 {
    match (key.group(), key.kind.as_str()) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        _ => 2,
    }
}

/// A stable digest of a manifest (FNV-1a 64 over its canonical JSON; keys are sorted).
/// Not a security boundary: it only tells "the same manifest as last time".
pub fn digest(manifest: &Value) -> String {
    let text = serde_json::to_string(manifest).expect("a JSON value serialises");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// Why an object must be (re)applied; `None` when the live object already matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Not in the cluster.
    Missing,
    /// The manifest changed since flotilla last applied it.
    Changed,
    /// Someone changed a field flotilla sets; the path of the first difference.
    Drifted(String),
}

/// Compares the manifest to apply (with its [`APPLIED_DIGEST`] annotation) to the live
/// object. Only fields the manifest sets are compared, so server defaults and fields
/// other controllers add are ignored; values the API server normalises (quantities such
/// as `0.5` → `500m`, `1024Mi` → `1Gi`, integers written as floats) compare by value.
pub fn change(desired: &Value, live: Option<&Value>) -> Option<Change> {
    let Some(live) = live else { return Some(Change::Missing) };
    let digest_of = |v: &Value| v.pointer("/metadata/annotations").and_then(|a| a.get(APPLIED_DIGEST)).cloned();
    if digest_of(desired) != digest_of(live) {
        return Some(Change::Changed);
    }
    let mut path = String::new();
    first_difference(desired, live, &mut path).then_some(Change::Drifted(path))
}

/// True when `desired` is not contained in `live`; `path` is left at the difference.
fn first_difference(desired: &Value, live: &Value, path: &mut String) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().any(|(k, dv)| {
            let len = path.len();
            path.push('/');
            path.push_str(k);
            let differs = match l.get(k) {
                Some(lv) => first_difference(dv, lv, path),
                None => !is_empty(dv),
            };
            if !differs {
                path.truncate(len);
            }
            differs
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() != l.len()
                || d.iter().zip(l).enumerate().any(|(i, (dv, lv))| {
                    let len = path.len();
                    let _ = write!(path, "/{i}");
                    let differs = first_difference(dv, lv, path);
                    if !differs {
                        path.truncate(len);
                    }
                    differs
                })
        }
        (d, l) => !same_scalar(d, l),
    }
}

/// The API server drops empty maps, lists and nulls in many places.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn same_scalar(d: &Value, l: &Value) -> bool {
    if d == l {
        return true;
    }
    match (d, l) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => milli(a).is_some_and(|x| milli(b) == Some(x)),
        (Value::Number(a), Value::String(b)) | (Value::String(b), Value::Number(a)) => {
            milli(&a.to_string()).is_some_and(|x| milli(b) == Some(x))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prune_can_be_disabled_in_flotilla_flux_and_argo_cd_spellings() {
        let check = |pairs: &[(&str, &str)]| {
            let map: std::collections::BTreeMap<&str, &str> = pairs.iter().copied().collect();
            prune_disabled(|k| map.get(k).copied())
        };
        assert!(check(&[(PRUNE_ANNOTATION, "disabled")]));
        assert!(check(&[("kustomize.toolkit.fluxcd.io/prune", "disabled")]));
        assert!(check(&[("argocd.argoproj.io/sync-options", "ServerSideApply=true, Prune=false")]));
        assert!(!check(&[]));
        assert!(!check(&[(PRUNE_ANNOTATION, "enabled")]));
        assert!(!check(&[("argocd.argoproj.io/sync-options", "Prune=true")]));
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("v1", "ConfigMap", Some("ns"), name)
    }

    fn inventory(names: &[&str]) -> Inventory {
        Inventory { revision: "r".into(), source: None, objects: names.iter().map(|n| key(n)).collect() }
    }

    #[test]
    fn prune_takes_what_left_the_plan_but_not_protected_objects() {
        let desired: BTreeSet<_> = [key("a"), key("b"), key("c")].into();
        let protected: BTreeSet<_> = [key("e")].into();
        let got = select_prune(&desired, &inventory(&["a", "b", "c", "d", "e"]), &protected, PruneBudget::default());
        assert_eq!(got, Ok(vec![key("d")]));
    }

    #[test]
    fn an_empty_render_never_prunes_and_big_deletions_need_force() {
        let empty = BTreeSet::new();
        let inv = inventory(&["a", "b"]);
        assert_eq!(select_prune(&empty, &inv, &empty, PruneBudget::default()), Err(PruneRefused::EmptyRender(2)));
        let desired: BTreeSet<_> = [key("a")].into();
        let inv = inventory(&["a", "b", "c"]);
        assert!(matches!(
            select_prune(&desired, &inv, &empty, PruneBudget::default()),
            Err(PruneRefused::OverBudget { .. })
        ));
        let forced = PruneBudget { force: true, ..Default::default() };
        assert_eq!(select_prune(&desired, &inv, &empty, forced).unwrap().len(), 2);
        let half: BTreeSet<_> = [key("a"), key("b")].into();
        assert_eq!(
            select_prune(&half, &inventory(&["a", "b", "c", "d"]), &empty, PruneBudget::default()).unwrap().len(),
            2
        );
    }

    #[test]
    fn server_defaults_and_normalised_quantities_are_not_drift() {
        let desired = json!({"metadata": {"annotations": {APPLIED_DIGEST: "x"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}}}]}}, "strategy": {}}});
        let live = json!({"metadata": {"annotations": {APPLIED_DIGEST: "x", "deployment.kubernetes.io/revision": "1"}, "uid": "u"},
            "spec": {"replicas": 2.0, "progressDeadlineSeconds": 600, "template": {"spec": {"containers": [{"name": "c", "imagePullPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}},
            "status": {"replicas": 2}});
        assert_eq!(change(&desired, Some(&live)), None);
    }

    #[test]
    fn edits_to_fields_flotilla_sets_are_drift() {
        let desired = json!({"metadata": {"annotations": {APPLIED_DIGEST: "x"}}, "spec": {"replicas": 2, "ports": [{"port": 80}]}});
        let live = json!({"metadata": {"annotations": {APPLIED_DIGEST: "x"}}, "spec": {"replicas": 5, "ports": [{"port": 80}]}});
        assert_eq!(change(&desired, Some(&live)), Some(Change::Drifted("/spec/replicas".into())));
        let live = json!({"metadata": {"annotations": {APPLIED_DIGEST: "x"}}, "spec": {"replicas": 2, "ports": [{"port": 81}]}});
        assert_eq!(change(&desired, Some(&live)), Some(Change::Drifted("/spec/ports/0/port".into())));
        let live = json!({"metadata": {"annotations": {APPLIED_DIGEST: "old"}}, "spec": {"replicas": 2}});
        assert_eq!(change(&desired, Some(&live)), Some(Change::Changed));
        assert_eq!(change(&desired, None), Some(Change::Missing));
    }

    #[test]
    fn digests_are_stable_and_sensitive() {
        assert_eq!(digest(&json!({"a": 1, "b": [1, 2]})), digest(&json!({"b": [1, 2], "a": 1})));
        assert_ne!(digest(&json!({"a": 1})), digest(&json!({"a": 2})));
    }
}
