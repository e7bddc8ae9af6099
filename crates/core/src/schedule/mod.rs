//! Stage 3, `place`: which clusters get a bound template and how many replicas each
//! (spec §3). Filter → score → select (spread) → assign (divide) → drop empty clusters.

pub mod capacity;
pub mod divide;
pub mod filter;
pub mod spread;
mod workload;

pub use workload::{Workload, workload_of};

use std::collections::BTreeMap;

use crate::model::cluster::{ClusterState, PreviousPlacement};
use crate::model::policy::{
    ClusterAffinity, ClusterAffinityTerm, DivisionPreference, Placement, ReplicaSchedulingType,
};
use crate::model::{Cluster, Template};
use divide::{Dynamic, DynamicInput, TieBreak};
use filter::Diagnosis;
use spread::Candidate;

/// Karmada's assignment strategies (`pkg/scheduler/core/assignment.go`).
///
/// | replicaScheduling                         | strategy        |
/// |-------------------------------------------|-----------------|
/// | absent, or `Duplicated`                   | `Duplicated`    |
/// | `Divided` + `Aggregated`                  | `Aggregated`    |
/// | `Divided` + `Weighted` + `dynamicWeight`  | `DynamicWeight` |
/// | `Divided` + `Weighted` otherwise          | `StaticWeight`  |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Every cluster runs all replicas.
    Duplicated,
    /// Split by static weights (spread constraints ignored).
    StaticWeight,
    /// Split by free capacity.
    DynamicWeight,
    /// Packed into few clusters.
    Aggregated,
}

impl Strategy {
    /// The strategy of a (defaulted) placement.
    pub fn of(placement: &Placement) -> Self {
        let Some(rs) = &placement.replica_scheduling else {
            return Self::Duplicated;
        };
        match (rs.replica_scheduling_type, rs.replica_division_preference) {
            (Some(ReplicaSchedulingType::Duplicated), _) => Self::Duplicated,
            (_, Some(DivisionPreference::Aggregated)) => Self::Aggregated,
            _ if rs.weight_preference.as_ref().is_some_and(|w| w.dynamic_weight.is_some()) => Self::DynamicWeight,
            _ => Self::StaticWeight,
        }
    }

    fn divided(self) -> bool {
        self != Self::Duplicated
    }
}

/// The result of placing one template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// Cluster → replicas (`None` for non-workloads, which carry no replica count).
    pub clusters: BTreeMap<String, Option<i64>>,
    /// The `clusterAffinities` term that placed it.
    pub observed_affinity: Option<String>,
    /// Job `spec.completions` per cluster when a Divided Job declares completions.
    pub completions: BTreeMap<String, i64>,
}

/// Why a template could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Every cluster was filtered out.
    #[error("{0}")]
    NoClusterFits(Diagnosis),
    /// Spread constraints could not be satisfied.
    #[error("{0}")]
    Spread(String),
    /// Not enough free capacity for a dynamic or aggregated division.
    #[error("the selected clusters have {available} available replicas, {needed} are needed")]
    Insufficient {
        /// Available replicas found.
        available: i64,
        /// Replicas that needed a place.
        needed: i64,
    },
    /// Every `clusterAffinities` term failed; the first failure is kept.
    #[error("no clusterAffinities term fits; {term}: {cause}")]
    NoAffinityTermFits {
        /// The first term tried.
        term: String,
        /// Why it failed.
        #[source]
        cause: Box<FitError>,
    },
}

/// Places one template with a placement. [`Placer`] does the same for many templates
/// under one placement.
pub fn place(
    template: &Template,
    placement: &Placement,
    clusters: &[Cluster],
    state: &ClusterState,
) -> Result<Assignment, FitError> {
    Placer::new(placement, clusters).place(template, state)
}

