//! `policy.karmada.io/v1alpha1` PropagationPolicy and ClusterPropagationPolicy, field for
//! field as Karmada's CRDs declare them (the override policies are in
//! [`override_policy`](super::override_policy), re-exported here). Unknown fields are
//! rejected so a typo is an error, not a silent no-op.

use serde::Deserialize;
use serde_json::Value;

pub use super::override_policy::*;
use super::selector::{LabelSelector, Requirement};

/// `ResourceSelector`: which templates a policy selects.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSelector {
    /// Compared as a string with the template's apiVersion.
    pub api_version: String,
    /// Compared with the template's kind.
    pub kind: String,
    /// Empty inherits the policy's namespace (PropagationPolicy, OverridePolicy).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Exact name; when set the label selector is ignored.
    #[serde(default)]
    pub name: Option<String>,
    /// Label selector, consulted only without `name`.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

/// `PropagationSpec`, shared by PropagationPolicy and ClusterPropagationPolicy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropagationSpec {
    /// At least one.
    pub resource_selectors: Vec<ResourceSelector>,
    /// Deprecated alias of `propagateDeps`.
    #[serde(default)]
    pub association: bool,
    /// Propagate referenced ConfigMaps, Secrets, ServiceAccounts and PVCs along.
    #[serde(default)]
    pub propagate_deps: bool,
    /// Where the templates go.
    #[serde(default)]
    pub placement: Placement,
    /// Explicit priority; nil counts as 0; higher wins.
    #[serde(default)]
    pub priority: Option<i32>,
    /// `Always` or `Never` (default).
    #[serde(default)]
    pub preemption: Option<Preemption>,
    /// OverridePolicies that must exist before the policy applies.
    #[serde(default)]
    pub dependent_overrides: Vec<String>,
    /// Accepted for compatibility; flotilla has one scheduler.
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// The failover opt-in: without it a workload never moves off a member.
    #[serde(default)]
    pub failover: Option<super::failover::FailoverBehavior>,
    /// `Abort` (default) or `Overwrite`: what to do with a pre-existing member object.
    #[serde(default)]
    pub conflict_resolution: Option<ConflictResolution>,
    /// `""` or `Lazy`; accepted, with no effect in a stateless render.
    #[serde(default)]
    pub activation_preference: Option<String>,
    /// Suspends dispatching, to all clusters or named ones.
    #[serde(default)]
    pub suspension: Option<Suspension>,
    /// Keep member copies when the template is deleted.
    #[serde(default)]
    pub preserve_resources_on_deletion: Option<bool>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub schedule_priority: Option<Value>,
}

/// `preemption`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Preemption {
    /// Preempt lower-priority claims (needs names in every selector).
    Always,
    /// Never preempt.
    Never,
}

/// `conflictResolution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ConflictResolution {
    /// Refuse to take over an object flotilla did not create.
    Abort,
    /// Take it over.
    Overwrite,
}

/// `suspension`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Suspension {
    /// Suspend every cluster.
    #[serde(default)]
    pub dispatching: Option<bool>,
    /// Suspend the named clusters.
    #[serde(default)]
    pub dispatching_on_clusters: Option<SuspendClusters>,
}

/// `suspension.dispatchingOnClusters`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuspendClusters {
    /// Names of suspended clusters.
    #[serde(default)]
    pub cluster_names: Vec<String>,
}

/// `placement`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    /// A single affinity; cannot be combined with `clusterAffinities`.
    #[serde(default)]
    pub cluster_affinity: Option<ClusterAffinity>,
    /// Ordered fallback groups.
    #[serde(default)]
    pub cluster_affinities: Vec<ClusterAffinityTerm>,
    /// Tolerations of cluster taints.
    #[serde(default)]
    pub cluster_tolerations: Vec<Toleration>,
    /// Spread over clusters, regions, zones or providers.
    #[serde(default)]
    pub spread_constraints: Vec<SpreadConstraint>,
    /// Absent means Duplicated.
    #[serde(default)]
    pub replica_scheduling: Option<ReplicaScheduling>,
    /// Alpha in Karmada (gate off by default); accepted, not acted on.
    #[serde(default)]
    pub workload_affinity: Option<Value>,
}

