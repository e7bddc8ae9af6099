//! Typed objects the pipeline works on: what `load` produces and later stages consume.

pub mod autoscale;
pub mod body;
pub mod cluster;
pub mod duration;
pub mod failover;
pub mod names;
pub mod object;
pub mod override_policy;
pub mod plan;
pub mod policy;
pub mod quota;
pub mod repo;
pub mod rollout;
pub mod selector;
pub mod service;
pub mod source;

use std::sync::Arc;

pub use autoscale::{CronFederatedHpaSpec, FederatedHpaSpec};
pub use body::Body;
pub use cluster::{Cluster, ClusterState, SyncMode};
pub use object::{Facts, ObjectKey, Origin, Template};
pub use plan::{Plan, Problem, ProblemReason};
pub use policy::{OverrideSpec, PropagationSpec};
pub use repo::{Limits, RepoFiles};

/// A policy-like object: namespaced (`namespace: Some`) or cluster-scoped (`None`).
#[derive(Debug, Clone)]
pub struct Named<S> {
    /// `metadata.namespace`; `None` for ClusterPropagationPolicy and ClusterOverridePolicy.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `spec`, defaulted.
    pub spec: S,
    /// Where it was declared.
    pub origin: Origin,
}

impl<S> Named<S> {
    /// `Kind ns/name` or `Kind name`, for messages and ownership annotations.
    pub fn describe(&self, namespaced_kind: &str, cluster_kind: &str) -> String {
        match &self.namespace {
            Some(ns) => format!("{namespaced_kind} {ns}/{}", self.name),
            None => format!("{cluster_kind} {}", self.name),
        }
    }
}

/// Everything one revision of the repo declares, typed and validated.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Resource templates sorted by key.
    pub templates: Vec<Arc<Template>>,
    /// PropagationPolicies (namespaced) and ClusterPropagationPolicies.
    pub propagation_policies: Vec<Arc<Named<PropagationSpec>>>,
    /// OverridePolicies (namespaced) and ClusterOverridePolicies.
    pub override_policies: Vec<Arc<Named<OverrideSpec>>>,
    /// Member clusters sorted by name.
    pub clusters: Vec<Cluster>,
    /// FederatedHPAs.
    pub federated_hpas: Vec<Arc<Named<FederatedHpaSpec>>>,
    /// CronFederatedHPAs.
    pub cron_federated_hpas: Vec<Arc<Named<CronFederatedHpaSpec>>>,
    /// MultiClusterServices.
    pub multi_cluster_services: Vec<Arc<Named<service::MultiClusterServiceSpec>>>,
    /// FederatedResourceQuotas.
    pub federated_resource_quotas: Vec<Arc<Named<quota::FederatedResourceQuotaSpec>>>,
    /// ClusterTaintPolicies.
    pub cluster_taint_policies: Vec<Arc<Named<failover::ClusterTaintPolicySpec>>>,
    /// RolloutPolicies (namespaced) and ClusterRolloutPolicies.
    pub rollout_policies: Vec<Arc<Named<rollout::RolloutSpec>>>,
    /// Objects flotilla accepts and does not act on, in file order (see [`NotActedOn`]).
    pub not_acted_on: Vec<Arc<NotActedOn>>,
    /// HelmCharts, sorted by namespace and name (rendered before the rest is loaded:
    /// `crate::sources`).
    pub helm_charts: Vec<Arc<Named<source::HelmChartSpec>>>,
    /// ResourceInterpreterCustomizations, sorted by name.
    pub customizations: Vec<Arc<Named<crate::interpret::CustomizationSpec>>>,
    /// The revision's resource interpreter: its customizations over the shipped ones.
    pub interpreter: Arc<crate::interpret::Interpreter>,
}

/// An object of a kind flotilla accepts (so a repository holding one still loads) but
/// does not act on, or not yet on everything it declares: Karmada kinds flotilla has no
/// use for, and its own RolloutPolicies until the rollout loop enforces them. The
/// commands warn with `why`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotActedOn {
    /// `apiVersion kind name`, as written.
    pub object: String,
    /// What flotilla does not do with it.
    pub why: &'static str,
    /// Where it is.
    pub origin: Origin,
}

/// Templates are freed in the order of their addresses, which is about the order they
/// were allocated in, rather than in key order: the allocator then walks its heap
/// forwards instead of jumping across it, and a 50,000-template revision drops in about
/// two thirds of the time (docs/performance.md). Sorting pointers takes a millisecond,
/// and no output depends on the order.
impl Drop for Loaded {
    fn drop(&mut self) {
        self.templates.sort_unstable_by_key(|t| Arc::as_ptr(t) as usize);
    }
}

impl Loaded {
    /// The template with this key, by binary search (templates are sorted).
    pub fn template(&self, key: &ObjectKey) -> Option<&Template> {
        self.templates.binary_search_by(|t| t.key.cmp(key)).ok().map(|i| &*self.templates[i])
    }
}