/// One placement over the clusters, ready to place any number of templates. Which
/// clusters each affinity term selects, tier by tier, depends on the placement and the
/// clusters alone, so it is worked out here once rather than for every template (at
/// 50,000 templates over 100 clusters, matching affinities per template was most of
/// placement's time); everything that depends on the template is decided in [`Placer::place`].
#[derive(Debug, Clone)]
pub struct Placer<'a> {
    placement: &'a Placement,
    clusters: &'a [Cluster],
    /// Per affinity term (the inline affinity alone without `clusterAffinities`): each
    /// cluster's tier ([`filter::tiers`]).
    terms: Vec<Vec<Option<usize>>>,
}

impl<'a> Placer<'a> {
    /// Matches the placement's affinities against `clusters`. Overflow tiers only count
    /// for dynamic and aggregated division, the strategies Karmada allows them with.
    pub fn new(placement: &'a Placement, clusters: &'a [Cluster]) -> Self {
        let tiered = matches!(Strategy::of(placement), Strategy::DynamicWeight | Strategy::Aggregated);
        let terms = if placement.cluster_affinities.is_empty() {
            vec![filter::tiers(clusters, placement.cluster_affinity.as_ref(), &[])]
        } else {
            let term = |t: &ClusterAffinityTerm| {
                let overflow: Vec<ClusterAffinity> =
                    t.overflow_affinities.iter().filter(|_| tiered).map(ClusterAffinityTerm::affinity).collect();
                filter::tiers(clusters, Some(&t.affinity()), &overflow)
            };
            placement.cluster_affinities.iter().map(term).collect()
        };
        Placer { placement, clusters, terms }
    }

    /// Each cluster's tier under affinity term `term` (the inline affinity is term 0
    /// when there are no `clusterAffinities`); `None` for a term that does not exist.
    pub fn tiers(&self, term: usize) -> Option<&[Option<usize>]> {
        self.terms.get(term).map(Vec::as_slice)
    }

    /// Places one template.
    pub fn place(&self, template: &Template, state: &ClusterState) -> Result<Assignment, FitError> {
        let empty = PreviousPlacement::default();
        // Most plans from the command line hold no per-object state; every lookup below
        // then misses, whatever the key.
        let key = if state.has_object_state() { template.key.spelled() } else { String::new() };
        let previous = state.previous.get(&key).unwrap_or(&empty);
        let memo = template.workload();
        // A count decided outside Git replaces the template's.
        let overridden = state
            .replicas
            .get(&key)
            .filter(|_| memo.is_workload())
            .map(|replicas| Workload { replicas: (*replicas).max(0), ..memo.clone() });
        let workload = overridden.as_ref().unwrap_or(memo);
        let evicted = state.evictions.get(&key).filter(|_| workload.is_workload());
        // An eviction takes the cluster out of what the workload holds, as Karmada's taint
        // manager takes it out of the binding's clusters.
        let held: std::borrow::Cow<'_, BTreeMap<String, i64>> = match evicted {
            Some(evicted) => std::borrow::Cow::Owned(
                previous.clusters.clone().into_iter().filter(|(c, _)| !evicted.contains_key(c)).collect(),
            ),
            None => std::borrow::Cow::Borrowed(&previous.clusters),
        };
        let live = filter::Live { taints: Some(&state.taints).filter(|_| workload.is_workload()), evicted };
        let run = Run { template, placer: self, state, previous: &held, workload, live };
        let placed = run.terms(&previous.observed_affinity);
        placed.map(|assignment| keep_evicted(assignment, evicted, self.clusters))
    }
}

/// Each cluster's static weight: the maximum over the placement's `staticWeightList`
/// rules that match it (0 if none does), or 1 for every cluster without rules.
pub fn static_weights<'c>(placement: &Placement, clusters: impl Iterator<Item = &'c Cluster>) -> BTreeMap<String, i64> {
    let rules = placement
        .replica_scheduling
        .as_ref()
        .and_then(|rs| rs.weight_preference.as_ref())
        .map(|w| w.static_weight_list.as_slice())
        .unwrap_or_default();
    let weight = |c: &Cluster| {
        if rules.is_empty() {
            return 1;
        }
        rules.iter().filter(|r| filter::cluster_matches(&r.target_cluster, c)).map(|r| r.weight).max().unwrap_or(0)
    };
    clusters.map(|c| (c.name.clone(), weight(c))).collect()
}

