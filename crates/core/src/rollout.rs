//! Rollouts, the pure part (docs/rollouts.md): which RolloutPolicy governs each
//! template, the ordered batches a policy makes of the clusters its templates are
//! placed on, and whether a wave may start at a given time. The controller's rollout
//! loop decides from these; `flotilla diff` and the PR plan show them.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::autoscale::cron::Schedule;
use crate::matching::{Candidate, PolicyIndex, claiming};
use crate::model::plan::Held;
use crate::model::rollout::ReplicaOnlyChanges;
use crate::model::rollout::{RolloutSpec, Window, WindowKind};
use crate::model::{Cluster, Loaded, Named, ObjectKey, Plan};
use crate::schedule::filter::cluster_matches;

pub use change::{Change, change};

/// A RolloutPolicy's identity: its namespace (`None` for a ClusterRolloutPolicy) and
/// name. Status, metrics, logs and `flotilla rollout` name a policy by it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct PolicyId {
    /// `metadata.namespace` (none for a ClusterRolloutPolicy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl PolicyId {
    /// The identity of `policy`.
    pub fn of(policy: &Named<RolloutSpec>) -> Self {
        Self { namespace: policy.namespace.clone(), name: policy.name.clone() }
    }

    /// As `compose::governed_keys` takes it.
    pub fn as_ref(&self) -> (Option<&str>, &str) {
        (self.namespace.as_deref(), &self.name)
    }

    /// The policy of this identity in `loaded`, if it declares one.
    pub fn find<'l>(&self, loaded: &'l Loaded) -> Option<&'l Named<RolloutSpec>> {
        loaded.rollout_policies.iter().map(|p| &**p).find(|p| p.namespace == self.namespace && p.name == self.name)
    }

    /// `ns/name`, or `name` for a ClusterRolloutPolicy: how `flotilla rollout` takes it.
    pub fn short(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl fmt::Display for PolicyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "RolloutPolicy {ns}/{}", self.name),
            None => write!(f, "ClusterRolloutPolicy {}", self.name),
        }
    }
}

/// The decision's settings from a policy's spec.
pub fn settings(spec: &RolloutSpec) -> step::Settings {
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    step::Settings {
        min_success_ms: ms(spec.min_success_time),
        progress_deadline_ms: ms(spec.progress_deadline),
        max_failures: spec.max_failures,
        on_failure: spec.on_failure,
    }
}

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

/// `loaded` with only the templates a RolloutPolicy governs, in it or (by key) in
/// `newer`: all a revision that holds members back needs rendered. Everything else it
/// declares stays, so what is left is placed, overridden and governed as before.
pub fn governed_only(mut loaded: Loaded, newer: &Loaded) -> Loaded {
    let theirs: BTreeSet<&ObjectKey> =
        newer.templates.iter().zip(governed(newer)).filter(|(_, p)| p.is_some()).map(|(t, _)| &t.key).collect();
    let keep: Vec<bool> =
        loaded.templates.iter().zip(governed(&loaded)).map(|(t, p)| p.is_some() || theirs.contains(&t.key)).collect();
    let mut keep = keep.into_iter();
    loaded.templates.retain(|_| keep.next().unwrap_or(false));
    loaded
}

/// What each cluster runs from `from` once the first `moved` batches of every rollout
/// of the change from `from` to `to` have moved (as if each soaked and passed): the
/// batches `flotilla diff` numbers, in each policy's order. A change that goes
/// everywhere at once (nothing governed, or only replica counts) holds nothing.
pub fn held_after<'a>(from: &'a Plan, to: &'a Plan, moved: usize) -> Held<'a> {
    let mut held: Held<'a> = Default::default();
    for policy in &to.loaded.rollout_policies {
        let id = PolicyId::of(policy);
        let clusters = match change(from, to, &id) {
            Change::Same => continue,
            Change::ReplicasOnly(_) if policy.spec.replica_only_changes == ReplicaOnlyChanges::Immediate => continue,
            Change::ReplicasOnly(c) | Change::Moves(c) => c,
        };
        let keys = Arc::new(compose::governed_keys(to, from, id.as_ref()));
        for batch in batches(&policy.spec, &to.loaded.clusters, &clusters).into_iter().skip(moved) {
            for cluster in batch.clusters {
                held.entry(cluster).or_default().push((from, keys.clone()));
            }
        }
    }
    held
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

mod change;
pub mod compose;
pub mod step;

#[cfg(test)]
mod tests;
