//! What applying a share would change in a member now, without writing anything: each
//! object read, checked for ownership, and sent as a server-side apply dry run; the
//! inventory read for what would be pruned. `flotilla diff --live` compares the answers
//! (in the core, `plan_diff::live`).

use std::collections::BTreeSet;

use flotilla_core::diff;
use flotilla_core::finish::{Finished, Share};
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
pub async fn observe_share(client: &Client, share: Share, settings: &Settings<'_>) -> Result<LivePlan, ReconcileError> {
    let previous = inventory::read(client, settings.instance).await?;
    check_source(previous.source.as_ref(), settings.source, settings.adopt)?;
    let desired: BTreeSet<ObjectKey> = share.objects.iter().map(|d| d.key.clone()).collect();
    let mut plan = LivePlan::default();
    match diff::select_prune(&desired, &previous, &share.protected, settings.budget) {
        Ok(keys) => plan.removed = keys,
        Err(refused) => plan.prune_refused = Some(refused.to_string()),
    }
    // Resolve every kind first (one discovery each), then observe concurrently.
    let mut kinds = Kinds::new(client, &settings.acting);
    let mut work = Vec::new();
    for d in share.objects {
        let resolved = kinds.resolve(&d.key).await.map_err(|e| e.to_string());
        work.push((d, resolved));
    }
    let kinds = &kinds;
    plan.observed = stream::iter(work)
        .map(|(d, resolved)| async move {
            match resolved {
                Ok((ar, scope)) => observe_one(&kinds.api(&ar, &scope, d.key.namespace.as_deref()), d, settings).await,
                Err(why) => Observed { key: d.key, manifest: d.manifest, live: None, applied: Err(why) },
            }
        })
        .buffered(settings.concurrency.max(1))
        .collect()
        .await;
    let created: BTreeSet<String> = plan
        .observed
        .iter()
        .filter(|o| o.live.is_none() && o.key.group().is_empty() && o.key.kind == "Namespace")
        .map(|o| o.key.name.clone())
        .collect();
    // An object in a Namespace the same apply creates cannot be dry-run before it exists:
    // it is a creation.
    for o in &mut plan.observed {
        if o.live.is_none() && o.key.namespace.as_ref().is_some_and(|ns| created.contains(ns)) {
            o.applied = Ok(o.manifest.clone());
        }
    }
    Ok(plan)
}

async fn observe_one(api: &kube::Api<kube::api::DynamicObject>, d: Finished, settings: &Settings<'_>) -> Observed {
    let Finished { key, manifest } = d;
    let live = match api.get_opt(&key.name).await {
        Ok(found) => found.map(|o| serde_json::to_value(o).expect("objects serialise")),
        Err(e) => return Observed { key, manifest, live: None, applied: Err(format!("read failed: {e}")) },
    };
    let owned = match &live {
        Some(existing) => ownership::may_apply(&manifest, existing, settings.instance).map_err(|c| c.to_string()),
        None => Ok(()),
    };
    let applied = match owned {
        Ok(()) => {
            let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
            match api.patch(&key.name, &params, &Patch::Apply(&manifest)).await {
                Ok(result) => Ok(serde_json::to_value(result).expect("objects serialise")),
                Err(e) => Err(format!("the dry run was refused: {e}")),
            }
        }
        Err(conflict) => Err(conflict),
    };
    Observed { key, manifest, live, applied }
}
