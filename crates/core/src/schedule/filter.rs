//! Which clusters can take a workload (spec §1.3, §3.2 filter step), and why the others
//! cannot, so an unschedulable workload explains itself.

use std::collections::BTreeMap;
use std::fmt;

use crate::model::Cluster;
use crate::model::cluster::Evicted;
use crate::model::policy::{ClusterAffinity, SpreadConstraint, SpreadField, Taint, Toleration};
use crate::model::selector::{LabelLookup, Requirement};

/// Karmada's `ClusterMatches`: exclude wins; then label selector, field selector and
/// names, ANDed; an empty affinity matches every cluster.
pub fn cluster_matches(affinity: &ClusterAffinity, cluster: &Cluster) -> bool {
    !affinity.exclude.contains(&cluster.name)
        && affinity.label_selector.as_ref().is_none_or(|s| s.matches(&cluster.labels))
        && affinity
            .field_selector
            .as_ref()
            .is_none_or(|f| f.match_expressions.iter().all(|r| field_matches(r, cluster)))
        && (affinity.cluster_names.is_empty() || affinity.cluster_names.contains(&cluster.name))
}

/// `zone` is checked against the cluster's zone list; `provider` and `region` like a
/// node selector over the pseudo-labels `provider=…`, `region=…`; other keys never match.
fn field_matches(r: &Requirement, cluster: &Cluster) -> bool {
    if r.key == "zone" {
        let zones = cluster.zones();
        return match r.operator.as_str() {
            "In" => zones.iter().any(|z| r.values.iter().any(|v| v == z)),
            "NotIn" => zones.iter().all(|z| !r.values.iter().any(|v| v == z)),
            "Exists" => !zones.is_empty(),
            "DoesNotExist" => zones.is_empty(),
            _ => false,
        };
    }
    !r.key.is_empty() && r.matches(&Pseudo(cluster))
}

/// A cluster's `provider` and `region` read as labels (unset or empty: no label),
/// without copying them.
struct Pseudo<'a>(&'a Cluster);

impl LabelLookup for Pseudo<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        let value = match key {
            "provider" => self.0.spec.provider.as_deref(),
            "region" => self.0.spec.region.as_deref(),
            _ => None,
        };
        value.filter(|v| !v.is_empty())
    }
}

/// Kubernetes toleration semantics: empty key with Exists tolerates everything, empty
/// effect matches every effect, operator defaults to Equal.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if !toleration.effect.is_empty() && toleration.effect != taint.effect {
        return false;
    }
    if toleration.key.is_empty() {
        return toleration.operator == "Exists";
    }
    toleration.key == taint.key
        && match toleration.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => toleration.value == taint.value,
            _ => false,
        }
}

/// The first NoSchedule/NoExecute taint that no toleration tolerates.
pub fn untolerated<'a>(taints: impl IntoIterator<Item = &'a Taint>, tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .into_iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// What failover adds to the declared clusters for one template: the taints observed
/// live (only workloads heed them, so a ConfigMap never leaves a member that is merely
/// down) and the members this workload was evicted from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live<'a> {
    /// Cluster → taints from health and ClusterTaintPolicies.
    pub taints: Option<&'a BTreeMap<String, Vec<Taint>>>,
    /// Cluster → the eviction of this workload from it.
    pub evicted: Option<&'a BTreeMap<String, Evicted>>,
}

/// Why a cluster was filtered out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// The affinity (or the active affinity term) does not select it.
    Affinity,
    /// It has a taint the policy does not tolerate.
    Taint(String),
    /// A spread constraint groups by a property it lacks.
    MissingProperty(SpreadField),
    /// Failover moved this workload off it.
    Evicted,
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::Affinity => write!(f, "did not match the cluster affinity"),
            Unfit::Taint(key) => write!(f, "had untolerated taint {key}"),
            Unfit::MissingProperty(field) => {
                write!(f, "had no {} for the spread constraint", field_name(*field))
            }
            Unfit::Evicted => write!(f, "had evicted it (failover)"),
        }
    }
}

/// Lower-case name of a spread field.
pub fn field_name(field: SpreadField) -> &'static str {
    match field {
        SpreadField::Cluster => "cluster",
        SpreadField::Region => "region",
        SpreadField::Zone => "zone",
        SpreadField::Provider => "provider",
    }
}