/// The old copies failover keeps (purge mode `Gracefully` or `Never`) stay where they
/// were, with the replicas they had, beside the new placement.
fn keep_evicted(
    mut assignment: Assignment,
    evicted: Option<&BTreeMap<String, crate::model::cluster::Evicted>>,
    clusters: &[Cluster],
) -> Assignment {
    for (cluster, eviction) in evicted.into_iter().flatten() {
        let declared = clusters.iter().any(|c| &c.name == cluster);
        if let (Some(replicas), true) = (eviction.keep, declared) {
            assignment.clusters.entry(cluster.clone()).or_insert(Some(replicas));
        }
    }
    assignment
}

impl Run<'_> {
    /// Schedules with the inline affinity, or the `clusterAffinities` terms in order
    /// from the one that placed the workload last time.
    fn terms(&self, observed: &Option<String>) -> Result<Assignment, FitError> {
        let (placement, tiers) = (self.placer.placement, &self.placer.terms);
        if placement.cluster_affinities.is_empty() {
            return self.schedule(&tiers[0]);
        }
        let terms = &placement.cluster_affinities;
        let start = observed.as_ref().and_then(|name| terms.iter().position(|t| &t.affinity_name == name)).unwrap_or(0);
        let mut first_failure = None;
        for (term, tiers) in terms.iter().zip(tiers).skip(start) {
            match self.schedule(tiers) {
                Ok(assignment) => {
                    return Ok(Assignment { observed_affinity: Some(term.affinity_name.clone()), ..assignment });
                }
                Err(e) => {
                    first_failure.get_or_insert((term.affinity_name.clone(), e));
                }
            }
        }
        let (term, cause) = first_failure.expect("clusterAffinities is not empty");
        Err(FitError::NoAffinityTermFits { term, cause: Box::new(cause) })
    }
}

/// One scheduling attempt's inputs.
struct Run<'a> {
    template: &'a Template,
    placer: &'a Placer<'a>,
    state: &'a ClusterState,
    previous: &'a BTreeMap<String, i64>,
    workload: &'a Workload,
    live: filter::Live<'a>,
}

