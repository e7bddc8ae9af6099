//! `flotilla.dev/v1alpha1` RolloutPolicy (namespaced) and ClusterRolloutPolicy: how a
//! new revision of the templates they select reaches the fleet, wave by wave
//! (docs/rollouts.md). Selection is PropagationPolicy's (`resourceSelectors`,
//! `priority`); waves choose clusters with Karmada's `ClusterAffinity`; the names of the
//! timing fields are OCM's rollout strategy's, with its meaning. Unknown fields are
//! refused, as elsewhere.

use std::time::Duration;

use serde::Deserialize;

use super::duration;
use super::policy::{ClusterAffinity, ResourceSelector};

/// `spec` of a RolloutPolicy or ClusterRolloutPolicy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    /// The templates this rollout governs (as a PropagationPolicy selects them).
    pub resource_selectors: Vec<ResourceSelector>,
    /// Of two policies selecting one template, the higher wins (nil is 0).
    #[serde(default)]
    pub priority: Option<i32>,
    /// In order; a cluster in no wave goes in a last wave of its own.
    #[serde(default)]
    pub waves: Vec<Wave>,
    /// How long every cluster of a wave must stay at the new revision and healthy, with
    /// every gate passing, before the next wave starts (OCM's `minSuccessTime`; 0).
    #[serde(default, deserialize_with = "duration::deserialize")]
    pub min_success_time: Duration,
    /// How long a wave may take to be applied and healthy before it counts as failed
    /// (OCM's `progressDeadline`; Kubernetes' Deployment default of 10 minutes).
    #[serde(default = "ten_minutes", deserialize_with = "duration::deserialize")]
    pub progress_deadline: Duration,
    /// How many clusters of a wave may fail before the rollout halts (OCM's
    /// `maxFailures`: a count or a percentage of the wave; 0).
    #[serde(default)]
    pub max_failures: Amount,
    /// What a halt does.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// Checked through each wave's soak.
    #[serde(default)]
    pub gates: Vec<Gate>,
    /// When waves may start.
    #[serde(default)]
    pub windows: Vec<Window>,
    /// Whether a revision that changes only `spec.replicas` (the autoscaler's
    /// write-back) goes through the waves.
    #[serde(default)]
    pub replica_only_changes: ReplicaOnlyChanges,
}

fn ten_minutes() -> Duration {
    Duration::from_secs(600)
}

/// One wave: the clusters it takes, and how many of them move at once.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wave {
    /// Unique within the policy; status and metrics name the wave by it.
    pub name: String,
    /// The clusters of this wave (Karmada's ClusterAffinity); a cluster an earlier wave
    /// took stays there.
    pub cluster_affinity: ClusterAffinity,
    /// At most this many of the wave's clusters move at once (a count or a percentage,
    /// rounded up; all of them when unset).
    #[serde(default)]
    pub max_concurrent: Option<Amount>,
}

/// A number of clusters, or a percentage of a wave's (`3`, `"25%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// A count.
    Count(u32),
    /// Percent of the wave.
    Percent(u32),
}

impl Default for Amount {
    fn default() -> Self {
        Amount::Count(0)
    }
}

impl Amount {
    /// Of `total` clusters, rounding a percentage up (`Percent(25)` of 3 is 1).
    pub fn of(self, total: usize) -> usize {
        match self {
            Amount::Count(n) => n as usize,
            Amount::Percent(p) => (total * p as usize).div_ceil(100),
        }
    }

    /// Of `total` clusters, rounding a percentage down: how many may fail.
    pub fn floor_of(self, total: usize) -> usize {
        match self {
            Amount::Count(n) => n as usize,
            Amount::Percent(p) => total * p as usize / 100,
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(u32),
            Text(String),
        }
        let bad =
            |text: &str| serde::de::Error::custom(format!("{text:?} is neither a count nor a percentage like \"25%\""));
        match Written::deserialize(deserializer)? {
            Written::Count(n) => Ok(Amount::Count(n)),
            Written::Text(text) => match text.strip_suffix('%') {
                Some(p) => p.parse().ok().filter(|p| *p <= 100).map(Amount::Percent).ok_or_else(|| bad(&text)),
                None => text.parse().map(Amount::Count).map_err(|_| bad(&text)),
            },
        }
    }
}

/// What a failing gate, health check or deadline does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum OnFailure {
    /// Hold: moved clusters keep the new revision, the others the last good one, until
    /// `flotilla rollout resume` or `abort`, or a newer commit.
    #[default]
    Pause,
    /// Re-apply the last good revision's manifests to the clusters that had moved.
    Revert,
}

/// A metric check, evaluated through each wave's soak.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gate {
    /// Status and logs name the gate by it.
    pub name: String,
    /// Where the value comes from.
    pub prometheus: Prometheus,
    /// The value must stay at or below this.
    #[serde(default)]
    pub max: Option<f64>,
    /// The value must stay at or above this.
    #[serde(default)]
    pub min: Option<f64>,
}

impl Gate {
    /// Whether `value` passes (a missing value, as from a query that returned nothing
    /// or failed, does not).
    pub fn passes(&self, value: Option<f64>) -> bool {
        value.is_some_and(|v| !v.is_nan() && self.max.is_none_or(|m| v <= m) && self.min.is_none_or(|m| v >= m))
    }
}

/// A Prometheus instant query.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Prometheus {
    /// The server, `http://` or `https://`.
    pub address: String,
    /// PromQL; its result must be one sample (a scalar, or a vector of one element).
    pub query: String,
}

/// A window of time in which waves may start (`allow`) or may not (`deny`), as Argo
/// CD's sync windows: from each time `schedule` names, for `duration`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Window {
    /// `allow` or `deny`.
    pub kind: WindowKind,
    /// Five-field cron: when the window opens.
    pub schedule: String,
    /// How long it stays open.
    #[serde(deserialize_with = "duration::deserialize")]
    pub duration: Duration,
    /// IANA time zone of the schedule (UTC when unset).
    #[serde(default)]
    pub time_zone: Option<String>,
}

/// Whether a window lets waves start or stops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowKind {
    /// Waves start only inside some allow window (when any is declared).
    Allow,
    /// No wave starts inside a deny window; deny wins over allow.
    Deny,
}

/// Whether a revision that changes nothing but `spec.replicas` waits for the waves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum ReplicaOnlyChanges {
    /// Everywhere at once, as the autoscaler's write-back needs.
    #[default]
    Immediate,
    /// Through the waves like any other change.
    Waves,
}
