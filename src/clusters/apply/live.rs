//! What applying a share would change in a member now, without writing anything: each
//! object read, checked for ownership, and sent as a server-side apply dry run; the
//! inventory read for what would be pruned. `flotilla diff --live` compares the answers
//! (in the core, `plan_diff::live`).

use std::collections::BTreeSet;

use flotilla_core::diff;
use flotilla_core::finish::{Finished, Pending, Share};
use flotilla_core::inventory::check_source;
use flotilla_core::model::ObjectKey;
use flotilla_core::ownership;
use flotilla_core::plan_diff::live::Observed;
use futures::{StreamExt, stream};
use kube::Client;
use kube::api::{Patch, PatchParams};

use super::{Kinds, ReconcileError, Settings};
use crate::clusters::{FIELD_MANAGER, inventory};

/// One member's live plan.
#[derive(Debug, Default)]
pub struct LivePlan {
    /// Every object of the share, observed.
    pub observed: Vec<Observed>,
    /// What would be pruned.
    pub removed: Vec<ObjectKey>,
    /// Why nothing would be pruned, when prune would refuse.
    pub prune_refused: Option<String>,
}

/// Observes `share` in the member: reads only, and dry runs.
pub async fn observe_share(
    client: &Client,
    share: Share<'_>,
    settings: &Settings<'_>,
) -> Result<LivePlan, ReconcileError> {
    let previous = inventory::read(client, settings.instance).await?;
    check_source(previous.source.as_ref(), settings.source, settings.adopt)?;
    let desired: BTreeSet<ObjectKey> = share.objects.iter().map(|d| d.key.clone()).collect();
    let mut plan = LivePlan::default();
    match diff::select_prune(&desired, &previous, &share.protected, settings.budget) {
        Ok(keys) => plan.removed = keys,
        Err(refused) => plan.prune_refused = Some(refused.to_string()),
    }
    // Resolve every kind first (one discovery each), then read every object.
    let mut kinds = Kinds::keeping(client, &settings.acting, settings.served.clone());
    let mut work = Vec::new();
    for pending in &share.objects {
        let d = pending.finish()?;
        let api = kinds.resolve(&d.key).await.map(|(ar, scope)| kinds.api(&ar, &scope, d.key.namespace.as_deref()));
        work.push((pending, d, api.map_err(|e| e.to_string())));
    }
    let concurrency = settings.concurrency.max(1);
    let read: Vec<_> = stream::iter(work)
        .map(|(pending, d, api)| async move {
            let (d, live) = read(pending, d, &api).await;
            (d, api, live)
        })
        .buffered(concurrency)
        .collect()
        .await;
    // An object in a Namespace the same apply creates cannot be dry-run before it
    // exists: it is a creation.
    let created: BTreeSet<String> = read
        .iter()
        .filter(|(d, _, live)| matches!(live, Ok(None)) && d.key.group().is_empty() && d.key.kind == "Namespace")
        .map(|(d, _, _)| d.key.name.clone())
        .collect();
    let created = &created;
    plan.observed = stream::iter(read)
        .map(|(d, api, live)| async move {
            let Finished { key, manifest } = d;
            match (api, live) {
                (Err(why), _) | (_, Err(why)) => Observed { key, manifest, live: None, applied: Err(why) },
                (Ok(_), Ok(None)) if key.namespace.as_ref().is_some_and(|ns| created.contains(ns)) => {
                    Observed { applied: Ok(manifest.clone()), key, manifest, live: None }
                }
                (Ok(api), Ok(live)) => {
                    let applied = dry_run(&api, &key, &manifest, live.as_ref(), settings.instance).await;
                    Observed { key, manifest, live, applied }
                }
            }
        })
        .buffered(concurrency)
        .collect()
        .await;
    Ok(plan)
}

/// The live object of `d`, and `d` with what the member owns kept from it, as the apply
/// would keep it.
async fn read(
    pending: &Pending<'_>,
    d: Finished,
    api: &Result<kube::Api<kube::api::DynamicObject>, String>,
) -> (Finished, Result<Option<serde_json::Value>, String>) {
    let live = match api {
        Ok(api) => api.get_opt(&d.key.name).await.map_err(|e| format!("read failed: {e}")),
        Err(why) => Err(why.clone()),
    };
    match live.map(|found| found.map(|o| serde_json::to_value(o).expect("objects serialise"))) {
        Ok(Some(found)) => match pending.retained(d.clone(), &found) {
            Ok(retained) => (retained, Ok(Some(found))),
            Err(e) => (d, Err(e.to_string())),
        },
        other => (d, other),
    }
}

/// What applying `manifest` would leave, or why the member would refuse it.
async fn dry_run(
    api: &kube::Api<kube::api::DynamicObject>,
    key: &ObjectKey,
    manifest: &serde_json::Value,
    live: Option<&serde_json::Value>,
    instance: &str,
) -> Result<serde_json::Value, String> {
    if let Some(existing) = live {
        ownership::may_apply(manifest, existing, instance).map_err(|c| c.to_string())?;
    }
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    match api.patch(&key.name, &params, &Patch::Apply(manifest)).await {
        Ok(result) => Ok(serde_json::to_value(result).expect("objects serialise")),
        Err(e) => Err(format!("the dry run was refused: {e}")),
    }
}
