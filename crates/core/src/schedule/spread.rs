//! Spread-constraint selection (spec §1.3): which of the feasible clusters are chosen.

use std::collections::BTreeMap;

use crate::model::Cluster;
use crate::model::policy::{SpreadConstraint, SpreadField};

/// A feasible cluster with what the scheduler knows about it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Overflow tier: 0 for the affinity itself, i + 1 for `overflowAffinities[i]`.
    pub tier: usize,
    /// ClusterLocality: 100 if it already holds the workload, else 0.
    pub score: i64,
    /// Free capacity plus replicas already assigned here (AvailableReplicas).
    pub available: i64,
    /// Free capacity alone.
    pub allocatable: i64,
}

/// Karmada's candidate order: overflow tier asc, score desc, available desc, name asc.
pub fn order(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        a.tier
            .cmp(&b.tier)
            .then(b.score.cmp(&a.score))
            .then(b.available.cmp(&a.available))
            .then_with(|| a.cluster.name.cmp(&b.cluster.name))
    });
}

/// Chooses clusters per the constraints from ordered candidates. `divided` asks that
/// the chosen clusters' available replicas cover `need`.
pub fn select<'a>(
    candidates: Vec<Candidate<'a>>,
    constraints: &[SpreadConstraint],
    divided: bool,
    need: i64,
) -> Result<Vec<Candidate<'a>>, String> {
    if constraints.is_empty() {
        return Ok(candidates);
    }
    let by = |field| constraints.iter().find(|c| c.spread_by_field == Some(field));
    match (by(SpreadField::Region), by(SpreadField::Cluster)) {
        (Some(region), cluster) => by_region(candidates, region, cluster, divided, need),
        (None, Some(cluster)) => by_cluster(candidates, cluster, divided, need),
        (None, None) => Err("only cluster and region spread constraints can select clusters".into()),
    }
}

fn by_cluster<'a>(
    candidates: Vec<Candidate<'a>>,
    constraint: &SpreadConstraint,
    divided: bool,
    need: i64,
) -> Result<Vec<Candidate<'a>>, String> {
    if (candidates.len() as i64) < i64::from(constraint.min_groups) {
        return Err(format!(
            "{} feasible clusters are fewer than the spread constraint's minGroups {}",
            candidates.len(),
            constraint.min_groups
        ));
    }
    let take = candidates.len().min(constraint.max_groups.max(0) as usize);
    let (mut chosen, mut rest): (Vec<_>, Vec<_>) = (candidates[..take].to_vec(), candidates[take..].to_vec());
    if divided {
        swap_for_capacity(&mut chosen, &mut rest, need)?;
    }
    Ok(chosen)
}

/// Walks the chosen clusters from the last, swapping each for the unchosen cluster with
/// the most available replicas above its own, until the sum covers `need`.
fn swap_for_capacity<'a>(chosen: &mut [Candidate<'a>], rest: &mut Vec<Candidate<'a>>, need: i64) -> Result<(), String> {
    let sum = |c: &[Candidate<'_>]| c.iter().map(|c| c.available).sum::<i64>();
    for i in (0..chosen.len()).rev() {
        if sum(chosen) >= need {
            return Ok(());
        }
        let best = rest
            .iter()
            .enumerate()
            .filter(|(_, r)| r.available > chosen[i].available)
            .max_by(|(ia, a), (ib, b)| a.available.cmp(&b.available).then(ib.cmp(ia)))
            .map(|(j, _)| j);
        if let Some(j) = best {
            std::mem::swap(&mut chosen[i], &mut rest[j]);
        }
    }
    if sum(chosen) >= need {
        Ok(())
    } else {
        Err(format!(
            "the clusters chosen by the spread constraints have {} available replicas, fewer than {need}",
            sum(chosen)
        ))
    }
}

/// Region spreading: regions ranked by their best cluster (score, then available) and
/// total available replicas; the first `maxGroups` regions are taken, one best cluster
/// from each, then the remaining clusters of those regions in candidate order up to the
/// cluster constraint's `maxGroups`. Karmada searches region combinations by group
/// score; for candidates ordered as here the top-ranked regions are that combination.
fn by_region<'a>(
    candidates: Vec<Candidate<'a>>,
    region: &SpreadConstraint,
    cluster: Option<&SpreadConstraint>,
    divided: bool,
    need: i64,
) -> Result<Vec<Candidate<'a>>, String> {
    let mut regions: BTreeMap<&str, Vec<Candidate<'a>>> = BTreeMap::new();
    for c in candidates {
        regions.entry(c.cluster.spec.region.as_deref().unwrap_or_default()).or_default().push(c);
    }
    if (regions.len() as i64) < i64::from(region.min_groups) {
        return Err(format!(
            "{} regions are fewer than the spread constraint's minGroups {}",
            regions.len(),
            region.min_groups
        ));
    }
    let mut ranked: Vec<(&str, Vec<Candidate<'a>>)> = regions.into_iter().collect();
    ranked.sort_by(|(na, a), (nb, b)| {
        let total = |v: &[Candidate<'_>]| v.iter().map(|c| c.available).sum::<i64>();
        b[0].score
            .cmp(&a[0].score)
            .then(b[0].available.cmp(&a[0].available))
            .then(total(b).cmp(&total(a)))
            .then_with(|| na.cmp(nb))
    });
    ranked.truncate(region.max_groups.max(0) as usize);
    let mut chosen: Vec<Candidate<'a>> = ranked.iter().map(|(_, v)| v[0].clone()).collect();
    let mut rest: Vec<Candidate<'a>> = ranked.iter().flat_map(|(_, v)| v[1..].iter().cloned()).collect();
    order(&mut rest);
    let cap = cluster.map_or(usize::MAX, |c| c.max_groups.max(0) as usize);
    while chosen.len() < cap && !rest.is_empty() {
        chosen.push(rest.remove(0));
    }
    if let Some(c) = cluster.filter(|c| (chosen.len() as i64) < i64::from(c.min_groups)) {
        return Err(format!(
            "{} clusters in the chosen regions are fewer than minGroups {}",
            chosen.len(),
            c.min_groups
        ));
    }
    if divided {
        swap_for_capacity(&mut chosen, &mut rest, need)?;
    }
    order(&mut chosen);
    Ok(chosen)
}
