//! Failover as Karmada declares it: a PropagationPolicy's `spec.failover` (what a
//! workload opts into) and `policy.karmada.io/v1alpha1` ClusterTaintPolicy (which
//! taints a cluster's conditions bring). Unknown fields are refused, as elsewhere.

use serde::Deserialize;
use serde_json::Value;

use super::policy::ClusterAffinity;

/// `spec.failover`: the opt-in. A workload whose policy has none never moves.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailoverBehavior {
    /// Moves a workload that stays unhealthy in one member.
    #[serde(default)]
    pub application: Option<ApplicationFailover>,
    /// How a workload leaves a member it no longer tolerates (NoExecute taints).
    #[serde(default)]
    pub cluster: Option<ClusterFailover>,
}

impl FailoverBehavior {
    /// How the old copy goes when a cluster's taint evicts the workload: the cluster
    /// behaviour's purge mode, else the application behaviour's, else `Gracefully`.
    pub fn cluster_purge(&self) -> PurgeMode {
        let cluster = self.cluster.as_ref().and_then(|c| c.purge_mode);
        cluster.or(self.application.as_ref().and_then(|a| a.purge_mode)).unwrap_or(PurgeMode::Gracefully)
    }
}

/// `spec.failover.application`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplicationFailover {
    /// When the workload counts as failed.
    #[serde(default)]
    pub decision_conditions: DecisionConditions,
    /// What happens to the old copy (default `Gracefully`).
    #[serde(default)]
    pub purge_mode: Option<PurgeMode>,
    /// `Gracefully`: the longest the old copy waits for the new one (default 600).
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
    /// Accepted for compatibility; state is not carried between members.
    #[serde(default)]
    pub state_preservation: Option<Value>,
}

impl ApplicationFailover {
    /// Seconds unhealthy before the workload moves (Karmada's default: 300).
    pub fn toleration_seconds(&self) -> i64 {
        self.decision_conditions.toleration_seconds.unwrap_or(300)
    }
}

/// `decisionConditions`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionConditions {
    /// Seconds unhealthy before the workload moves.
    #[serde(default)]
    pub toleration_seconds: Option<i64>,
}

/// `spec.failover.cluster`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFailover {
    /// What happens to the old copy (default `Gracefully`).
    #[serde(default)]
    pub purge_mode: Option<PurgeMode>,
    /// Accepted for compatibility; state is not carried between members.
    #[serde(default)]
    pub state_preservation: Option<Value>,
}

/// `purgeMode`: what becomes of the copy in the member the workload leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum PurgeMode {
    /// Removed at once (Karmada also spells it `Immediately`).
    #[serde(alias = "Immediately")]
    Directly,
    /// Kept until the new replicas are healthy elsewhere or the grace period ends
    /// (Karmada also spells it `Graciously`).
    #[serde(alias = "Graciously")]
    Gracefully,
    /// Kept for good; only Git (or a person) removes it.
    Never,
}

/// `ClusterTaintPolicy` spec: taints added while a cluster's conditions match
/// `addOnConditions`, removed once they match `removeOnConditions`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterTaintPolicySpec {
    /// Which clusters; absent means every cluster.
    #[serde(default)]
    pub target_clusters: Option<ClusterAffinity>,
    /// All must match for the taints to be added.
    #[serde(default)]
    pub add_on_conditions: Vec<MatchCondition>,
    /// All must match for the taints to be removed.
    #[serde(default)]
    pub remove_on_conditions: Vec<MatchCondition>,
    /// At least one.
    pub taints: Vec<PolicyTaint>,
}

/// One condition test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    /// The condition's type (`Ready`).
    pub condition_type: String,
    /// `In` or `NotIn`.
    pub operator: ConditionOperator,
    /// `True`, `False`, `Unknown`.
    pub status_values: Vec<String>,
}

/// `In` or `NotIn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ConditionOperator {
    /// The status is one of the values.
    In,
    /// The status is none of the values.
    NotIn,
}

/// A taint a ClusterTaintPolicy manages.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTaint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: String,
    /// `NoSchedule` or `NoExecute`.
    pub effect: String,
}
