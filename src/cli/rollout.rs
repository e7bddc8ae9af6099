//! The flags of `flotilla rollout`: where a rollout stands, and commands to it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::duration;

/// `flotilla rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: RolloutAction,
}

/// What `flotilla rollout` does.
#[derive(Debug, Subcommand)]
pub enum RolloutAction {
    /// Where each rollout stands, as the controller reports it: wave, soak, gates.
    Status(RolloutStatusArgs),
    /// Hold a rollout where it stands: no further wave starts until `resume`.
    Pause(RolloutCommandArgs),
    /// Go on: after a pause, or a halt (the batch is judged afresh; after a revert, the
    /// rollout starts over from the first wave).
    Resume(RolloutCommandArgs),
    /// Send the members that moved back to the last good revision, and end the rollout.
    Abort(RolloutCommandArgs),
}

/// `flotilla rollout status`.
#[derive(Debug, Args)]
pub struct RolloutStatusArgs {
    /// The controller (`http://ADDR`, its --listen address).
    #[arg(long, value_name = "URL")]
    pub controller: String,
    /// Only this policy: `NAMESPACE/NAME` (a RolloutPolicy) or `NAME` (a
    /// ClusterRolloutPolicy).
    pub policy: Option<String>,
    /// Output: text, or the controller's JSON for the rollouts.
    #[arg(short = 'o', long, value_enum, default_value_t = StatusFormat::Text)]
    pub output: StatusFormat,
    /// How long the request may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
}

/// `flotilla rollout pause|resume|abort`: recorded in the host cluster, where the
/// leading controller reads it within one `--rollout-monitor-period`. Who may give one
/// is whoever may update ConfigMap `flotilla-rollout-commands-<instance>` there.
#[derive(Debug, Args)]
pub struct RolloutCommandArgs {
    /// The policy: `NAMESPACE/NAME` (a RolloutPolicy) or `NAME` (a ClusterRolloutPolicy).
    pub policy: String,
    /// The controller's host cluster (default: in-cluster configuration).
    #[arg(long, value_name = "FILE")]
    pub host_kubeconfig: Option<PathBuf>,
    /// Context in --host-kubeconfig (default: its current context).
    #[arg(long, value_name = "NAME", requires = "host_kubeconfig")]
    pub host_context: Option<String>,
    /// The controller's namespace in the host cluster.
    #[arg(long, default_value = "flotilla-system", env = "POD_NAMESPACE")]
    pub namespace: String,
    /// The controller's instance (its --instance).
    #[arg(long, default_value = "default", value_parser = super::instance_name)]
    pub instance: String,
}

/// Output of `flotilla rollout status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    /// A few lines per rollout.
    Text,
    /// `/status`'s `rollouts`, as JSON.
    Json,
}
