//! Is a member's API server there? One probe, shared by every loop that needs to know:
//! `/readyz`, then `/healthz` (older or locked-down servers), each answering `ok`.

use std::sync::Arc;
use std::time::Duration;

use kube::config::Kubeconfig;

use super::connect::{Pool, Trust};

/// How to probe.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Which kubeconfig credentials to trust.
    pub trust: Trust,
    /// Per-request timeout of the client.
    pub timeout: Duration,
    /// Time between probes; each probe must answer within it.
    pub interval: Duration,
}

/// Probes `cluster` every interval and hands each answer to `report`, until `report`
/// returns false (its receiver is gone).
pub async fn every(
    pool: Arc<Pool>,
    kubeconfig: Arc<Kubeconfig>,
    cluster: String,
    probe: Probe,
    mut report: impl FnMut(bool) -> bool,
) {
    let mut every = tokio::time::interval(probe.interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let ok = match pool.client(&kubeconfig, &cluster, probe.trust, probe.timeout, None).await {
            Ok(client) => tokio::time::timeout(probe.interval, answers(&client)).await.unwrap_or(false),
            Err(_) => false,
        };
        if !report(ok) {
            return;
        }
    }
}

/// Whether the API server says it is ready (or, failing that, healthy).
pub async fn answers(client: &kube::Client) -> bool {
    for path in ["/readyz", "/healthz"] {
        let Ok(request) = http::Request::get(path).body(Vec::new()) else { return false };
        if client.request_text(request).await.is_ok_and(|text| text.trim() == "ok") {
            return true;
        }
    }
    false
}
