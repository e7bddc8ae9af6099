//! The pipeline's last step: one cluster's share of a plan, finished as it is applied.
//! What only the executor learns arrives as input (which instance applies; which
//! workloads a HorizontalPodAutoscaler in the member scales); manifests leave complete,
//! with their digest, and the executor sends them as they are. A share is finished one
//! object at a time ([`Pending::finish`]), as the executor gets to it, so a cluster
//! never holds all of its manifests at once: the plan already holds everything they are
//! made of.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::diff::{APPLIED_DIGEST, digest};
use crate::interpret::{InterpretError, Operation};
use crate::model::plan::Rendered;
use crate::model::{ObjectKey, Plan};
use crate::overrides::OverrideError;
use crate::render::release_replicas;

/// Annotation naming the flotilla instance that applied an object: only that instance
/// prunes it.
pub const INSTANCE_ANNOTATION: &str = "flotilla.dev/instance";

/// A workload a HorizontalPodAutoscaler in the member scales (its namespace and
/// `scaleTargetRef`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScaleTarget {
    /// The HPA's namespace.
    pub namespace: String,
    /// `scaleTargetRef.kind`.
    pub kind: String,
    /// `scaleTargetRef.name`.
    pub name: String,
}

/// What the executor knows about the member and itself.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The instance that applies (stamped into every object).
    pub instance: &'a str,
    /// Workloads scaled in the member: their `spec.replicas` is the HPA's, not ours.
    pub autoscaled: &'a BTreeSet<ScaleTarget>,
}

/// One object to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Identity.
    pub key: ObjectKey,
    /// The complete manifest, with its digest.
    pub manifest: Value,
}

/// A cluster's share: the objects to apply, and those that must not be touched there
/// (render problems, suspended dispatching), neither applied nor pruned.
#[derive(Debug, Clone, Default)]
pub struct Share<'p> {
    /// To apply, in output order.
    pub objects: Vec<Pending<'p>>,
    /// Left alone.
    pub protected: BTreeSet<ObjectKey>,
}

impl Share<'_> {
    /// Every object finished at once (a dry run, a test).
    pub fn finish_all(&self) -> Result<Vec<Finished>, Box<FinishError>> {
        self.objects.iter().map(Pending::finish).collect()
    }
}

/// One object of a share, not finished yet: its key, and what finishing it takes.
#[derive(Debug, Clone)]
pub struct Pending<'p> {
    /// Identity.
    pub key: ObjectKey,
    plan: &'p Plan,
    rendered: &'p Rendered,
    context: Arc<Owned>,
}

/// [`Context`], owned once per share.
#[derive(Debug)]
struct Owned {
    instance: String,
    autoscaled: BTreeSet<ScaleTarget>,
}

impl Pending<'_> {
    /// The complete manifest, with the instance and its digest.
    pub fn finish(&self) -> Result<Finished, Box<FinishError>> {
        let key = &self.key;
        let mut manifest =
            self.plan.manifest(self.rendered).map_err(|source| Box::new(FinishError { key: key.clone(), source }))?;
        let target = ScaleTarget {
            namespace: key.namespace.clone().unwrap_or_default(),
            kind: key.kind.clone(),
            name: key.name.clone(),
        };
        // Karmada's retain-replicas for a member HPA's target, so the two never fight.
        if self.context.autoscaled.contains(&target) {
            release_replicas(&mut manifest);
        }
        manifest["metadata"]["annotations"][INSTANCE_ANNOTATION] = self.context.instance.as_str().into();
        stamp(&mut manifest);
        Ok(Finished { key: key.clone(), manifest })
    }

    /// `finished` with the fields the member owns kept from `live`, as the kind's
    /// `Retain` customization (Karmada's `retention`) says; unchanged when no script
    /// answers. The digest stays the rendered one: a field the member owns is not a
    /// change of the repository, so it is neither reapplied nor reported as drift. The
    /// script may not rename the object or remove flotilla's annotations.
    pub fn retained(&self, finished: Finished, live: &Value) -> Result<Finished, InterpretError> {
        let interpreter = &self.plan.loaded.interpreter;
        let Some(retained) = interpreter.retain(&self.key, &finished.manifest, live) else { return Ok(finished) };
        let mut manifest = retained?;
        let identity = |m: &Value| {
            ["/apiVersion", "/kind", "/metadata/name", "/metadata/namespace"].map(|p| m.pointer(p).cloned())
        };
        if identity(&manifest) != identity(&finished.manifest) {
            let customization =
                interpreter.script(&self.key.api_version, &self.key.kind, Operation::Retain).map_or("", |(n, _)| n);
            return Err(InterpretError {
                customization: customization.to_owned(),
                operation: Operation::Retain,
                object: self.key.to_string(),
                message: "returned an object of another apiVersion, kind, name or namespace".into(),
            });
        }
        for annotation in [INSTANCE_ANNOTATION, APPLIED_DIGEST] {
            manifest["metadata"]["annotations"][annotation] =
                finished.manifest["metadata"]["annotations"][annotation].clone();
        }
        Ok(Finished { key: finished.key, manifest })
    }
}

