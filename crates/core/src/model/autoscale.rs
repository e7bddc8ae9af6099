//! `autoscaling.karmada.io/v1alpha1` FederatedHPA and CronFederatedHPA, typed so that a
//! bad spec is a load error. Their decisions are made outside the render: the render
//! reads the replica count that the autoscaler wrote back into the template.

use serde::Deserialize;
use serde_json::Value;

/// `scaleTargetRef` (a CrossVersionObjectReference in the same namespace).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScaleTargetRef {
    /// Target apiVersion.
    pub api_version: String,
    /// Target kind.
    pub kind: String,
    /// Target name.
    pub name: String,
}

/// FederatedHPA `spec`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FederatedHpaSpec {
    /// The workload to scale.
    pub scale_target_ref: ScaleTargetRef,
    /// Default 1, at least 1.
    #[serde(default)]
    pub min_replicas: Option<i32>,
    /// At least `minReplicas`.
    pub max_replicas: i32,
    /// autoscaling/v2 MetricSpec list; default one cpu Utilization 80 %.
    #[serde(default)]
    pub metrics: Vec<Value>,
    /// autoscaling/v2 behavior.
    #[serde(default)]
    pub behavior: Option<Value>,
}

/// CronFederatedHPA `spec`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronFederatedHpaSpec {
    /// A workload, or a FederatedHPA whose bounds the rules change.
    pub scale_target_ref: ScaleTargetRef,
    /// Scheduled rules.
    pub rules: Vec<CronRule>,
}

/// One CronFederatedHPA rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronRule {
    /// 1–32 characters, unique.
    pub name: String,
    /// Five-field cron expression.
    pub schedule: String,
    /// For workload targets.
    #[serde(default)]
    pub target_replicas: Option<i32>,
    /// For FederatedHPA targets.
    #[serde(default)]
    pub target_min_replicas: Option<i32>,
    /// For FederatedHPA targets.
    #[serde(default)]
    pub target_max_replicas: Option<i32>,
    /// Skip this rule.
    #[serde(default)]
    pub suspend: Option<bool>,
    /// IANA zone name.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Default 3.
    #[serde(default)]
    pub successful_history_limit: Option<i32>,
    /// Default 3.
    #[serde(default)]
    pub failed_history_limit: Option<i32>,
}
