//! The executor: reconciles a plan into member clusters, each independently, in
//! parallel, with timeouts, so a dead or slow cluster is reported while the others
//! converge. Only this module writes to clusters.

pub mod apply;
pub mod connect;
pub mod get;
pub mod inventory;
pub mod status;

use std::collections::BTreeSet;
use std::time::Duration;

use flotilla_core::diff::{self, PruneBudget};
use flotilla_core::model::{ObjectKey, Plan};
use kube::config::Kubeconfig;
use serde_json::Value;

use apply::{Desired, Report, Settings};

/// The one server-side-apply field manager flotilla uses. Never rename it: SSA
/// ownership is keyed on it.
pub const FIELD_MANAGER: &str = "flotilla";

/// Annotation naming the flotilla instance that applied an object; only that instance
/// prunes it.
pub const INSTANCE_ANNOTATION: &str = "flotilla.dev/instance";

/// Options of an apply run.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Instance name: scopes the inventory and what may be pruned.
    pub instance: &'a str,
    /// Which kubeconfig credentials to trust.
    pub trust: connect::Trust,
    /// Deletion safety.
    pub budget: PruneBudget,
    /// Requests in flight per cluster.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Whole-cluster timeout.
    pub cluster_timeout: Duration,
}

/// The outcome for one cluster.
pub type Outcome = Result<Report, String>;

/// What the plan wants in `cluster`, each manifest stamped with its digest, and the
/// objects that must not be touched there (render problems, suspended dispatching).
pub fn desired(plan: &Plan, cluster: &str, instance: &str) -> Result<(Vec<Desired>, BTreeSet<ObjectKey>), String> {
    let mut protected: BTreeSet<ObjectKey> = plan.problem_objects().cloned().collect();
    let mut desired = Vec::new();
    for rendered in plan.clusters.get(cluster).into_iter().flatten() {
        let key = plan.loaded.templates[rendered.template].key.clone();
        if rendered.suspended {
            protected.insert(key);
            continue;
        }
        let mut manifest = plan.manifest(rendered).map_err(|e| format!("{key}: {e}"))?;
        manifest["metadata"]["annotations"][INSTANCE_ANNOTATION] = instance.into();
        stamp(&mut manifest);
        desired.push(Desired { key, manifest });
    }
    Ok((desired, protected))
}

/// Records the manifest's digest in it (computed without the digest itself).
pub fn stamp(manifest: &mut Value) {
    if let Some(annotations) = manifest.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.remove(diff::APPLIED_DIGEST);
    }
    let digest = diff::digest(manifest);
    manifest["metadata"]["annotations"][diff::APPLIED_DIGEST] = digest.into();
}

/// Reconciles every named cluster concurrently; one outcome per cluster, in order.
pub async fn reconcile_all(
    plan: &Plan,
    kubeconfig: &Kubeconfig,
    clusters: &[String],
    options: Options<'_>,
) -> Vec<(String, Outcome)> {
    let runs = clusters.iter().map(|cluster| async move {
        let run = async {
            let (desired, protected) = desired(plan, cluster, options.instance)?;
            let client = connect::client(kubeconfig, cluster, options.trust, options.request_timeout)
                .await
                .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
            let settings =
                Settings { instance: options.instance, budget: options.budget, concurrency: options.concurrency };
            apply::reconcile(&client, &plan.revision, desired, &protected, settings)
                .await
                .map_err(|e| format!("{:#}", anyhow::Error::new(e)))
        };
        let outcome = match tokio::time::timeout(options.cluster_timeout, run).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("timed out after {:?}", options.cluster_timeout)),
        };
        (cluster.clone(), outcome)
    });
    futures::future::join_all(runs).await
}
