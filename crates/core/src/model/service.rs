//! `networking.karmada.io/v1alpha1` MultiClusterService, typed so that a bad spec is a
//! load error. Like a policy, it is read by flotilla and never sent to a member: it
//! places its Service on the provider and consumer clusters, and the endpoints loop
//! copies the providers' EndpointSlices to the consumers.

use serde::Deserialize;

/// How the Service is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ExposureType {
    /// Consumers reach the providers' endpoints under the Service's own name.
    CrossCluster,
    /// A cloud load balancer in front of the providers (Karmada's
    /// multicluster-cloud-provider): accepted, not acted on.
    LoadBalancer,
}

/// A cluster named by a MultiClusterService.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSelector {
    /// The cluster's name.
    pub name: String,
}

/// A port the Service is exposed on (used by the LoadBalancer type only).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExposurePort {
    /// The port's name in the Service.
    #[serde(default)]
    pub name: Option<String>,
    /// The port number.
    pub port: i32,
}

/// `MultiClusterService.spec`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiClusterServiceSpec {
    /// Exposure types; at least one.
    pub types: Vec<ExposureType>,
    /// Exposed ports (LoadBalancer).
    #[serde(default)]
    pub ports: Vec<ExposurePort>,
    /// Deprecated in Karmada; accepted and ignored.
    #[serde(default)]
    pub range: Option<serde_json::Value>,
    /// Deprecated spelling of `providerClusters`.
    #[serde(default)]
    pub service_provision_clusters: Vec<String>,
    /// Deprecated spelling of `consumerClusters`.
    #[serde(default)]
    pub service_consumption_clusters: Vec<String>,
    /// Clusters whose endpoints serve the Service; empty: every cluster.
    #[serde(default)]
    pub provider_clusters: Vec<ClusterSelector>,
    /// Clusters that call the Service; empty: every cluster.
    #[serde(default)]
    pub consumer_clusters: Vec<ClusterSelector>,
}

impl MultiClusterServiceSpec {
    /// Whether the CrossCluster type is on (the only one flotilla acts on).
    pub fn cross_cluster(&self) -> bool {
        self.types.contains(&ExposureType::CrossCluster)
    }

    /// Named provider clusters (empty: every cluster), the deprecated field included.
    pub fn providers(&self) -> Vec<&str> {
        let named = self.provider_clusters.iter().map(|c| c.name.as_str());
        named.chain(self.service_provision_clusters.iter().map(String::as_str)).collect()
    }

    /// Named consumer clusters (empty: every cluster), the deprecated field included.
    pub fn consumers(&self) -> Vec<&str> {
        let named = self.consumer_clusters.iter().map(|c| c.name.as_str());
        named.chain(self.service_consumption_clusters.iter().map(String::as_str)).collect()
    }
}
