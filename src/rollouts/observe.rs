//! A member observed for a rollout, from the member itself (not from what flotilla
//! thinks it sent): it stands at the rollout's revision when every object the policy
//! governs carries that revision's digest there (the `flotilla.dev/applied-digest` the
//! apply wrote) and every governed object the revision no longer places there is gone;
//! it is healthy when each of those objects is, by the rules `flotilla status` uses.

use std::collections::BTreeMap;

use flotilla_core::diff::APPLIED_DIGEST;
use flotilla_core::finish;
use flotilla_core::model::ObjectKey;
use flotilla_core::status::{self, Health};
use kube::config::Kubeconfig;

use super::step::Watch;
use crate::clusters::apply::{self, Kinds};
use crate::clusters::connect::Access;

/// Where `member` stands: whether at the watched revision, and whether healthy.
pub async fn member(access: &Access, kubeconfig: &Kubeconfig, instance: &str, member: &str, watch: &Watch) -> Seen {
    match read(access, kubeconfig, instance, member, watch).await {
        Ok(seen) => seen,
        Err(why) => Seen { at: false, healthy: false, why: Some(why) },
    }
}

/// What was seen of a member.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Every governed object at the revision.
    pub at: bool,
    /// Every governed object healthy.
    pub healthy: bool,
    /// What is not (the first object behind, or unhealthy, or why it was not read).
    pub why: Option<String>,
}

async fn read(
    access: &Access,
    kubeconfig: &Kubeconfig,
    instance: &str,
    member: &str,
    watch: &Watch,
) -> Result<Seen, String> {
    let client = access
        .pool
        .client(kubeconfig, member, access.trust, access.request_timeout, None)
        .await
        .map_err(|e| e.to_string())?;
    let autoscaled = apply::autoscaled(&client).await.map_err(|e| e.to_string())?;
    let share = finish::finish(&watch.plan, member, finish::Context { instance, autoscaled: &autoscaled });
    let mut expected: BTreeMap<ObjectKey, String> = BTreeMap::new();
    for pending in share.objects.iter().filter(|p| watch.keys.contains(&p.key)) {
        let finished = pending.finish().map_err(|e| e.to_string())?;
        let digest =
            finished.manifest["metadata"]["annotations"][APPLIED_DIGEST].as_str().unwrap_or_default().to_owned();
        expected.insert(finished.key, digest);
    }
    // Protected objects (a problem, suspended dispatching) are neither expected nor gone.
    let gone: Vec<&ObjectKey> =
        watch.keys.iter().filter(|k| !expected.contains_key(*k) && !share.protected.contains(*k)).collect();
    let mut kinds = Kinds::keeping(&client, &client, access.pool.served(member));
    let keys: Vec<&ObjectKey> = expected.keys().chain(gone.iter().copied()).collect();
    let (live, _) = apply::observe(&client, &mut kinds, keys).await.map_err(|e| e.to_string())?;
    let mut seen = Seen { at: true, healthy: true, why: None };
    for (key, digest) in &expected {
        let object = live.get(key);
        let there = object.and_then(|o| o.pointer("/metadata/annotations")?.get(APPLIED_DIGEST)?.as_str());
        if there != Some(digest.as_str()) {
            seen.at = false;
            seen.why.get_or_insert_with(|| format!("{} is not at the revision", key.spelled()));
        }
        let health = status::interpreted(&watch.plan.loaded.interpreter, key, object);
        if health != Health::Healthy {
            seen.healthy = false;
            seen.why.get_or_insert_with(|| format!("{}: {health}", key.spelled()));
        }
    }
    if let Some(key) = gone.iter().find(|k| live.contains_key(**k)) {
        seen.at = false;
        seen.why.get_or_insert_with(|| format!("{} is still there", key.spelled()));
    }
    Ok(seen)
}