/// `ClusterAffinity`: all conditions ANDed; `exclude` always wins.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAffinity {
    /// Matches Cluster labels.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// `provider`, `region` and `zone` requirements.
    #[serde(default)]
    pub field_selector: Option<FieldSelector>,
    /// When non-empty the cluster name must be listed.
    #[serde(default)]
    pub cluster_names: Vec<String>,
    /// Never these clusters.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// `fieldSelector`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldSelector {
    /// Requirements, ANDed.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// One `clusterAffinities` term: a name plus an inline affinity (spelled out rather than
/// flattened because serde cannot combine `flatten` with `deny_unknown_fields`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAffinityTerm {
    /// Unique within the policy; recorded as the observed term.
    pub affinity_name: String,
    /// As in [`ClusterAffinity`].
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// As in [`ClusterAffinity`].
    #[serde(default)]
    pub field_selector: Option<FieldSelector>,
    /// As in [`ClusterAffinity`].
    #[serde(default)]
    pub cluster_names: Vec<String>,
    /// As in [`ClusterAffinity`].
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Extra tiers for dynamic or aggregated division.
    #[serde(default)]
    pub overflow_affinities: Vec<ClusterAffinityTerm>,
}

impl ClusterAffinityTerm {
    /// The inline affinity of this term.
    pub fn affinity(&self) -> ClusterAffinity {
        ClusterAffinity {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            cluster_names: self.cluster_names.clone(),
            exclude: self.exclude.clone(),
        }
    }
}

/// `corev1.Toleration`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    #[serde(default)]
    pub key: String,
    /// `Equal` (default) or `Exists`.
    #[serde(default)]
    pub operator: String,
    /// Compared with `Equal`.
    #[serde(default)]
    pub value: String,
    /// Empty matches every effect.
    #[serde(default)]
    pub effect: String,
    /// How long a NoExecute taint is tolerated before the failover loop evicts;
    /// absent: for ever.
    #[serde(default)]
    pub toleration_seconds: Option<i64>,
}

/// `corev1.Taint` on a Cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: String,
    /// Set by Karmada for NoExecute taints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

/// `spreadConstraints[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadConstraint {
    /// `cluster`, `region`, `zone` or `provider`; defaults to `cluster` without a label.
    #[serde(default)]
    pub spread_by_field: Option<SpreadField>,
    /// A cluster label to group by.
    #[serde(default)]
    pub spread_by_label: Option<String>,
    /// Upper bound on groups; 0 means none may be chosen, so it must be set.
    #[serde(default)]
    pub max_groups: i32,
    /// Lower bound on groups; defaults to 1.
    #[serde(default)]
    pub min_groups: i32,
}

/// `spreadByField` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpreadField {
    /// One group per cluster.
    Cluster,
    /// Group by `spec.region`.
    Region,
    /// Group by `spec.zones`.
    Zone,
    /// Group by `spec.provider`.
    Provider,
}

/// `replicaScheduling`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaScheduling {
    /// Defaults to Divided when `replicaScheduling` is present.
    #[serde(default)]
    pub replica_scheduling_type: Option<ReplicaSchedulingType>,
    /// Defaults to Weighted for Divided.
    #[serde(default)]
    pub replica_division_preference: Option<DivisionPreference>,
    /// Static or dynamic weights.
    #[serde(default)]
    pub weight_preference: Option<WeightPreference>,
}

/// `replicaSchedulingType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ReplicaSchedulingType {
    /// Every cluster runs all replicas.
    Duplicated,
    /// Replicas are split across clusters.
    Divided,
}

/// `replicaDivisionPreference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum DivisionPreference {
    /// Pack into as few clusters as possible.
    Aggregated,
    /// Split by weights.
    Weighted,
}

/// `weightPreference`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeightPreference {
    /// Weight per matching clusters; a cluster takes the maximum over matching rules.
    #[serde(default)]
    pub static_weight_list: Vec<StaticClusterWeight>,
    /// When set the static list is ignored.
    #[serde(default)]
    pub dynamic_weight: Option<DynamicWeightFactor>,
}

/// `staticWeightList[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticClusterWeight {
    /// Which clusters the weight applies to.
    pub target_cluster: ClusterAffinity,
    /// At least 1.
    pub weight: i64,
}

/// `dynamicWeight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum DynamicWeightFactor {
    /// Weight by each cluster's available replicas.
    AvailableReplicas,
}
