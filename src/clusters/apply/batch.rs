//! One rank of a cluster's objects applied against what its members hold: listed page
//! by page, settled where already as desired, and the rest applied with server-side apply
//! under the ownership rules.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flotilla_core::diff::{self, Change};
use flotilla_core::finish::Pending;
use flotilla_core::model::ObjectKey;
use flotilla_core::ownership;
use futures::{StreamExt, stream};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;
use tracing::debug;

use super::kinds::{self, Kinds};
use super::{FIELD_MANAGER, ReconcileError, Report, Settings};

/// Applies one rank of objects against their observed state. Each listed object is
/// compared with its manifest as its page arrives; only those that differ are kept, as
/// JSON text (a fraction of a parsed tree's size), and parsed again when applied. An
/// unchanged member holds one page at a time.
pub(super) async fn apply_batch(
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
        if let Some(refused) = outside_scope(settings, &d.key, &scope) {
            report.failed.push((d.key.clone(), refused));
            tick();
            continue;
        }
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

/// Why `key` may not be written under the instance's scope, judged as the member serves
/// its kind: a kind the member serves cluster-scoped is written cluster-wide, whatever
/// namespace the template gave it, so the scope is checked without that namespace.
/// Render refuses kinds of unknown scope already; this holds the line where the render
/// was told otherwise (`namespacedResources`) or a member serves a kind differently.
pub(super) fn outside_scope(
    settings: &Settings<'_>,
    key: &ObjectKey,
    served: &kube::discovery::Scope,
) -> Option<String> {
    let (cluster, project) = settings.scope?;
    let as_served = match served {
        kube::discovery::Scope::Cluster => ObjectKey { namespace: None, ..key.clone() },
        kube::discovery::Scope::Namespaced => key.clone(),
    };
    let rule = project.denies(cluster, &as_served)?;
    let served = if as_served.namespace.is_none() && key.namespace.is_some() {
        " (the member serves it cluster-scoped)"
    } else {
        ""
    };
    Some(format!("not written: outside this instance's scope{served}: {rule}"))
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
        && let Ok(desired) = pending.retained(desired, &live)
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

/// Applies one object if it is missing, changed or drifted, keeping what the member
/// owns (the kind's `Retain` customization) from the live object. An object that exists but
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
    let desired = match &live {
        Some(existing) => {
            ownership::may_apply(&desired.manifest, existing, instance).map_err(|conflict| conflict.to_string())?;
            pending.retained(desired, existing).map_err(|e| e.to_string())?
        }
        None => desired,
    };
    let Some(change) = diff::change(&desired.manifest, live.as_ref()) else { return Ok(None) };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut attempt = 0;
    while let Err(e) = api.patch(&desired.key.name, &params, &Patch::Apply(&desired.manifest)).await {
        if attempt == SEND_RETRIES || !unsent(&e) {
            return Err(format!("apply failed: {e}"));
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
    }
    Ok(Some(change))
}

/// Times an apply is sent again when the request failed below HTTP.
const SEND_RETRIES: u32 = 2;

/// Whether a request failed before the API server answered it: a pooled connection the
/// server had already closed, a reset under load. Server-side apply is idempotent, so
/// sending it again is safe; an answer from the server (a conflict, a refusal) is never
/// retried here.
fn unsent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::HyperError(_) | kube::Error::Service(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_the_server_never_answered_are_sent_again() {
        let reset = kube::Error::Service("client error (SendRequest)".into());
        assert!(unsent(&reset));
        let conflict = kube::Error::Api(Box::new(kube::core::Status::failure("conflict", "Conflict").with_code(409)));
        assert!(!unsent(&conflict));
    }
}
