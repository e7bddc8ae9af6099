//! The failover loop's memory in the host cluster: one ConfigMap per instance,
//! `flotilla-failover-<instance>`, holding [`Memory`] as JSON under `memory.json`.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::step::Memory;
use crate::host::Host;

const KEY: &str = "memory.json";

/// Where the memory is kept.
pub struct Store {
    /// The host cluster.
    pub host: Arc<Host>,
    /// The controller's namespace.
    pub namespace: String,
    /// The instance.
    pub instance: String,
}

impl Store {
    fn name(&self) -> String {
        format!("flotilla-failover-{}", self.instance)
    }

    /// The stored memory (`None`: none stored yet); an unreadable one is an error.
    pub async fn load(&self) -> anyhow::Result<Option<Memory>> {
        self.host.read_json(&self.namespace, (&self.name(), KEY)).await
    }

    /// [`Store::load`], retried every 5 s until it answers.
    pub async fn load_patiently(&self) -> Option<Memory> {
        let mut warned = false;
        loop {
            match self.load().await {
                Ok(memory) => return memory,
                Err(e) if !warned => {
                    warned = true;
                    warn!(error = %format!("{e:#}"), "failover: cannot read its memory; deciding nothing until it can");
                }
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// Stores the latest memory sent on `latest`, one write at a time (so an older
    /// memory never lands after a newer one), while this instance leads; a failed
    /// write is retried with whatever is latest then.
    pub async fn saver(self, fence: crate::leader::Fence, mut latest: tokio::sync::watch::Receiver<Option<Memory>>) {
        while latest.changed().await.is_ok() {
            let Some(memory) = latest.borrow_and_update().clone() else { continue };
            if !fence.holds() {
                continue;
            }
            if let Err(e) = self.save(&memory).await {
                warn!(error = %format!("{e:#}"), "failover: cannot store its memory; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
                latest.mark_changed();
            }
        }
    }

    /// Stores `memory`.
    pub async fn save(&self, memory: &Memory) -> anyhow::Result<()> {
        self.host.write_json(&self.namespace, (&self.name(), KEY), memory, "flotilla-failover").await
    }
}
