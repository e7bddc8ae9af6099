//! The pipeline's output: what every cluster must run, and what could not be placed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq};

use super::cluster::PreviousPlacement;
use super::{Loaded, ObjectKey, Origin};
use crate::overrides::RuleRef;

/// Why an object is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Claimed by a (Cluster)PropagationPolicy (index into `propagation_policies`).
    Policy(usize),
    /// A Namespace, synced to every cluster.
    NamespaceSync,
    /// Referenced by a propagated workload (`propagateDeps`) or derived from one, with
    /// what its parents' policies say, merged as Karmada's dependencies distributor
    /// merges them: any parent's `Overwrite` wins, and so does any parent's
    /// `preserveResourcesOnDeletion: true`.
    Dependency {
        /// Some parent's policy has `conflictResolution: Overwrite`.
        overwrite: bool,
        /// Some parent's policy has `preserveResourcesOnDeletion: true`.
        preserve: bool,
    },
    /// The Service of a CrossCluster MultiClusterService (index into
    /// `multi_cluster_services`), placed on its providers and consumers.
    MultiClusterService(usize),
    /// The ResourceQuota of a FederatedResourceQuota (index into
    /// `federated_resource_quotas`) in a member it assigns (index into its
    /// `staticAssignments`), holding that assignment's `hard`.
    FederatedResourceQuota {
        /// The FederatedResourceQuota.
        quota: usize,
        /// This member's assignment.
        assignment: usize,
    },
}

/// One object for one cluster, kept as a reference to its template plus the per-cluster
/// deltas; [`Plan::manifest`] builds the full object when it is needed, so a plan holds
/// one copy of each template however many clusters receive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Index into [`Loaded::templates`].
    pub template: usize,
    /// Replicas assigned here (None: not a workload, sent as written).
    pub replicas: Option<i64>,
    /// Job completions assigned here.
    pub completions: Option<i64>,
    /// Override rules to apply, in order.
    pub overrides: Vec<RuleRef>,
    /// Why it is here.
    pub source: Source,
    /// Dispatching is suspended: the executor neither applies nor prunes it.
    pub suspended: bool,
}

/// Kinds of problems; the CLI exits 1 when there are any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ProblemReason {
    /// No placement satisfies the policy.
    Unschedulable,
    /// An override failed to apply for a cluster.
    OverrideFailed,
    /// `dependentOverrides` names an OverridePolicy that does not exist.
    DependentOverridesMissing,
    /// The object is outside the instance's scope (`--scope`).
    OutOfScope,
}

/// Something the render could not do for one object; the rest of the plan stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The object.
    #[serde(serialize_with = "display")]
    pub object: ObjectKey,
    /// Where it is declared.
    pub origin: Origin,
    /// The cluster, for per-cluster failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Category.
    pub reason: ProblemReason,
    /// Explanation, e.g. `0/3 clusters fit: 2 (a, b) did not match the cluster affinity`.
    pub message: String,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// What every member cluster must run at one revision.
#[derive(Debug)]
pub struct Plan {
    /// The revision rendered.
    pub revision: String,
    /// Everything the revision declares.
    pub loaded: Loaded,
    /// Every declared cluster (possibly with nothing), objects sorted by key.
    pub clusters: BTreeMap<String, Vec<Rendered>>,
    /// What could not be rendered.
    pub problems: Vec<Problem>,
    /// Placements of Divided workloads, to feed back as the next render's previous state.
    pub placements: BTreeMap<String, PreviousPlacement>,
    /// Templates that no policy claimed.
    pub unclaimed: Vec<ObjectKey>,
    /// What customizations' `ReviseReplica` scripts made of this plan's templates.
    pub revised: Revised,
}

/// `ReviseReplica` answers by template and count. A script is a pure function of the
/// template and the count (a fresh environment per call, no clock, no randomness), so
/// each pair runs once per plan however many members receive it; only kinds whose
/// customization revises replicas are held, one object per distinct count.
#[derive(Default)]
pub struct Revised(std::sync::Mutex<std::collections::HashMap<(usize, i64), RevisedObject>>);

/// One template revised to one count, or why the script could not.
pub type RevisedObject = Result<Arc<serde_json::Value>, crate::interpret::InterpretError>;

impl Revised {
    /// The answer for `template` at `replicas`, computed by `revise` the first time.
    pub fn get_or(&self, template: usize, replicas: i64, revise: impl FnOnce() -> RevisedObject) -> RevisedObject {
        let held = |memo: &Self| memo.0.lock().unwrap_or_else(|e| e.into_inner()).get(&(template, replicas)).cloned();
        if let Some(answer) = held(self) {
            return answer;
        }
        // Computed outside the lock: two threads may both compute one pair, and agree.
        let answer = revise();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert((template, replicas), answer.clone());
        answer
    }
}

