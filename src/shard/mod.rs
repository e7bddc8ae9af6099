//! Sharding members over controller replicas (`--sharding`): every live replica holds a
//! membership Lease of its own in the host cluster; members go to the live replicas by
//! rendezvous hashing ([`assign`]), each owned by one replica at a time and fenced as
//! the leader is ([`step`]).

pub mod assign;
pub mod step;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use sha2::Digest;
use tokio::sync::watch;
use tokio::time::timeout_at;
use tracing::{info, warn};

use crate::host::Host;
use crate::leader::elect::Timing;
use step::{Event, Listed, Membership, Shard};

/// The label every membership Lease of an instance carries (its value: the instance).
pub const LABEL: &str = "flotilla.dev/shard-of";

/// What the membership loop needs.
pub struct Sharding {
    /// The host cluster, where the Leases live.
    pub host: Arc<Host>,
    /// The controller's namespace.
    pub namespace: String,
    /// The instance the replicas share.
    pub instance: String,
    /// This replica (the Leases' holder, and its requests' User-Agent).
    pub identity: String,
    /// The Leases' timing (the leader election's).
    pub timing: Timing,
}

/// This replica's membership, kept current by its loop.
pub struct Handle {
    /// Where this replica stands: its members and until when it may write to them.
    pub shard: watch::Receiver<Shard>,
    /// Until when it may write (a fence's deadline).
    pub until: watch::Receiver<Option<Instant>>,
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Handle {
    /// Ends the membership: the Lease's holder is cleared, so the others take this
    /// replica's members at their next round. The members' workers must have stopped.
    pub async fn release(self) {
        let _ = self.stop.send(());
        if tokio::time::timeout(Duration::from_secs(5), self.task).await.is_err() {
            warn!("releasing the membership Lease timed out; it ages out after its duration");
        }
    }
}

/// The name of `identity`'s membership Lease in `instance`.
pub fn lease_name(instance: &str, identity: &str) -> String {
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let short: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
    format!("{instance}-shard-{short}")
}

impl Sharding {
    /// Starts the membership loop; `members` are the members the newest render names.
    pub async fn start(self, members: watch::Receiver<BTreeSet<String>>) -> anyhow::Result<Handle> {
        use anyhow::Context;
        let client = self.host.client().await.context("the host cluster, for the membership Leases")?;
        let api: Api<Lease> = Api::namespaced(client, &self.namespace);
        let (shard, shard_rx) = watch::channel(Shard::default());
        let (until, until_rx) = watch::channel(None);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let name = lease_name(&self.instance, &self.identity);
        info!(lease = %format!("{}/{name}", self.namespace), identity = %self.identity, "sharding: membership on");
        let round = Rounds { api, name, settings: self, version: None };
        let task = tokio::spawn(round.run(members, (shard, until), stopped));
        Ok(Handle { shard: shard_rx, until: until_rx, task, stop })
    }
}

struct Rounds {
    api: Api<Lease>,
    name: String,
    settings: Sharding,
    /// The version of this replica's Lease as last written (a replace names it).
    version: Option<String>,
}

impl Rounds {
    async fn run(
        mut self,
        mut members: watch::Receiver<BTreeSet<String>>,
        (shard, until): (watch::Sender<Shard>, watch::Sender<Option<Instant>>),
        mut stopped: tokio::sync::oneshot::Receiver<()>,
    ) {
        let timing = self.settings.timing;
        let mut membership = Membership::new(self.settings.identity.clone(), timing);
        let mut next = Instant::now();
        membership.step(Event::Members(members.borrow_and_update().clone()));
        loop {
            let now = Instant::now();
            if now >= next {
                let started = now;
                // Every request of a round ends before the next round is due.
                let bound = started + timing.retry;
                let renewed = self.renew(bound).await;
                let listed = self.list(bound).await;
                let received = Instant::now();
                membership.step(Event::Round { started, received, renewed, listed });
                next = started + timing.retry;
            }
            let seen = membership.shard(Instant::now());
            until.send_if_modified(|held| std::mem::replace(held, seen.until) != seen.until);
            // Receivers hear of a change of members or replicas; a renewal (a later
            // `until`) is only kept.
            shard.send_if_modified(|held| {
                let changed = (&held.replicas, &held.owned, held.joining) != (&seen.replicas, &seen.owned, seen.joining);
                if changed {
                    info!(replicas = ?seen.replicas, owned = seen.owned.len(), joining = seen.joining, "sharding: members");
                }
                *held = seen;
                changed
            });
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                // `changed` marks the value seen: it is read here, or never.
                Ok(()) = members.changed() => {
                    membership.step(Event::Members(members.borrow_and_update().clone()));
                }
                _ = &mut stopped => break,
            }
        }
        // Released (its holder cleared, as leader election releases): the others take
        // this replica's members at their next round.
        let _ = until.send_replace(None);
        match self.release().await {
            Ok(()) => info!("sharding: membership Lease released"),
            Err(e) => {
                warn!(error = %e, "sharding: cannot release the membership Lease; it ages out after its duration")
            }
        }
    }

