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

impl ScaleTargetRef {
    /// The target's key, in the autoscaler's `namespace`.
    pub fn key(&self, namespace: &str) -> super::ObjectKey {
        super::ObjectKey {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: Some(namespace.to_owned()),
            name: self.name.clone(),
        }
    }
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
    pub metrics: Vec<MetricSpec>,
    /// autoscaling/v2 behavior; when present, missing parts take Kubernetes' defaults.
    #[serde(default)]
    pub behavior: Option<Behavior>,
}

/// An autoscaling/v2 MetricSpec. flotilla computes `Resource` and `ContainerResource`
/// metrics (what metrics.k8s.io serves); the others parse, and the autoscaler reports
/// them as unsupported instead of scaling on them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricSpec {
    /// `Resource`, `ContainerResource`, `Pods`, `Object` or `External`.
    #[serde(rename = "type")]
    pub kind: String,
    /// For `Resource`.
    #[serde(default)]
    pub resource: Option<ResourceMetric>,
    /// For `ContainerResource`.
    #[serde(default)]
    pub container_resource: Option<ResourceMetric>,
    /// For `Pods` (custom metrics API; not computed).
    #[serde(default)]
    pub pods: Option<Value>,
    /// For `Object` (custom metrics API; not computed).
    #[serde(default)]
    pub object: Option<Value>,
    /// For `External` (external metrics API; not computed).
    #[serde(default)]
    pub external: Option<Value>,
}

/// A resource metric source: `cpu` or `memory` of every container (or of `container`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceMetric {
    /// Resource name.
    pub name: String,
    /// For `ContainerResource`: the container.
    #[serde(default)]
    pub container: Option<String>,
    /// The target.
    pub target: MetricTarget,
}

/// autoscaling/v2 MetricTarget.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricTarget {
    /// `Utilization`, `AverageValue` or `Value`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Percent of the request, for `Utilization`.
    #[serde(default)]
    pub average_utilization: Option<i32>,
    /// A quantity per pod, for `AverageValue`.
    #[serde(default)]
    pub average_value: Option<Value>,
    /// A total quantity, for `Value`.
    #[serde(default)]
    pub value: Option<Value>,
}

/// autoscaling/v2 HorizontalPodAutoscalerBehavior.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Behavior {
    /// Scaling up.
    #[serde(default)]
    pub scale_up: Option<ScalingRules>,
    /// Scaling down.
    #[serde(default)]
    pub scale_down: Option<ScalingRules>,
}

/// autoscaling/v2 HPAScalingRules.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalingRules {
    /// Seconds of recommendations to consider.
    #[serde(default)]
    pub stabilization_window_seconds: Option<i32>,
    /// `Max` (default), `Min` or `Disabled`.
    #[serde(default)]
    pub select_policy: Option<String>,
    /// Rate limits.
    #[serde(default)]
    pub policies: Option<Vec<ScalingPolicy>>,
    /// autoscaling/v2 (1.33+) per-direction tolerance; flotilla uses the global 0.1.
    #[serde(default)]
    pub tolerance: Option<Value>,
}

/// autoscaling/v2 HPAScalingPolicy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Pods or percent per period.
    pub value: i32,
    /// Period length.
    pub period_seconds: i32,
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
