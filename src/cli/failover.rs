//! The flags of failover: member health, taints and evictions (the push controller),
//! and the heartbeat a Pull member's agent renews. Defaults are Karmada's.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::duration;

/// Failover and heartbeat flags of `flotilla run`.
#[derive(Debug, Args)]
pub struct FailoverArgs {
    /// Evict opted-in workloads (`spec.failover`) from members whose NoExecute taint
    /// they do not tolerate, and move unhealthy applications. Off by default, as in
    /// Karmada: health and taints are kept either way.
    #[arg(long)]
    pub enable_no_execute_taint_eviction: bool,
    /// Time between probes of each Push member's API server.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub cluster_status_update_frequency: Duration,
    /// Time between reads of the Pull members' heartbeat Leases and the watched
    /// workloads' health.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub cluster_monitor_period: Duration,
    /// A member heard from neither by probe nor by heartbeat this long is Unknown.
    #[arg(long, value_name = "DURATION", default_value = "40s", value_parser = duration)]
    pub cluster_monitor_grace_period: Duration,
    /// After taking the lead, members have this long to be heard from before they
    /// count as Unknown.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub cluster_startup_grace_period: Duration,
    /// A Push member whose probes fail this long is NotReady.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub cluster_failure_threshold: Duration,
    /// A NotReady member whose probes pass this long is Ready again.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub cluster_success_threshold: Duration,
    /// Evictions per second, at most.
    #[arg(long, value_name = "PER_SECOND", default_value_t = 0.5)]
    pub eviction_rate: f64,
    /// How long a gracefully evicted copy waits for its replacement to be healthy
    /// (cluster failover; application failover uses its policy's gracePeriodSeconds).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration)]
    pub graceful_eviction_timeout: Duration,
    /// Pull-mode agent: renew this member's heartbeat Lease in the push controller's
    /// host cluster, reached with this kubeconfig (in --namespace there).
    #[arg(long, value_name = "FILE", requires = "agent")]
    pub heartbeat_kubeconfig: Option<PathBuf>,
    /// Context of the heartbeat kubeconfig.
    #[arg(long, value_name = "NAME", requires = "heartbeat_kubeconfig")]
    pub heartbeat_context: Option<String>,
    /// Time between heartbeat renewals.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub heartbeat_interval: Duration,
}
