//! Reconciling one member cluster: server-side apply of what the plan wants there,
//! then prune of what left it, with the inventory written before anything is created
//! and after anything is deleted, so a run killed at any point is finished by the next.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flotilla_core::diff::{self, Change, PruneBudget};
use flotilla_core::finish::{Pending, ScaleTarget, Share};
use flotilla_core::inventory::{Inventory, OtherSource, Source, check_source};
use flotilla_core::model::ObjectKey;
use flotilla_core::ownership;
use flotilla_core::project::Project;
use futures::{StreamExt, stream};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;
use tracing::{debug, warn};

mod delete;
mod kinds;
pub mod live;

pub use kinds::{Kinds, Unresolved, observe};

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
}

/// Reconciles one cluster to its `share` at `revision`, sending each manifest as the
/// core finishes it: an object is finished when its turn to be applied comes, and
/// dropped once sent, so at most `concurrency` manifests of a cluster are held at once.
/// Protected objects (problems, suspended dispatching) are neither applied nor pruned.
pub async fn reconcile(
    client: &Client,
    revision: &str,
    share: Share<'_>,
    settings: Settings<'_>,
) -> Result<Report, ReconcileError> {
    let mut report = Report::default();
    let Share { objects: desired, mut protected } = share;
    let (previous, recovering) = previous_inventory(client, &settings, &mut report).await?;
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
    let mut kinds = Kinds::new(client, &settings.acting);
    for rank in 0..=2 {
        let batch: Vec<&Pending<'_>> = desired.iter().filter(|d| diff::apply_rank(&d.key) == rank).collect();
        settings.fence()?;
        apply_batch(client, &mut kinds, &batch, &settings, &mut report).await?;
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
    let mut kinds = Kinds::new(client, &settings.acting);
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

/// Applies one rank of objects against their observed state. Each listed object is
/// compared with its manifest as its page arrives; only those that differ are kept, as
/// JSON text (a fraction of a parsed tree's size), and parsed again when applied. An
/// unchanged member holds one page at a time.
async fn apply_batch(
    client: &Client,
    kinds: &mut Kinds<'_>,
    batch: &[&Pending<'_>],
    settings: &Settings<'_>,
    report: &mut Report,
) -> Result<(), ReconcileError> {
    let wanted: BTreeMap<&ObjectKey, &Pending<'_>> = batch.iter().map(|d| (&d.key, *d)).collect();
    let keep = |key: &ObjectKey, value: Value| wanted.get(key).map(|d| listed(d, value, settings.instance));
    let (mut live, unserved) = kinds::observe_into(client, kinds, batch.iter().map(|d| &d.key), keep).await?;
    let tick = || {
        if let Some(bar) = &settings.progress {
            bar.inc(1);
        }
    };
    let unserved_keys: BTreeSet<ObjectKey> = unserved.iter().map(|(k, _)| k.clone()).collect();
    report.failed.extend(unserved);
    let mut work = Vec::new();
    for d in batch.iter().filter(|d| !unserved_keys.contains(&d.key)) {
        let current = match live.remove(&d.key) {
            Some(Listed::Settled) => {
                report.unchanged += 1;
                tick();
                continue;
            }
            Some(Listed::Live(text)) => Current::Live(text),
            None => Current::Unknown,
        };
        let (ar, scope) = kinds.resolve(&d.key).await.expect("resolved while observing");
        work.push((kinds.api(&ar, &scope, d.key.namespace.as_deref()), *d, current));
    }
    settle_unmanaged(kinds, &mut work).await;
    let results: Vec<(ObjectKey, Result<Option<Change>, String>)> = stream::iter(work)
        .map(|(api, d, current)| async move {
            let outcome = apply_one(&api, d, current, settings.instance).await;
            (d.key.clone(), outcome)
        })
        .buffer_unordered(settings.concurrency.max(1))
        .inspect(|_| tick())
        .collect()
        .await;
    for (key, outcome) in results {
        match outcome {
            Ok(None) => report.unchanged += 1,
            Ok(Some(change)) => {
                debug!(object = %key, ?change, "applied");
                report.applied.push((key, change));
            }
            Err(e) => report.failed.push((key, e)),
        }
    }
    report.applied.sort_by(|a, b| a.0.cmp(&b.0));
    report.failed.sort();
    Ok(())
}

/// A wanted object as its LIST page showed it.
enum Listed {
    /// Already as desired, and flotilla's to apply: nothing to do.
    Settled,
    /// To be decided by [`apply_one`]: the live object as JSON text.
    Live(String),
}

/// Decides what of a listed object to keep: nothing when it is as `pending` wants it and
/// flotilla may apply it (what [`apply_one`] would conclude), else its text.
fn listed(pending: &Pending<'_>, live: Value, instance: &str) -> Listed {
    if let Ok(desired) = pending.finish()
        && ownership::may_apply(&desired.manifest, &live, instance).is_ok()
        && diff::change(&desired.manifest, Some(&live)).is_none()
    {
        return Listed::Settled;
    }
    Listed::Live(live.to_string())
}

/// What is known of an object before applying it.
enum Current {
    /// The live object as JSON text (flotilla's, or found by listing; the conflict
    /// check decides).
    Live(String),
    /// Known not to exist.
    Absent,
    /// Not among the managed objects; whether it exists is still to be asked.
    Unknown,
}

/// Objects that are not among the managed ones: where many share a kind and namespace,
/// one unfiltered LIST there settles them all (instead of one GET each), and anything
/// found that flotilla did not create is returned as such for the conflict check.
async fn settle_unmanaged(kinds: &Kinds<'_>, work: &mut [(Api<DynamicObject>, &Pending<'_>, Current)]) {
    let mut groups: BTreeMap<(String, String, Option<String>), Vec<usize>> = BTreeMap::new();
    for (i, (_, d, current)) in work.iter().enumerate() {
        if matches!(current, Current::Unknown) {
            groups.entry((d.key.api_version.clone(), d.key.kind.clone(), d.key.namespace.clone())).or_default().push(i);
        }
    }
    for ((_, _, namespace), members) in groups.into_iter().filter(|(_, m)| m.len() > 3) {
        let Some((ar, scope)) = kinds.known(&work[members[0]].1.key) else { continue };
        let Ok(list) = kinds.api(&ar, &scope, namespace.as_deref()).list(&ListParams::default()).await else {
            continue;
        };
        let existing: BTreeMap<String, String> = list
            .into_iter()
            .map(|o| {
                (o.metadata.name.clone().unwrap_or_default(), serde_json::to_string(&o).expect("objects serialise"))
            })
            .collect();
        for i in members {
            work[i].2 = match existing.get(&work[i].1.key.name) {
                Some(found) => Current::Live(found.clone()),
                None => Current::Absent,
            };
        }
    }
}

/// Applies one object if it is missing, changed or drifted. An object that exists but
/// was not created by flotilla is only taken over with conflict resolution `overwrite`;
/// one another instance manages is never taken over.
async fn apply_one(
    api: &Api<DynamicObject>,
    pending: &Pending<'_>,
    current: Current,
    instance: &str,
) -> Result<Option<Change>, String> {
    let desired = pending.finish().map_err(|e| e.to_string())?;
    let live = match current {
        Current::Live(text) => Some(serde_json::from_str(&text).map_err(|e| format!("read failed: {e}"))?),
        Current::Absent => None,
        Current::Unknown => {
            let existing = api.get_opt(&desired.key.name).await.map_err(|e| format!("read failed: {e}"))?;
            existing.map(|e| serde_json::to_value(e).expect("objects serialise"))
        }
    };
    if let Some(existing) = &live {
        ownership::may_apply(&desired.manifest, existing, instance).map_err(|conflict| conflict.to_string())?;
    }
    let Some(change) = diff::change(&desired.manifest, live.as_ref()) else { return Ok(None) };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&desired.key.name, &params, &Patch::Apply(&desired.manifest))
        .await
        .map_err(|e| format!("apply failed: {e}"))?;
    Ok(Some(change))
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