    async fn release(&self) -> Result<(), kube::Error> {
        let mut lease = self.api.get(&self.name).await?;
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
        }
        let params = PostParams { field_manager: Some("flotilla-shard".into()), ..Default::default() };
        self.api.replace(&self.name, &params, &lease).await.map(|_| ())
    }

    /// Writes this replica's Lease (creating it the first time); whether it was written.
    async fn renew(&mut self, bound: Instant) -> bool {
        let spec = |acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(self.settings.timing.duration.as_secs() as i32),
            acquire_time: acquired.or_else(|| Some(MicroTime(k8s_openapi::jiff::Timestamp::now()))),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        };
        let meta = |version: Option<String>| ObjectMeta {
            name: Some(self.name.clone()),
            labels: Some([(LABEL.to_owned(), self.settings.instance.clone())].into()),
            resource_version: version,
            ..Default::default()
        };
        let params = PostParams { field_manager: Some("flotilla-shard".into()), ..Default::default() };
        let written = match self.version.clone() {
            Some(version) => {
                let lease = Lease { metadata: meta(Some(version)), spec: Some(spec(None)) };
                timeout_at(bound.into(), self.api.replace(&self.name, &params, &lease)).await
            }
            None => match timeout_at(bound.into(), self.api.get_opt(&self.name)).await {
                Ok(Ok(Some(found))) => {
                    // A Lease of this identity left by an earlier incarnation: taken over.
                    let acquired = found.spec.and_then(|s| s.acquire_time);
                    let lease = Lease { metadata: meta(found.metadata.resource_version), spec: Some(spec(acquired)) };
                    timeout_at(bound.into(), self.api.replace(&self.name, &params, &lease)).await
                }
                Ok(Ok(None)) => {
                    let lease = Lease { metadata: meta(None), spec: Some(spec(None)) };
                    timeout_at(bound.into(), self.api.create(&params, &lease)).await
                }
                Ok(Err(e)) => Ok(Err(e)),
                Err(elapsed) => Err(elapsed),
            },
        };
        match written {
            Ok(Ok(lease)) => {
                self.version = lease.metadata.resource_version;
                true
            }
            Ok(Err(e)) => {
                warn!(error = %e, "sharding: cannot renew the membership Lease");
                self.version = None;
                false
            }
            Err(_) => {
                warn!("sharding: renewing the membership Lease timed out");
                self.version = None;
                false
            }
        }
    }

    /// Every membership Lease of the instance; none when they cannot be listed.
    async fn list(&self, bound: Instant) -> Option<Vec<Listed>> {
        let params = ListParams::default().labels(&format!("{LABEL}={}", self.settings.instance));
        match timeout_at(bound.into(), self.api.list(&params)).await {
            Ok(Ok(leases)) => Some(
                leases
                    .items
                    .into_iter()
                    .filter(|l| l.metadata.name.as_deref() != Some(self.name.as_str()))
                    .filter_map(|l| {
                        let identity = l.spec.and_then(|s| s.holder_identity)?;
                        Some(Listed { identity, version: l.metadata.resource_version.unwrap_or_default() })
                    })
                    .collect(),
            ),
            Ok(Err(e)) => {
                warn!(error = %e, "sharding: cannot list the membership Leases");
                None
            }
            Err(_) => {
                warn!("sharding: listing the membership Leases timed out");
                None
            }
        }
    }
}