impl std::fmt::Debug for Revised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map_or(0, |m| m.len());
        write!(f, "Revised({held} held)")
    }
}

impl Plan {
    /// Keys of objects with problems: the executor must not prune them.
    pub fn problem_objects(&self) -> impl Iterator<Item = &ObjectKey> {
        self.problems.iter().map(|p| &p.object)
    }

    /// The plan of one object: `key` alone, in the clusters among `clusters` that
    /// receive it (what a live comparison of one workload observes).
    pub fn only_object(&self, key: &ObjectKey, clusters: &[String]) -> Plan {
        let templates = &self.loaded.templates;
        let kept = self
            .clusters
            .iter()
            .filter(|(name, _)| clusters.contains(name))
            .map(|(name, items)| {
                let items: Vec<Rendered> =
                    items.iter().filter(|r| &templates[r.template].key == key).cloned().collect();
                (name.clone(), items)
            })
            .filter(|(_, items)| !items.is_empty())
            .collect();
        Plan {
            revision: self.revision.clone(),
            loaded: self.loaded.clone(),
            clusters: kept,
            problems: self.problems.iter().filter(|p| &p.object == key).cloned().collect(),
            placements: BTreeMap::new(),
            unclaimed: Vec::new(),
            revised: Revised::default(),
        }
    }

    /// A view of the plan limited to some clusters (all when `only` is empty), which
    /// serialises as the CLI's JSON contract:
    /// `{"revision", "clusters": {name: [manifest…]}, "problems": […]}`.
    pub fn view<'a>(&'a self, only: &'a [String]) -> PlanView<'a> {
        PlanView { plan: self, only, held: BTreeMap::new() }
    }
}

/// What a view shows of one cluster from older plans instead: the objects `keys` as
/// that plan renders them (a rollout holding the cluster back).
pub type Held<'a> = BTreeMap<String, Vec<(&'a Plan, Arc<BTreeSet<ObjectKey>>)>>;

/// One object in a view: the plan it comes from and its rendering there.
pub type Item<'a> = (&'a Plan, &'a Rendered);

/// See [`Plan::view`].
pub struct PlanView<'a> {
    plan: &'a Plan,
    only: &'a [String],
    held: Held<'a>,
}

impl<'a> PlanView<'a> {
    /// The same view, with what `held` holds back taken from the older plans.
    pub fn holding(self, held: Held<'a>) -> Self {
        Self { held, ..self }
    }

    /// The clusters in view, each with its objects in key order.
    pub fn clusters(&self) -> impl Iterator<Item = (&'a String, Vec<Item<'a>>)> + '_ {
        let plan = self.plan;
        plan.clusters.iter().filter(|(name, _)| self.only.is_empty() || self.only.contains(name)).map(
            move |(name, items)| {
                let held = self.held.get(name).map(Vec::as_slice).unwrap_or_default();
                let key = |p: &'a Plan, r: &'a Rendered| &p.loaded.templates[r.template].key;
                let kept = |k: &ObjectKey| held.iter().any(|(_, keys)| keys.contains(k));
                let mut shown: Vec<Item<'a>> =
                    items.iter().filter(|r| !kept(key(plan, r))).map(|r| (plan, r)).collect();
                for (older, keys) in held {
                    let theirs = older.clusters.get(name).into_iter().flatten();
                    shown.extend(theirs.filter(|r| keys.contains(key(older, r))).map(|r| (*older, r)));
                }
                shown.sort_by(|a, b| key(a.0, a.1).cmp(key(b.0, b.1)));
                (name, shown)
            },
        )
    }
}

impl Serialize for PlanView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("revision", &self.plan.revision)?;
        let clusters: BTreeMap<&String, ClusterManifests<'_>> =
            self.clusters().map(|(name, items)| (name, ClusterManifests { items })).collect();
        map.serialize_entry("clusters", &clusters)?;
        map.serialize_entry("problems", &self.plan.problems)?;
        map.end()
    }
}

/// Serialises one cluster's manifests one at a time.
struct ClusterManifests<'a> {
    items: Vec<Item<'a>>,
}

impl Serialize for ClusterManifests<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for (plan, item) in &self.items {
            let manifest = plan.manifest(item).map_err(serde::ser::Error::custom)?;
            seq.serialize_element(&manifest)?;
        }
        seq.end()
    }
}