/// An object whose overrides fail.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {source}")]
pub struct FinishError {
    /// The object.
    pub key: ObjectKey,
    /// Why.
    #[source]
    pub source: OverrideError,
}

/// `cluster`'s share of `plan`, each object to be finished when it is applied.
pub fn finish<'p>(plan: &'p Plan, cluster: &str, context: Context<'_>) -> Share<'p> {
    let owned = Arc::new(Owned { instance: context.instance.to_owned(), autoscaled: context.autoscaled.clone() });
    let mut share = Share { protected: plan.problem_objects().cloned().collect(), objects: Vec::new() };
    for rendered in plan.clusters.get(cluster).into_iter().flatten() {
        let key = plan.loaded.templates[rendered.template].key.clone();
        if rendered.suspended {
            share.protected.insert(key);
            continue;
        }
        share.objects.push(Pending { key, plan, rendered, context: owned.clone() });
    }
    share
}

/// Records the manifest's digest in it (computed without the digest itself).
fn stamp(manifest: &mut Value) {
    if let Some(annotations) = manifest.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.remove(APPLIED_DIGEST);
    }
    let digest = digest(manifest);
    manifest["metadata"]["annotations"][APPLIED_DIGEST] = digest.into();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterState, Limits, RepoFiles};

    const REPO: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement: {clusterAffinity: {clusterNames: [member1]}}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
";

    fn plan() -> Plan {
        let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
        files.files.insert("fleet.yaml".into(), REPO.as_bytes().to_vec());
        crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap()
    }

    fn web(share: &Share) -> Value {
        share.objects.iter().find(|o| o.key.name == "web").unwrap().finish().unwrap().manifest
    }

    #[test]
    fn manifests_leave_with_the_instance_and_a_digest_of_everything_else() {
        let plan = plan();
        let none = BTreeSet::new();
        let share = finish(&plan, "member1", Context { instance: "prod", autoscaled: &none });
        let manifest = web(&share);
        assert_eq!(manifest["metadata"]["annotations"][INSTANCE_ANNOTATION], "prod");
        assert_eq!(manifest["spec"]["replicas"], 4);
        let mut without = manifest.clone();
        without["metadata"]["annotations"].as_object_mut().unwrap().remove(APPLIED_DIGEST);
        assert_eq!(manifest["metadata"]["annotations"][APPLIED_DIGEST], digest(&without));
        // Another instance is another digest: the apply sees the change.
        let other = finish(&plan, "member1", Context { instance: "staging", autoscaled: &none });
        assert_ne!(
            web(&other)["metadata"]["annotations"][APPLIED_DIGEST],
            manifest["metadata"]["annotations"][APPLIED_DIGEST]
        );
        assert!(finish(&plan, "member2", Context { instance: "prod", autoscaled: &none }).objects.is_empty());
    }

    #[test]
    fn the_plan_of_one_object_finishes_it_as_the_whole_plan_does() {
        let plan = plan();
        let none = BTreeSet::new();
        let key = plan.loaded.templates.iter().find(|t| t.key.name == "web").unwrap().key.clone();
        let one = plan.only_object(&key, &["member1".to_owned(), "member2".to_owned()]);
        assert_eq!(one.clusters.keys().collect::<Vec<_>>(), ["member1"], "only where it is placed");
        let context = Context { instance: "prod", autoscaled: &none };
        let share = finish(&one, "member1", context);
        assert_eq!(share.objects.len(), 1);
        assert_eq!(web(&share), web(&finish(&plan, "member1", context)), "the same manifest and digest");
        assert!(plan.only_object(&key, &["member2".to_owned()]).clusters.is_empty());
    }

    #[test]
    fn a_member_hpa_target_leaves_replicas_to_the_hpa_and_the_digest_follows() {
        let plan = plan();
        let none = BTreeSet::new();
        let scaled =
            BTreeSet::from([ScaleTarget { namespace: "shop".into(), kind: "Deployment".into(), name: "web".into() }]);
        let owned = finish(&plan, "member1", Context { instance: "prod", autoscaled: &none });
        let released = finish(&plan, "member1", Context { instance: "prod", autoscaled: &scaled });
        assert!(web(&released)["spec"].get("replicas").is_none());
        assert_ne!(
            web(&released)["metadata"]["annotations"][APPLIED_DIGEST],
            web(&owned)["metadata"]["annotations"][APPLIED_DIGEST]
        );
        // Another namespace's HPA of the same name is not this workload's.
        let elsewhere =
            BTreeSet::from([ScaleTarget { namespace: "other".into(), kind: "Deployment".into(), name: "web".into() }]);
        let kept = finish(&plan, "member1", Context { instance: "prod", autoscaled: &elsewhere });
        assert_eq!(web(&kept)["spec"]["replicas"], 4);
    }
}
