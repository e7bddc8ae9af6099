//! `cluster.karmada.io/v1alpha1` Cluster, plus the observed facts about clusters that a
//! render takes as input (free capacity, previous placements).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::policy::Taint;

/// A member cluster as declared in the repo.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// `metadata.name`; also the kubeconfig context name.
    pub name: String,
    /// `metadata.labels`, matched by `clusterAffinity.labelSelector`.
    pub labels: BTreeMap<String, String>,
    /// `spec`.
    pub spec: ClusterSpec,
    /// Where it was declared.
    pub origin: super::Origin,
}

/// `spec` of a Cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// Unique id.
    #[serde(default)]
    pub id: Option<String>,
    /// `Push` (flotilla applies) or `Pull` (an agent in the member applies).
    pub sync_mode: SyncMode,
    /// API endpoint; informational, credentials come from the kubeconfig context.
    #[serde(default)]
    pub api_endpoint: Option<String>,
    /// Karmada's credential reference; accepted, never read (credentials stay out of Git).
    #[serde(default)]
    pub secret_ref: Option<Value>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub impersonator_secret_ref: Option<Value>,
    /// Accepted, refused at connect time unless explicitly allowed.
    #[serde(default)]
    pub insecure_skip_tls_verification: bool,
    /// Accepted for compatibility.
    #[serde(default, rename = "proxyURL")]
    pub proxy_url: Option<String>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub proxy_header: Option<BTreeMap<String, String>>,
    /// Cloud provider, matched by field selectors and spread constraints.
    #[serde(default)]
    pub provider: Option<String>,
    /// Region, matched by field selectors and spread constraints.
    #[serde(default)]
    pub region: Option<String>,
    /// Deprecated single zone; folded into `zones`.
    #[serde(default)]
    pub zone: Option<String>,
    /// Zones.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Taints; NoSchedule and NoExecute keep untolerating workloads away.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub resource_models: Vec<Value>,
}

/// `syncMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum SyncMode {
    /// The controller holds credentials and applies.
    Push,
    /// An agent in the member applies.
    Pull,
}

impl Cluster {
    /// Zones, with the deprecated `zone` folded in as Karmada's mutation does.
    pub fn zones(&self) -> Vec<&str> {
        let mut zones: Vec<&str> = self.spec.zones.iter().map(String::as_str).collect();
        if zones.is_empty() {
            zones.extend(self.spec.zone.as_deref());
        }
        zones
    }
}

/// Facts about the world that a render takes as arguments: what each cluster has free
/// and where Divided workloads were placed last time. Static weights and Duplicated
/// need none of it; dynamic weights and Aggregated do. Read from `--cluster-state FILE`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterState {
    /// Per cluster name.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterCapacity>,
    /// Previous placements, keyed by [`ObjectKey::spelled`](super::ObjectKey::spelled)
    /// (`<apiVersion>/<kind>/<namespace>/<name>`, namespace empty for cluster-scoped objects).
    #[serde(default)]
    pub previous: BTreeMap<String, PreviousPlacement>,
    /// Replica counts decided outside Git (the autoscaler's `--writeback=state`), keyed
    /// like `previous`; they replace the templates' `spec.replicas`.
    #[serde(default)]
    pub replicas: BTreeMap<String, i64>,
    /// Taints observed live per cluster (health, ClusterTaintPolicies), on top of the
    /// declared `spec.taints`. Only workloads heed them, and only where they are not
    /// running yet: moving what runs is eviction's business, below.
    #[serde(default)]
    pub taints: BTreeMap<String, Vec<Taint>>,
    /// Workloads failover moved, keyed like `previous`: cluster → the eviction. The
    /// workload is placed as if that cluster did not fit.
    #[serde(default)]
    pub evictions: BTreeMap<String, BTreeMap<String, Evicted>>,
}

impl ClusterState {
    /// Whether anything is held per object (`previous`, `replicas`, `evictions`): when
    /// not, placement need not spell a template's key to look it up.
    pub fn has_object_state(&self) -> bool {
        !(self.previous.is_empty() && self.replicas.is_empty() && self.evictions.is_empty())
    }
}

/// A workload's eviction from one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Evicted {
    /// The old copy stays there with these replicas (purge mode `Gracefully` until the
    /// new replicas are healthy, or `Never`); absent: it is gone from that cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<i64>,
}

/// Free capacity of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterCapacity {
    /// Replicas any workload may still add here; overrides the resource estimate.
    #[serde(default)]
    pub available_replicas: Option<i64>,
    /// Karmada's `status.resourceSummary`: allocatable, allocated, allocating.
    #[serde(default)]
    pub resource_summary: Option<ResourceSummary>,
}

/// `status.resourceSummary` of a Karmada Cluster.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    /// Total allocatable per resource (`cpu`, `memory`, `pods`, …).
    #[serde(default)]
    pub allocatable: BTreeMap<String, String>,
    /// Requested by running pods.
    #[serde(default)]
    pub allocated: BTreeMap<String, String>,
    /// Requested by pods not yet scheduled.
    #[serde(default)]
    pub allocating: BTreeMap<String, String>,
}

/// Where a workload ran before, and which `clusterAffinities` term placed it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreviousPlacement {
    /// Cluster name → replicas.
    #[serde(default)]
    pub clusters: BTreeMap<String, i64>,
    /// `schedulerObservedAffinityName`.
    #[serde(default)]
    pub observed_affinity: Option<String>,
}
