//! Rollouts, the pure part (docs/rollouts.md): which RolloutPolicy governs each
//! template, the ordered batches a policy makes of the clusters its templates are
//! placed on, and whether a wave may start at a given time. The controller's rollout
//! loop decides from these; `flotilla diff` and the PR plan show them.

use std::collections::BTreeSet;

use crate::autoscale::cron::Schedule;
use crate::matching::{Candidate, PolicyIndex, claiming};
use crate::model::rollout::{RolloutSpec, Window, WindowKind};
use crate::model::{Cluster, Loaded};
use crate::schedule::filter::cluster_matches;

/// The name of the wave that takes the clusters no declared wave takes (reserved: a
/// declared wave cannot be named so).
pub const REST: &str = "(rest)";

/// Clusters that move together: the `index`-th batch of wave `wave`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    /// The wave's name ([`REST`] for clusters in no wave).
    pub wave: String,
    /// Which batch of the wave (from 0; a wave without `maxConcurrent` has one).
    pub index: usize,
    /// The clusters, sorted.
    pub clusters: Vec<String>,
}

/// For each template of `loaded` (by index), the RolloutPolicy governing it, chosen as
/// a PropagationPolicy is (`matching::claiming`); `None`: it goes everywhere at once.
pub fn governed(loaded: &Loaded) -> Vec<Option<usize>> {
    let policies = &loaded.rollout_policies;
    if policies.is_empty() {
        return vec![None; loaded.templates.len()];
    }
    let index = PolicyIndex::new(
        policies.iter().enumerate().map(|(i, p)| (i, p.namespace.as_deref(), p.spec.resource_selectors.as_slice())),
    );
    loaded
        .templates
        .iter()
        .map(|template| {
            claiming(&index, template, |i| Candidate {
                name: &policies[i].name,
                priority: policies[i].spec.priority,
                selectors: &policies[i].spec.resource_selectors,
            })
        })
        .collect()
}

/// The batches, in order, in which `spec` moves `placed` (the clusters its templates
/// are placed on, in the new revision or the last good one). Each cluster is in the
/// first wave whose affinity takes it, else in a last wave, [`REST`]; a wave is split
/// into batches of `maxConcurrent`. Waves that take no placed cluster are left out.
pub fn batches(spec: &RolloutSpec, clusters: &[Cluster], placed: &BTreeSet<String>) -> Vec<Batch> {
    let mut left: BTreeSet<&str> = placed.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for wave in &spec.waves {
        let taken: Vec<String> = clusters
            .iter()
            .filter(|c| left.contains(c.name.as_str()) && cluster_matches(&wave.cluster_affinity, c))
            .map(|c| c.name.clone())
            .collect();
        for name in &taken {
            left.remove(name.as_str());
        }
        let size = wave.max_concurrent.map_or(taken.len(), |m| m.of(taken.len())).max(1);
        for (index, chunk) in taken.chunks(size).enumerate() {
            out.push(Batch { wave: wave.name.clone(), index, clusters: chunk.to_vec() });
        }
    }
    if !left.is_empty() {
        out.push(Batch { wave: REST.into(), index: 0, clusters: left.into_iter().map(str::to_owned).collect() });
    }
    out
}

/// Whether a wave may start at `now` (unix seconds), and if not, why and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// It may.
    Open,
    /// A deny window is open until this time.
    Denied { until: i64 },
    /// Allow windows are declared and none is open; the next opens at this time (if
    /// its schedule ever fires again).
    OutsideAllowed { next: Option<i64> },
}

/// The windows' verdict at `now`. A window is open from each time its schedule names
/// for its duration (end excluded); deny wins over allow; without allow windows every
/// time not denied is allowed. Windows were validated on load; one whose schedule does
/// not parse is ignored.
pub fn windows(windows: &[Window], now: i64) -> Gate {
    let open_until = |w: &Window| -> Option<i64> {
        let schedule = Schedule::parse(&w.schedule, w.time_zone.as_deref()).ok()?;
        let length = w.duration.as_secs() as i64;
        schedule.due(now - length, now).map(|opened| opened + length)
    };
    let denied = windows.iter().filter(|w| w.kind == WindowKind::Deny).filter_map(open_until).max();
    if let Some(until) = denied {
        return Gate::Denied { until };
    }
    let allows: Vec<&Window> = windows.iter().filter(|w| w.kind == WindowKind::Allow).collect();
    if allows.is_empty() || allows.iter().any(|w| open_until(w).is_some()) {
        return Gate::Open;
    }
    let next =
        allows.iter().filter_map(|w| Schedule::parse(&w.schedule, w.time_zone.as_deref()).ok()?.next_after(now)).min();
    Gate::OutsideAllowed { next }
}

pub mod compose;
pub mod step;

#[cfg(test)]
mod tests;
