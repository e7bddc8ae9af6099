//! The deleting half of prune: what left the plan goes, if it is still this instance's.

use flotilla_core::diff;
use flotilla_core::model::ObjectKey;
use flotilla_core::ownership;
use kube::Resource;
use kube::api::DeleteParams;
use tracing::info;

use super::{Kinds, ReconcileError, Report, Settings, Unresolved};

/// Deletes what left the plan, in reverse apply order. Only objects carrying flotilla's
/// managed label and this instance's annotation are deleted, and only while the lease is
/// held, checked right before each delete. Returns the keys to keep in the inventory
/// (failed deletes, retried next run).
pub(super) async fn delete_selected(
    kinds: &mut Kinds<'_>,
    mut keys: Vec<ObjectKey>,
    settings: &Settings<'_>,
    report: &mut Report,
) -> Result<Vec<ObjectKey>, ReconcileError> {
    let instance = settings.instance;
    keys.sort_by_key(|k| std::cmp::Reverse(diff::apply_rank(k)));
    let mut kept = Vec::new();
    for key in keys {
        if let Some(bar) = &settings.progress {
            bar.inc(1);
        }
        let (ar, scope) = match kinds.resolve(&key).await {
            Ok(found) => found,
            Err(Unresolved::NotServed(_)) => {
                info!(object = %key, "kind no longer served; dropping from the inventory");
                continue;
            }
            Err(failed) => {
                // Unreachable, forbidden or erroring: the object may well exist.
                report.failed.push((key.clone(), failed.to_string()));
                kept.push(key);
                continue;
            }
        };
        if let Some(refused) = super::batch::outside_scope(settings, &key, &scope) {
            // As the member serves it, it was never this scope's to touch.
            report.kept.push((key, refused));
            continue;
        }
        let api = kinds.api(&ar, &scope, key.namespace.as_deref());
        match api.get_opt(&key.name).await {
            Ok(None) => {}
            Ok(Some(live)) => {
                if let Some(why) = left_in_place(&live, instance) {
                    info!(object = %key, why, "left in place");
                    report.kept.push((key, why.into()));
                    continue;
                }
                settings.fence()?;
                match api.delete(&key.name, &DeleteParams::background()).await {
                    Ok(_) => report.pruned.push(key),
                    Err(e) => {
                        report.failed.push((key.clone(), format!("delete failed: {e}")));
                        kept.push(key);
                    }
                }
            }
            Err(e) => {
                report.failed.push((key.clone(), format!("read before delete failed: {e}")));
                kept.push(key);
            }
        }
    }
    Ok(kept)
}

/// Why a live object that left the plan stays: it is no longer this instance's, or its
/// prune is disabled by an annotation (as Flux and Argo CD do: left running, and no
/// longer tracked).
fn left_in_place(live: &kube::api::DynamicObject, instance: &str) -> Option<&'static str> {
    if !ownership::may_prune(&serde_json::to_value(live).expect("objects serialise"), instance) {
        return Some("not managed by this instance");
    }
    let annotations = live.meta().annotations.as_ref();
    diff::prune_disabled(|k| annotations.and_then(|a| a.get(k)).map(String::as_str))
        .then_some("prune disabled by an annotation")
}