/// Per-cluster reasons for not fitting, printed as a sorted histogram:
/// `0/3 clusters fit: 2 did not match the cluster affinity, 1 had untolerated taint x`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Clusters considered.
    pub total: usize,
    /// Cluster name → reason.
    pub unfit: BTreeMap<String, Unfit>,
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = self.total - self.unfit.len();
        write!(f, "{fit}/{} clusters fit", self.total)?;
        let mut counts: BTreeMap<&Unfit, Vec<&str>> = BTreeMap::new();
        for (cluster, reason) in &self.unfit {
            counts.entry(reason).or_default().push(cluster);
        }
        let mut parts: Vec<(usize, String)> = counts
            .iter()
            .map(|(reason, names)| (names.len(), format!("{} ({}) {reason}", names.len(), names.join(", "))))
            .collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        if !parts.is_empty() {
            write!(f, ": {}", parts.into_iter().map(|(_, p)| p).collect::<Vec<_>>().join(", "))?;
        }
        Ok(())
    }
}

/// Each cluster's tier under one affinity and its overflow affinities, in the order of
/// `clusters`: `Some(0)` where the affinity selects it, `Some(1 + k)` where only overflow
/// tier `k` does, `None` where none does. An affinity depends on the cluster alone, so
/// these are worked out once per placement (see [`super::Placer`]), not per template.
pub fn tiers(
    clusters: &[Cluster],
    affinity: Option<&ClusterAffinity>,
    overflow: &[ClusterAffinity],
) -> Vec<Option<usize>> {
    let tier = |c: &Cluster| {
        if affinity.is_none_or(|a| cluster_matches(a, c)) {
            return Some(0);
        }
        overflow.iter().position(|o| cluster_matches(o, c)).map(|k| k + 1)
    };
    clusters.iter().map(tier).collect()
}

/// Filters `clusters` (with their [`tiers`]) for one workload, giving each feasible
/// cluster with its tier. Clusters already holding the workload (`previous`) bypass the
/// taint filter, as in Karmada, so a new NoSchedule taint never evicts. When nothing
/// fits, the error says why for each cluster; that diagnosis is only built on failure,
/// since most placements succeed. A cluster the workload was evicted from never fits,
/// held before or not.
pub fn filter<'a>(
    clusters: &'a [Cluster],
    tiers: &[Option<usize>],
    tolerations: &[Toleration],
    spread: &[SpreadConstraint],
    previous: &BTreeMap<String, i64>,
    live: Live<'_>,
) -> Result<Vec<(&'a Cluster, usize)>, Diagnosis> {
    let unfit_reason = |c: &Cluster, tier: Option<usize>| reason(c, tier, tolerations, spread, previous, live);
    let tiered = || clusters.iter().zip(tiers.iter().copied());
    let feasible: Vec<(&Cluster, usize)> =
        tiered().filter_map(|(c, tier)| unfit_reason(c, tier).ok().map(|tier| (c, tier))).collect();
    if !feasible.is_empty() {
        return Ok(feasible);
    }
    let unfit = tiered().filter_map(|(c, tier)| unfit_reason(c, tier).err().map(|r| (c.name.clone(), r))).collect();
    Err(Diagnosis { total: clusters.len(), unfit })
}

/// One cluster's verdict for one workload: its tier if it may take it, or why not (the
/// filter [`filter`] applies to every cluster, and `why` explains with).
pub fn reason(
    cluster: &Cluster,
    tier: Option<usize>,
    tolerations: &[Toleration],
    spread: &[SpreadConstraint],
    previous: &BTreeMap<String, i64>,
    live: Live<'_>,
) -> Result<usize, Unfit> {
    if live.evicted.is_some_and(|e| e.contains_key(&cluster.name)) {
        return Err(Unfit::Evicted);
    }
    let tier = tier.ok_or(Unfit::Affinity)?;
    let observed = live.taints.and_then(|t| t.get(&cluster.name)).map(Vec::as_slice).unwrap_or_default();
    unfit(cluster, (tolerations, observed), spread, previous.contains_key(&cluster.name)).map_or(Ok(tier), Err)
}

/// Why a cluster its affinity selects cannot take the workload, if it cannot.
fn unfit(
    cluster: &Cluster,
    (tolerations, observed): (&[Toleration], &[Taint]),
    spread: &[SpreadConstraint],
    already_placed: bool,
) -> Option<Unfit> {
    for c in spread {
        let missing = match c.spread_by_field {
            Some(SpreadField::Region) => cluster.spec.region.as_deref().unwrap_or("").is_empty(),
            Some(SpreadField::Provider) => cluster.spec.provider.as_deref().unwrap_or("").is_empty(),
            Some(SpreadField::Zone) => cluster.zones().is_empty(),
            _ => false,
        };
        if missing {
            return c.spread_by_field.map(Unfit::MissingProperty);
        }
    }
    if already_placed {
        return None;
    }
    untolerated(cluster.spec.taints.iter().chain(observed), tolerations).map(|t| Unfit::Taint(t.key.clone()))
}
