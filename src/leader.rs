//! Leader election on a Lease in the host cluster, so replicas can stand by. Loops learn
//! whether they may write from a `watch` of the leadership ([`Leadership::subscribe`]);
//! without election an instance always leads.

use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::host::Host;

/// The Lease's name and how long it lasts (it lives in the controller's namespace).
#[derive(Debug, Clone)]
pub struct Election {
    /// Lease name.
    pub name: String,
    /// Seconds of validity without renewal.
    pub duration: u64,
}

type LeaseTask =
    tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>;

/// Whether this instance leads, kept current by a task renewing the Lease.
pub struct Leadership {
    watch: watch::Receiver<bool>,
    /// Without election: the sender of a constant `true`, kept so the watch stays open.
    _always: Option<watch::Sender<bool>>,
    task: Option<LeaseTask>,
}

impl Leadership {
    /// Starts electing on `election`'s Lease, or leads at once without one.
    pub async fn start(election: Option<&Election>, host: &Host, namespace: &str) -> anyhow::Result<Self> {
        let Some(election) = election else {
            let (always, watch) = watch::channel(true);
            return Ok(Self { watch, _always: Some(always), task: None });
        };
        let identity =
            format!("{}-{}", std::env::var("HOSTNAME").unwrap_or_else(|_| "flotilla".into()), std::process::id());
        let grace = (election.duration / 3).max(1);
        let manager = kube_lease_manager::LeaseManagerBuilder::new(host.client().await?, &election.name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(election.duration)
            .with_grace(grace)
            .with_field_manager("flotilla-lease")
            .build()
            .await
            .context("creating the lease manager")?;
        let (watch, task) = manager.watch().await;
        info!(lease = %format!("{namespace}/{}", election.name), "leader election on");
        Ok(Self { watch, _always: None, task: Some(task) })
    }

    /// A watch of the leadership, for a loop.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.watch.clone()
    }

    /// Gives the lease up (closing every watch makes the manager release it): the lease no
    /// longer names a process that is gone, and a standby takes it on its next look
    /// instead of first waiting for it to lapse and clearing it. Loops holding a watch
    /// must have stopped.
    pub async fn release(self) {
        let Self { watch, _always, task } = self;
        drop(watch);
        if let Some(task) = task {
            match tokio::time::timeout(Duration::from_secs(5), task).await {
                Ok(Ok(Ok(_))) => info!("released the lease"),
                Ok(Ok(Err(e))) => warn!(error = %e, "could not release the lease; it lapses after its duration"),
                Ok(Err(e)) => warn!(error = %e, "the lease task failed"),
                Err(_) => warn!("releasing the lease timed out; it lapses after its duration"),
            }
        }
    }
}

/// Resolves when `leading` changes; never when its sender is gone.
pub async fn changed(leading: &mut watch::Receiver<bool>) {
    if leading.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
