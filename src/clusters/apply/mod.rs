//! Reconciling one member cluster: server-side apply of what the plan wants there,
//! then prune of what left it, with the inventory written before anything is created
//! and after anything is deleted, so a run killed at any point is finished by the next.

use std::collections::BTreeSet;
use std::time::Duration;

use flotilla_core::diff::{self, Change, PruneBudget};
use flotilla_core::finish::{Pending, ScaleTarget, Share};
use flotilla_core::inventory::{Inventory, OtherSource, Source, check_source};
use flotilla_core::model::ObjectKey;
use flotilla_core::project::Project;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams};
use tracing::warn;

mod batch;
mod delete;
mod kinds;
pub mod live;

pub use kinds::{Kinds, Served, Unresolved, observe};

use super::{FIELD_MANAGER, inventory};
use crate::leader::Fence;

/// What one reconcile did.
#[derive(Debug, Default)]
pub struct Report {
    /// Objects written, and why.
    pub applied: Vec<(ObjectKey, Change)>,
    /// Objects already as desired.
    pub unchanged: usize,
    /// Objects deleted.
    pub pruned: Vec<ObjectKey>,
    /// Objects that failed, with the reason.
    pub failed: Vec<(ObjectKey, String)>,
    /// Why pruning was skipped, if it was.
    pub prune_refused: Option<String>,
    /// Objects that left Git but stay in the cluster, and why (an opt-out annotation,
    /// another owner).
    pub kept: Vec<(ObjectKey, String)>,
}

impl Report {
    /// `N applied, N unchanged, N pruned, N failed`, then `, N kept` when any are.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} applied, {} unchanged, {} pruned, {} failed",
            self.applied.len(),
            self.unchanged,
            self.pruned.len(),
            self.failed.len()
        );
        if !self.kept.is_empty() {
            line += &format!(", {} kept", self.kept.len());
        }
        line
    }
}

/// Why a cluster could not be reconciled at all.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The inventory could not be read or written.
    #[error(transparent)]
    Inventory(#[from] inventory::InventoryError),
    /// The API server did not answer discovery.
    #[error("discovery of {0} failed")]
    Discovery(String, #[source] kube::Error),
    /// The inventory belongs to another repository: nothing is written.
    #[error(transparent)]
    OtherSource(#[from] Box<OtherSource>),
    /// This instance lost its lease mid-reconcile and wrote nothing more.
    #[error("stopped writing: this instance no longer holds the lease")]
    Fenced,
    /// A manifest could not be finished (its overrides fail).
    #[error(transparent)]
    Finish(#[from] Box<flotilla_core::finish::FinishError>),
}

impl Settings<'_> {
    /// Refuses further writes once the lease is lost.
    fn fence(&self) -> Result<(), ReconcileError> {
        if self.fence.holds() { Ok(()) } else { Err(ReconcileError::Fenced) }
    }
}

/// Settings of a reconcile.
#[derive(Clone)]
pub struct Settings<'a> {
    /// Progress on a terminal (one tick per object applied or pruned).
    pub progress: Option<indicatif::ProgressBar>,
    /// Which flotilla instance this is: its inventory, and the objects it may delete.
    pub instance: &'a str,
    /// Deletion safety.
    pub budget: PruneBudget,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Whether this instance may still write (it leads).
    pub fence: &'a Fence,
    /// The repository this instance applies, recorded in its inventory.
    pub source: &'a Source,
    /// Take over an inventory another source recorded (`--adopt-inventory`).
    pub adopt: bool,
    /// What the instance may touch in this cluster (its name, and the scope): an
    /// inventory object outside it is never pruned.
    pub scope: Option<(&'a str, &'a Project)>,
    /// The client objects are read, written and deleted with: the instance's own, or one
    /// impersonating a service account.
    pub acting: Client,
    /// What the member serves, kept between runs (none in a one-shot run).
    pub served: Option<std::sync::Arc<Served>>,
}

/// Reconciles one cluster to its `share` at `revision`, sending each manifest as the
/// core finishes it: an object is finished when its turn to be applied comes, and
/// dropped once sent, so at most `concurrency` manifests of a cluster are held at once.
/// Protected objects (problems, suspended dispatching) are neither applied nor pruned.
/// The share is made (the member's HPAs read) while the inventory is read.
pub async fn reconcile<'p>(
    client: &Client,
    revision: &str,
    share: impl Future<Output = Result<Share<'p>, ReconcileError>>,
    settings: Settings<'_>,
) -> Result<Report, ReconcileError> {
    let mut report = Report::default();
    let (share, (previous, recovering)) =
        futures::try_join!(share, previous_inventory(client, &settings, &mut report))?;
    let Share { objects: desired, mut protected } = share;
    if let Some((cluster, project)) = settings.scope {
        protected.extend(previous.objects.iter().filter(|k| project.denies(cluster, k).is_some()).cloned());
    }
    let protected = &protected;
    let desired_keys: BTreeSet<ObjectKey> = desired.iter().map(|d| d.key.clone()).collect();
    let to_prune = match diff::select_prune(&desired_keys, &previous, protected, settings.budget) {
        Ok(keys) => keys,
        Err(refused) => {
            warn!(reason = %refused, "not pruning");
            report.prune_refused = Some(refused.to_string());
            Vec::new()
        }
    };
    // Everything about to be created is recorded first: a crash after a create leaves
    // an inventory that still lists the object, so the next run can prune it.
    let source = Some(settings.source.clone());
    let pending = Inventory {
        revision: previous.revision.clone(),
        source: source.clone(),
        objects: &previous.objects | &desired_keys,
    };
    if pending != previous || recovering {
        settings.fence()?;
        inventory::write(client, settings.instance, &pending).await?;
    }
    if let Some(bar) = &settings.progress {
        bar.set_length((desired.len() + to_prune.len()) as u64);
    }
    let mut kinds = Kinds::keeping(client, &settings.acting, settings.served.clone());
    for rank in 0..=2 {
        let batch: Vec<&Pending<'_>> = desired.iter().filter(|d| diff::apply_rank(&d.key) == rank).collect();
        settings.fence()?;
        batch::apply_batch(client, &mut kinds, &batch, &settings, &mut report).await?;
        if rank == 1 {
            wait_established(client, &desired_keys).await;
            kinds.forget_failures();
        }
    }
    let kept = delete::delete_selected(&mut kinds, to_prune, &settings, &mut report).await?;
    let objects: BTreeSet<ObjectKey> =
        desired_keys.into_iter().chain(kept).chain(previous.objects.intersection(protected).cloned()).collect();
    let done = Inventory { revision: revision.to_owned(), source, objects };
    if done != pending {
        settings.fence()?;
        inventory::write(client, settings.instance, &done).await?;
    }
    Ok(report)
}

