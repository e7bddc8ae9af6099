//! Replica division (spec §3.3–§3.6): Duplicated, static weights, dynamic weights and
//! Aggregated, all through Karmada's (v1.16+) Webster / Sainte-Laguë engine.

use std::collections::BTreeMap;

/// Which name wins when two parties have exactly the same Webster priority and seats.
///
/// Karmada derives it from the template UID: FNV-1a-32 of the UID odd → the larger name
/// wins, even or empty → the smaller. Git manifests rarely carry a UID, so in flotilla
/// the empty UID (name ascending) is the usual case; a `metadata.uid` in the manifest
/// is honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// The lexicographically smaller name wins.
    NameAscending,
    /// The lexicographically larger name wins.
    NameDescending,
}

impl TieBreak {
    /// Karmada's `tieBreakerByUID`.
    pub fn from_uid(uid: &str) -> Self {
        if !uid.is_empty() && fnv1a32(uid.as_bytes()) % 2 == 1 { Self::NameDescending } else { Self::NameAscending }
    }
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, &b| (hash ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Allocates `seats` new seats by Webster's method. Parties are the union of `votes`
/// and `initial`; each round gives a seat to the highest `votes / (2·seats + 1)`
/// (compared as f64, as Go does), ties going to fewer seats, then by `tie`. Returns
/// `None` when there are no parties at all.
pub fn webster(
    seats: i64,
    votes: &BTreeMap<String, i64>,
    initial: &BTreeMap<String, i64>,
    tie: TieBreak,
) -> Option<BTreeMap<String, i64>> {
    let mut parties: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (name, &v) in votes {
        parties.entry(name.clone()).or_default().0 = v;
    }
    for (name, &s) in initial {
        parties.entry(name.clone()).or_default().1 = s;
    }
    if parties.is_empty() {
        return None;
    }
    let mut names: Vec<String> = parties.keys().cloned().collect();
    if tie == TieBreak::NameDescending {
        names.reverse();
    }
    let mut state: Vec<(i64, i64)> = names.iter().map(|n| parties[n]).collect();
    for _ in 0..seats.max(0) {
        let winner = (0..state.len())
            .reduce(|best, i| if beats(state[i], state[best]) { i } else { best })
            .expect("parties is non-empty");
        state[winner].1 += 1;
    }
    Some(names.into_iter().zip(state).map(|(n, (_, s))| (n, s)).collect())
}

/// Whether `a` outranks `b`; earlier names (in tie order) keep the seat on full ties.
fn beats(a: (i64, i64), b: (i64, i64)) -> bool {
    let priority = |(votes, seats): (i64, i64)| votes as f64 / (2 * seats + 1) as f64;
    let (pa, pb) = (priority(a), priority(b));
    pa > pb || (pa == pb && a.1 < b.1)
}

/// Karmada's `Dispenser.AllocateByWeight`: adds `new` seats on top of `initial` by
/// weight; nothing is added when every weight is 0.
pub fn allocate_by_weight(
    new: i64,
    weights: &BTreeMap<String, i64>,
    initial: &BTreeMap<String, i64>,
    tie: TieBreak,
) -> BTreeMap<String, i64> {
    if weights.values().sum::<i64>() == 0 {
        return initial.clone();
    }
    webster(new, weights, initial, tie).unwrap_or_default()
}

/// Every selected cluster runs all replicas.
pub fn duplicated<'a>(clusters: impl IntoIterator<Item = &'a str>, replicas: i64) -> BTreeMap<String, i64> {
    clusters.into_iter().map(|c| (c.to_owned(), replicas)).collect()
}

/// Static weights: clusters with weight 0 are left out, all-zero means all 1, then
/// `replicas` are divided from scratch (no memory of the previous assignment).
pub fn static_weights(replicas: i64, weights: &BTreeMap<String, i64>, tie: TieBreak) -> BTreeMap<String, i64> {
    let positive: BTreeMap<String, i64> =
        weights.iter().filter(|(_, w)| **w > 0).map(|(k, w)| (k.clone(), *w)).collect();
    let weights = if positive.is_empty() { weights.keys().map(|k| (k.clone(), 1)).collect() } else { positive };
    allocate_by_weight(replicas, &weights, &BTreeMap::new(), tie)
}

/// Dynamic division flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    /// Weighted by free capacity.
    Weight,
    /// Packed into as few clusters as possible, preferring those already used.
    Aggregated,
}

/// Not enough free capacity for the replicas to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    /// Capacity found.
    pub available: i64,
    /// Replicas that needed a place.
    pub needed: i64,
}

