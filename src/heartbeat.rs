//! Pull members' heartbeats, as karmada-agent keeps them: the agent renews a
//! `coordination.k8s.io` Lease per member in the push controller's host cluster
//! (`flotilla-cluster-<member>`, labelled [`LABEL`]), and the push controller's failover
//! loop reads every such Lease's renewal time. A member whose agent stops renewing goes
//! Unknown there.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::host::Host;

/// The label every heartbeat Lease carries: its value is the member's name.
pub const LABEL: &str = "flotilla.dev/cluster-heartbeat";

/// Karmada's `--cluster-lease-duration`.
const LEASE_SECONDS: i32 = 40;

/// The Lease of `cluster`.
pub fn lease_name(cluster: &str) -> String {
    format!("flotilla-cluster-{cluster}")
}

/// Renews `cluster`'s Lease in `namespace` of `host` every `every` until `stop`; a
/// failed renewal is retried at the next one (the push controller tolerates the monitor
/// grace period of silence).
pub async fn renew(host: Host, namespace: String, cluster: String, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    info!(cluster, namespace, "renewing this member's heartbeat Lease in the push controller's host cluster");
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        match renew_once(&host, &namespace, &cluster).await {
            Ok(()) if failing => {
                failing = false;
                info!(cluster, "heartbeat Lease renewed again");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                warn!(cluster, error = format!("{e:#}"), "cannot renew the heartbeat Lease");
            }
            Err(_) => {}
        }
    }
}

async fn renew_once(host: &Host, namespace: &str, cluster: &str) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(host.client().await?, namespace);
    let name = lease_name(cluster);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "labels": {LABEL: cluster}},
        "spec": {"holderIdentity": cluster, "leaseDurationSeconds": LEASE_SECONDS,
                 "renewTime": MicroTime(Timestamp::now())},
    });
    let params = PatchParams::apply("flotilla-agent").force();
    leases.patch(&name, &params, &Patch::Apply(lease)).await.with_context(|| format!("applying Lease {name}"))?;
    Ok(())
}

/// Every heartbeat Lease in `namespace` of `host`: member → last renewal (ms since the
/// epoch).
pub async fn read(host: &Host, namespace: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    let leases: Api<Lease> = Api::namespaced(host.client().await?, namespace);
    let list = leases.list(&ListParams::default().labels(LABEL)).await.context("listing heartbeat Leases")?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|lease| {
            let cluster = lease.metadata.labels?.remove(LABEL)?;
            let renewed = lease.spec?.renew_time?.0.as_millisecond();
            Some((cluster, renewed))
        })
        .collect())
}