/// Removes everything an instance applied to this cluster (a preview that ended): every
/// object its inventory lists that is still its own, in reverse apply order, then the
/// inventory. A decision of the caller's, not of a render, so the empty-render and
/// budget refusals do not apply; ownership and the opt-out annotations still do. An
/// object that fails to go stays listed, and the next teardown tries again.
pub async fn teardown(client: &Client, settings: Settings<'_>) -> Result<Report, ReconcileError> {
    let mut report = Report::default();
    let previous = inventory::read(client, settings.instance).await?;
    check_source(previous.source.as_ref(), settings.source, settings.adopt)?;
    let mut kinds = Kinds::keeping(client, &settings.acting, settings.served.clone());
    let all = previous.objects.iter().cloned().collect();
    let kept = delete::delete_selected(&mut kinds, all, &settings, &mut report).await?;
    settings.fence()?;
    if kept.is_empty() {
        inventory::remove(client, settings.instance).await?;
    } else {
        let left = Inventory { objects: kept.into_iter().collect(), ..previous };
        inventory::write(client, settings.instance, &left).await?;
    }
    Ok(report)
}

/// The inventory to prune from, if it is this source's. An unreadable one is replaced
/// (so a member never stays stuck on it) and nothing is pruned from it, which the report
/// says; `true` when that happens.
async fn previous_inventory(
    client: &Client,
    settings: &Settings<'_>,
    report: &mut Report,
) -> Result<(Inventory, bool), ReconcileError> {
    match inventory::read(client, settings.instance).await {
        Ok(found) => {
            check_source(found.source.as_ref(), settings.source, settings.adopt)?;
            Ok((found, false))
        }
        Err(inventory::InventoryError::Corrupt(name, why)) => {
            let refused = format!(
                "inventory {}/{name} was unreadable ({why}): it is rewritten from this revision and nothing is pruned \
                 from it; objects only it listed are left in place",
                inventory::NAMESPACE
            );
            warn!(reason = %refused, "not pruning");
            report.prune_refused = Some(refused);
            Ok((Inventory::default(), true))
        }
        Err(e) => Err(e.into()),
    }
}

/// The workloads HorizontalPodAutoscalers in the member scale: the core leaves their
/// `spec.replicas` out of what is applied, as Karmada does for HPA targets
/// (retain-replicas), so flotilla and the HPA never fight.
pub async fn autoscaled(client: &Client) -> Result<BTreeSet<ScaleTarget>, ReconcileError> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::all(client.clone());
    let list = hpas
        .list(&ListParams::default())
        .await
        .map_err(|e| ReconcileError::Discovery("HorizontalPodAutoscaler".into(), e))?;
    Ok(list
        .items
        .iter()
        .filter_map(|h| {
            let target = &h.spec.as_ref()?.scale_target_ref;
            Some(ScaleTarget {
                namespace: h.metadata.namespace.clone()?,
                kind: target.kind.clone(),
                name: target.name.clone(),
            })
        })
        .collect())
}

/// Waits (up to 30 s) until every CRD in the plan is Established, so the custom
/// resources after it can be applied.
async fn wait_established(client: &Client, desired: &BTreeSet<ObjectKey>) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let names = desired.iter().filter(|k| diff::apply_rank(k) == 1).map(|k| k.name.as_str());
    for name in names {
        for _ in 0..150 {
            let established =
                crds.get_opt(name).await.ok().flatten().and_then(|c| c.status).and_then(|s| s.conditions).is_some_and(
                    |conditions| conditions.iter().any(|c| c.type_ == "Established" && c.status == "True"),
                );
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
