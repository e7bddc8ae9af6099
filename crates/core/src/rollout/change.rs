//! What a revision changes of the objects one RolloutPolicy governs, cluster by cluster:
//! nothing, nothing but replica counts, or more in some clusters (which then move in
//! waves). `flotilla diff`, the PR plan and the rollout loop all decide with
//! [`change`], so a plan shows the waves the loop will follow.
//!
//! Objects are compared as each cluster receives them (the rendered manifests, after
//! placement, replica division and overrides), not as templates: an OverridePolicy that
//! changes an image, or a placement that adds a cluster, changes what members run while
//! every template stays the same.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::PolicyId;
use super::compose::governed_keys;
use crate::model::plan::Rendered;
use crate::model::{ObjectKey, Plan};
use crate::plan_diff::same;

/// What a revision changes of one policy's governed objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Every cluster receives the same governed objects.
    Same,
    /// The governed objects differ only in `spec.replicas` (the autoscaler's
    /// write-back, or a replica count edited in Git), in the clusters named.
    ReplicasOnly(BTreeSet<String>),
    /// The governed objects differ otherwise in some clusters: those that move.
    Moves(BTreeSet<String>),
}

impl Change {
    /// The clusters whose governed objects differ (none for [`Change::Same`]).
    pub fn clusters(&self) -> BTreeSet<String> {
        match self {
            Change::Same => BTreeSet::new(),
            Change::ReplicasOnly(c) | Change::Moves(c) => c.clone(),
        }
    }
}

/// What `newer` changes, against `older`, of the objects `policy` governs (in either).
/// Objects are walked cluster by cluster and built only when the two renders do not
/// share them (the plan diff's test: one template text, the same deltas and override
/// rules), so a large fleet is compared without holding its manifests.
pub fn change(older: &Plan, newer: &Plan, policy: &PolicyId) -> Change {
    let keys = governed_keys(newer, older, policy.as_ref());
    if keys.is_empty() {
        return Change::Same;
    }
    let clusters: BTreeSet<&String> = older.clusters.keys().chain(newer.clusters.keys()).collect();
    let (mut differ, mut beyond_replicas) = (BTreeSet::new(), false);
    for cluster in clusters {
        let (was, is) = (placed(older, cluster, &keys), placed(newer, cluster, &keys));
        let mut changed = false;
        for key in was.keys().chain(is.keys()).collect::<BTreeSet<_>>() {
            let (replicas_only, differs) = match (was.get(key), is.get(key)) {
                (Some(a), Some(b)) if same(older, a, newer, b) => (true, false),
                (Some(a), Some(b)) => {
                    let (a, b) = (older.manifest(a).ok(), newer.manifest(b).ok());
                    (a.as_ref().map(without_replicas) == b.as_ref().map(without_replicas), a != b)
                }
                // Placed in one render only: a replica count when its template changed in
                // nothing else (a division placing a scaled workload on more members);
                // else more (a placement or policy change).
                _ => (replicas_changed(older, newer, key), true),
            };
            changed |= differs;
            beyond_replicas |= differs && !replicas_only;
            if changed && beyond_replicas {
                break;
            }
        }
        if changed {
            differ.insert(cluster.clone());
        }
    }
    match (differ.is_empty(), beyond_replicas) {
        (true, _) => Change::Same,
        (false, false) => Change::ReplicasOnly(differ),
        (false, true) => Change::Moves(differ),
    }
}

/// `cluster`'s objects of `keys` in `plan`.
fn placed<'p>(plan: &'p Plan, cluster: &str, keys: &BTreeSet<ObjectKey>) -> BTreeMap<&'p ObjectKey, &'p Rendered> {
    let items = plan.clusters.get(cluster).into_iter().flatten();
    items.map(|r| (&plan.loaded.templates[r.template].key, r)).filter(|(key, _)| keys.contains(*key)).collect()
}

/// Whether `key`'s template differs between the renders, in `spec.replicas` only.
fn replicas_changed(older: &Plan, newer: &Plan, key: &ObjectKey) -> bool {
    let (Some(a), Some(b)) = (older.loaded.template(key), newer.loaded.template(key)) else { return false };
    let (a, b) = (a.object(), b.object());
    a != b && without_replicas(&a) == without_replicas(&b)
}

fn without_replicas(manifest: &Value) -> Value {
    let mut manifest = manifest.clone();
    if let Some(spec) = manifest.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
    manifest
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2}
spec: {syncMode: Push}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tools, namespace: shop}
data: {version: "VERSION"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: all, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}, {apiVersion: v1, kind: ConfigMap}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Weighted}
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: image, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  overrideRules:
  - targetCluster: {clusterNames: [member2]}
    overriders:
      imageOverrider: [{component: Tag, operator: replace, value: "TAG"}]
---
apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
"#;

    fn plan(revision: &str, replicas: u32, tag: &str, version: &str) -> Plan {
        let text = REPO.replace("REPLICAS", &replicas.to_string()).replace("TAG", tag).replace("VERSION", version);
        crate::plan_of(revision, &text)
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_change_is_judged_on_what_each_cluster_receives() {
        let policy = PolicyId { namespace: Some("shop".into()), name: "web".into() };
        let base = plan("r1", 4, "1.25", "1");
        // Ungoverned objects do not count.
        assert_eq!(change(&base, &plan("r2", 4, "1.25", "2"), &policy), Change::Same);
        // The autoscaler's write-back: only replica counts, in both members.
        assert_eq!(
            change(&base, &plan("r2", 6, "1.25", "1"), &policy),
            Change::ReplicasOnly(set(&["member1", "member2"]))
        );
        // An override changes member2's image while the template stays as it was.
        assert_eq!(change(&base, &plan("r2", 4, "1.26", "1"), &policy), Change::Moves(set(&["member2"])));
        // Replicas and an image at once: more than replicas.
        assert_eq!(change(&base, &plan("r2", 6, "1.26", "1"), &policy), Change::Moves(set(&["member1", "member2"])));
        // Scaling 1 → 2 places web on member2 too (member1 keeps its one): still only a
        // replica count.
        let scaled = change(&plan("r1", 1, "1.25", "1"), &plan("r2", 2, "1.25", "1"), &policy);
        assert_eq!(scaled, Change::ReplicasOnly(set(&["member2"])));
        // A policy that governs nothing changes nothing.
        let other = PolicyId { namespace: Some("shop".into()), name: "none".into() };
        assert_eq!(change(&base, &plan("r2", 6, "1.26", "2"), &other), Change::Same);
    }
}