/// Inputs of dynamic division. `candidates` are in scheduler order (score desc,
/// available desc, name asc) with each cluster's free capacity (allocatable).
#[derive(Debug, Clone, Copy)]
pub struct DynamicInput<'a> {
    /// Weight or Aggregated.
    pub kind: Dynamic,
    /// Desired total.
    pub replicas: i64,
    /// (cluster, allocatable) in candidate order.
    pub candidates: &'a [(String, i64)],
    /// The previous assignment (`spec.clusters`); empty for a first schedule.
    pub previous: &'a BTreeMap<String, i64>,
    /// Tie-break.
    pub tie: TieBreak,
}

/// Karmada's `assignByDynamicStrategy` in steady mode (spec §3.6). Karmada's fresh mode
/// (an explicit reschedule) is, in a Git render, a render without the previous
/// assignment: drop it from the cluster state to ask for one.
pub fn dynamic(input: DynamicInput<'_>) -> Result<BTreeMap<String, i64>, Insufficient> {
    let DynamicInput { kind, replicas, candidates, previous, tie } = input;
    let scheduled: BTreeMap<String, i64> = candidates
        .iter()
        .filter_map(|(name, _)| previous.get(name).filter(|r| **r > 0).map(|r| (name.clone(), *r)))
        .collect();
    let assigned: i64 = scheduled.values().sum();
    if assigned == replicas {
        return Ok(scheduled);
    }
    if assigned > replicas {
        let weights =
            sorted_desc(candidates.iter().filter_map(|(n, _)| scheduled.get(n).map(|r| (n.clone(), *r))).collect());
        return divide_weights(kind, replicas, weights, tie);
    }
    let mut weights = sorted_desc(candidates.to_vec());
    if kind == Dynamic::Aggregated {
        let (used, unused): (Vec<_>, Vec<_>) = weights.into_iter().partition(|(n, _)| scheduled.contains_key(n));
        weights = used.into_iter().chain(unused).collect();
    }
    let delta = divide_weights(kind, replicas - assigned, weights, tie)?;
    let mut merged = scheduled;
    for (name, r) in delta {
        *merged.entry(name).or_default() += r;
    }
    Ok(merged)
}

fn sorted_desc(mut weights: Vec<(String, i64)>) -> Vec<(String, i64)> {
    weights.sort_by_key(|w| std::cmp::Reverse(w.1));
    weights
}

/// Places `replicas` by `weights` (already ordered); Aggregated first cuts the list
/// after the shortest prefix whose capacity suffices.
fn divide_weights(
    kind: Dynamic,
    replicas: i64,
    weights: Vec<(String, i64)>,
    tie: TieBreak,
) -> Result<BTreeMap<String, i64>, Insufficient> {
    let available: i64 = weights.iter().map(|(_, w)| w).sum();
    if available < replicas {
        return Err(Insufficient { available, needed: replicas });
    }
    let mut kept = Vec::new();
    let mut sum = 0;
    for (name, w) in weights {
        if kind == Dynamic::Aggregated && sum >= replicas && !kept.is_empty() {
            break;
        }
        sum += w;
        kept.push((name, w));
    }
    Ok(allocate_by_weight(replicas, &kept.into_iter().collect(), &BTreeMap::new(), tie))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn remainders_follow_webster_not_largest_remainder() {
        let weights = map(&[("a", 3), ("b", 2), ("c", 1)]);
        assert_eq!(static_weights(14, &weights, TieBreak::NameAscending), map(&[("a", 7), ("b", 5), ("c", 2)]));
    }

    #[test]
    fn equal_weights_tie_by_name() {
        let weights = map(&[("member1", 1), ("member2", 1)]);
        assert_eq!(static_weights(1, &weights, TieBreak::NameAscending), map(&[("member1", 1), ("member2", 0)]));
        assert_eq!(static_weights(1, &weights, TieBreak::NameDescending), map(&[("member1", 0), ("member2", 1)]));
        assert_eq!(static_weights(10, &weights, TieBreak::NameAscending), map(&[("member1", 5), ("member2", 5)]));
    }

    #[test]
    fn all_zero_static_weights_mean_equal_weights() {
        let weights = map(&[("a", 0), ("b", 0)]);
        assert_eq!(static_weights(4, &weights, TieBreak::NameAscending), map(&[("a", 2), ("b", 2)]));
    }

    #[test]
    fn uid_parity_picks_the_tie_direction() {
        assert_eq!(TieBreak::from_uid(""), TieBreak::NameAscending);
        assert_eq!(TieBreak::from_uid("d43fdeeb-d750-4e2b-bee3-64eb94534f4c"), TieBreak::NameDescending);
    }
}