impl Run<'_> {
    /// One attempt with one affinity term's tiers.
    fn schedule(&self, tiers: &[Option<usize>]) -> Result<Assignment, FitError> {
        let p = self.placer.placement;
        let strategy = Strategy::of(p);
        let feasible = filter::filter(
            self.placer.clusters,
            tiers,
            &p.cluster_tolerations,
            &p.spread_constraints,
            self.previous,
            self.live,
        )
        .map_err(FitError::NoClusterFits)?;
        let mut candidates: Vec<Candidate<'_>> =
            feasible.into_iter().map(|(c, tier)| self.candidate(c, tier)).collect();
        spread::order(&mut candidates);
        let selected = if strategy == Strategy::StaticWeight {
            candidates
        } else {
            spread::select(candidates, &p.spread_constraints, strategy.divided(), self.workload.replicas)
                .map_err(FitError::Spread)?
        };
        if selected.is_empty() {
            return Err(FitError::Spread("the spread constraints selected no cluster (is maxGroups set?)".into()));
        }
        if !self.workload.is_workload() {
            let clusters = selected.iter().map(|c| (c.cluster.name.clone(), None)).collect();
            return Ok(Assignment { clusters, ..Assignment::default() });
        }
        let replicas = self.assign(strategy, &selected)?;
        Ok(self.finish(strategy, replicas))
    }

    fn candidate<'c>(&self, cluster: &'c Cluster, tier: usize) -> Candidate<'c> {
        let estimate = capacity::available_replicas(self.state.clusters.get(&cluster.name), &self.workload.requests);
        let allocatable = estimate.unwrap_or(self.workload.replicas);
        let assigned = self.previous.get(&cluster.name).copied().unwrap_or(0);
        let score = if self.previous.contains_key(&cluster.name) { 100 } else { 0 };
        Candidate { cluster, tier, score, available: allocatable + assigned, allocatable }
    }

    fn assign(&self, strategy: Strategy, selected: &[Candidate<'_>]) -> Result<BTreeMap<String, i64>, FitError> {
        let tie = TieBreak::from_uid(self.template.uid());
        let replicas = self.workload.replicas;
        let names = || selected.iter().map(|c| c.cluster.name.as_str());
        let dynamic = |kind| self.tiered(kind, selected, tie);
        match strategy {
            Strategy::Duplicated => Ok(divide::duplicated(names(), replicas)),
            Strategy::StaticWeight => Ok(divide::static_weights(replicas, &self.static_weights(selected), tie)),
            Strategy::DynamicWeight => dynamic(Dynamic::Weight),
            Strategy::Aggregated => dynamic(Dynamic::Aggregated),
        }
    }

    /// Dynamic division tier by tier (spec §1.3, overflowAffinities): each tier takes
    /// what its clusters' available replicas allow of what is left, divided with the
    /// normal strategy; replicas left after the last tier are unschedulable. Without
    /// overflow there is one tier and this is plain dynamic division.
    fn tiered(
        &self,
        kind: Dynamic,
        selected: &[Candidate<'_>],
        tie: TieBreak,
    ) -> Result<BTreeMap<String, i64>, FitError> {
        let last_tier = selected.iter().map(|c| c.tier).max().unwrap_or(0);
        let mut remaining = self.workload.replicas;
        let mut result = BTreeMap::new();
        for tier in 0..=last_tier {
            let members: Vec<&Candidate<'_>> = selected.iter().filter(|c| c.tier == tier).collect();
            let capacity: i64 = members.iter().map(|c| c.available).sum();
            let take = if tier == last_tier { remaining } else { remaining.min(capacity) };
            if take == 0 || members.is_empty() {
                continue;
            }
            let candidates: Vec<(String, i64)> =
                members.iter().map(|c| (c.cluster.name.clone(), c.allocatable)).collect();
            let previous: BTreeMap<String, i64> = self
                .previous
                .iter()
                .filter(|(n, _)| members.iter().any(|c| &c.cluster.name == *n))
                .map(|(n, r)| (n.clone(), *r))
                .collect();
            let part = divide::dynamic(DynamicInput {
                kind,
                replicas: take,
                candidates: &candidates,
                previous: &previous,
                tie,
            })
            .map_err(|e| FitError::Insufficient { available: e.available, needed: e.needed })?;
            remaining -= take;
            result.extend(part);
        }
        Ok(result)
    }

    fn static_weights(&self, selected: &[Candidate<'_>]) -> BTreeMap<String, i64> {
        static_weights(self.placer.placement, selected.iter().map(|c| c.cluster))
    }

    /// Drops clusters left with 0 replicas and splits Job completions.
    fn finish(&self, strategy: Strategy, replicas: BTreeMap<String, i64>) -> Assignment {
        let placed: BTreeMap<String, i64> = replicas.into_iter().filter(|(_, r)| *r > 0).collect();
        let completions = match self.workload.completions {
            Some(total) if strategy.divided() && !placed.is_empty() => {
                divide::allocate_by_weight(total, &placed, &BTreeMap::new(), TieBreak::from_uid(self.template.uid()))
            }
            _ => BTreeMap::new(),
        };
        let clusters = placed.into_iter().map(|(c, r)| (c, Some(r))).collect();
        Assignment { clusters, observed_affinity: None, completions }
    }
}
