//! The failover loop's decisions, pure: `State::step(event) -> actions`, with the wall
//! clock (milliseconds since the epoch) an argument of every event. Cluster health
//! ([`health`]) becomes taints; taints and unhealthy workloads become evictions
//! ([`evict`]); what the render must heed is published as a [`ClusterState`] overlay,
//! and what must survive a restart ([`Memory`]) is saved whenever it changes.

mod evict;
mod health;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use flotilla_core::failover::Readiness;
use flotilla_core::model::cluster::Evicted;
use flotilla_core::model::failover::PurgeMode;
use flotilla_core::model::policy::Taint;
use flotilla_core::model::{ClusterState, ObjectKey, Plan};
use serde::{Deserialize, Serialize};

/// Wall-clock milliseconds since the epoch.
pub type Millis = i64;

/// How many moves the history keeps.
const HISTORY: usize = 100;

/// Karmada's timings and switches, as the command line sets them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A Push member whose probes fail this long is NotReady
    /// (`--cluster-failure-threshold`).
    pub failure_threshold: Duration,
    /// A NotReady member whose probes pass this long is Ready again
    /// (`--cluster-success-threshold`).
    pub success_threshold: Duration,
    /// A member heard from neither by probe nor by Lease this long is Unknown
    /// (`--cluster-monitor-grace-period`).
    pub monitor_grace: Duration,
    /// Right after the loop starts leading, members are given this long before they
    /// count as Unknown (`--cluster-startup-grace-period`).
    pub startup_grace: Duration,
    /// Evict workloads that do not tolerate a NoExecute taint
    /// (`--enable-no-execute-taint-eviction`).
    pub eviction: bool,
    /// Evictions per second, at most (`--eviction-rate`).
    pub eviction_rate: f64,
    /// How long a gracefully evicted copy waits for its replacement when the policy
    /// gives no grace period (`--graceful-eviction-timeout`).
    pub graceful_timeout: Duration,
    /// Above this share of unhealthy members, evictions stop (a partition of the
    /// controller looks like every member failing).
    pub unhealthy_threshold: f64,
}

/// What survives a restart or a change of leader: kept in the host cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Per member.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterHealth>,
    /// Workload (spelled key) → cluster → its eviction.
    #[serde(default)]
    pub evictions: BTreeMap<String, BTreeMap<String, Task>>,
    /// The latest moves, oldest first.
    #[serde(default)]
    pub history: VecDeque<Move>,
}

/// A member's health as last decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealth {
    /// The Ready condition's status.
    pub ready: Readiness,
    /// When it last changed.
    pub since: Millis,
    /// Why.
    pub reason: String,
    /// Taints from health and ClusterTaintPolicies, with when each was added.
    #[serde(default)]
    pub taints: Vec<Timed>,
}

/// A taint and when it was added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timed {
    /// The taint.
    pub taint: Taint,
    /// When it was added.
    pub added: Millis,
}

/// One workload's eviction from one member (Karmada's graceful eviction task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// When.
    pub at: Millis,
    /// Why.
    pub reason: String,
    /// Replicas it ran there.
    pub replicas: i64,
    /// What becomes of the old copy.
    pub purge: PurgeMode,
    /// The old copy is still kept.
    pub kept: bool,
    /// `Gracefully`: the old copy goes at this time even if the new one is not healthy.
    #[serde(default)]
    pub keep_until: Option<Millis>,
    /// The workload's scheduling inputs when evicted; the eviction ends when they change.
    pub fingerprint: String,
}

/// A move, for `/status` and `flotilla status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Move {
    /// When.
    pub at: Millis,
    /// The workload, spelled.
    pub object: String,
    /// The member it left.
    pub from: String,
    /// Why.
    pub reason: String,
    /// What became of the old copy.
    pub purge: PurgeMode,
    /// Replicas per member before.
    pub before: BTreeMap<String, i64>,
    /// Replicas per member after the next render.
    #[serde(default)]
    pub after: Option<BTreeMap<String, i64>>,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// Leadership changed.
    Leading(bool, Millis),
    /// The stored memory, once read (`None`: none stored).
    Loaded(Option<Memory>),
    /// A new render.
    Rendered(Arc<Plan>),
    /// A Push member's probe.
    Probed {
        /// The member.
        cluster: String,
        /// It answered.
        ok: bool,
        /// When.
        now: Millis,
    },
    /// The Pull members' Leases: member → last renewal.
    Leases(BTreeMap<String, Millis>),
    /// A workload's health in one member.
    Workload {
        /// The workload, spelled.
        key: String,
        /// The member.
        cluster: String,
        /// Healthy there.
        healthy: bool,
        /// Its `metadata.generation` there (0 when it has none): which spec the health
        /// is of.
        generation: i64,
        /// When.
        now: Millis,
    },
    /// Time passes.
    Tick(Millis),
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Read the stored memory.
    Load,
    /// Probe these Push members (and no others).
    Probe(BTreeSet<String>),
    /// Watch the health of these workloads in these members (and no others).
    Observe(BTreeSet<(ObjectKey, String)>),
    /// Renders must heed this.
    Publish(ClusterState),
    /// Store this.
    Save(Memory),
    /// A member's readiness changed.
    Changed {
        /// The member.
        cluster: String,
        /// Its new readiness.
        ready: Readiness,
        /// Why.
        reason: String,
    },
    /// A workload left a member.
    Moved(Move),
}

/// A workload's health in one member. It counts as failing there only once it was
/// healthy there at the spec it runs (its generation) and then was not: a workload still
/// starting, or a change that never became healthy anywhere (a bad image rolled out to
/// every member), is not moved, so one bad commit cannot cascade evictions across the
/// fleet. Karmada counts any unhealthy time; docs/failover.md says why flotilla differs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Observed {
    /// Healthy at the last observation.
    pub(super) healthy: bool,
    /// The generation it was last seen healthy at.
    healthy_at: Option<i64>,
    /// Since when it has been failing: unhealthy after being healthy at the generation it
    /// runs.
    pub(super) failing_since: Option<Millis>,
}

impl Observed {
    fn observe(&mut self, healthy: bool, generation: i64, now: Millis) {
        self.healthy = healthy;
        if healthy {
            self.healthy_at = Some(generation);
            self.failing_since = None;
        } else if self.healthy_at == Some(generation) {
            self.failing_since = Some(self.failing_since.unwrap_or(now));
        } else {
            self.failing_since = None;
        }
    }
}

/// The loop's state.
#[derive(Debug)]
pub struct State {
    settings: Settings,
    leading: bool,
    /// Memory was loaded since leading began (nothing is decided before).
    loaded: bool,
    started: Millis,
    memory: Memory,
    plan: Option<Arc<Plan>>,
    /// Push members: first failure and first success of the current run, last answer.
    probes: BTreeMap<String, health::Probes>,
    /// Pull members: last Lease renewal.
    leases: BTreeMap<String, Millis>,
    /// (workload, member) → its health there, as last observed.
    workloads: BTreeMap<(String, String), Observed>,
    /// Eviction budget.
    tokens: f64,
    last_tick: Option<Millis>,
    published: Option<ClusterState>,
    saved: Option<Memory>,
    /// The Probe and Observe actions last given, so a tick repeats none.
    watching: Vec<Action>,
}

impl State {
    /// A loop that leads nothing yet.
    pub fn new(settings: Settings) -> Self {
        State {
            settings,
            leading: false,
            loaded: false,
            started: 0,
            memory: Memory::default(),
            plan: None,
            probes: BTreeMap::new(),
            leases: BTreeMap::new(),
            workloads: BTreeMap::new(),
            tokens: 1.0,
            last_tick: None,
            published: None,
            saved: None,
            watching: Vec::new(),
        }
    }

    /// What `/status` shows.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Decides what an event leads to.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        match event {
            Event::Leading(leading, now) => {
                self.leading = leading;
                self.loaded = false;
                self.started = now;
                self.probes.clear();
                self.published = None;
                self.watching.clear();
                if leading { vec![Action::Load] } else { Vec::new() }
            }
            Event::Loaded(memory) => {
                self.loaded = true;
                self.memory = memory.unwrap_or_default();
                self.saved = Some(self.memory.clone());
                let mut actions = self.publish();
                actions.extend(self.watching());
                actions
            }
            Event::Rendered(plan) => {
                self.plan = Some(plan);
                if !self.loaded {
                    return Vec::new();
                }
                self.retire();
                let mut actions = self.watching();
                actions.extend(self.publish());
                actions.extend(self.save());
                actions
            }
            Event::Probed { cluster, ok, now } => {
                self.probes.entry(cluster).or_default().record(ok, now);
                Vec::new()
            }
            Event::Leases(leases) => {
                self.leases = leases;
                Vec::new()
            }
            Event::Workload { key, cluster, healthy, generation, now } => {
                self.workloads.entry((key, cluster)).or_default().observe(healthy, generation, now);
                Vec::new()
            }
            Event::Tick(now) => self.tick(now),
        }
    }

    fn tick(&mut self, now: Millis) -> Vec<Action> {
        let elapsed = self.last_tick.map_or(0, |t| (now - t).max(0));
        self.last_tick = Some(now);
        self.tokens = (self.tokens + self.settings.eviction_rate * elapsed as f64 / 1000.0).min(self.burst());
        if !self.leading || !self.loaded {
            return Vec::new();
        }
        let Some(plan) = self.plan.clone() else { return Vec::new() };
        let mut actions = self.update_health(&plan, now);
        actions.extend(self.evict(&plan, now));
        self.finish_tasks(&plan, now);
        actions.extend(self.watching());
        actions.extend(self.publish());
        actions.extend(self.save());
        actions
    }

    /// The Probe and Observe actions, when they differ from those last given.
    fn watching(&mut self) -> Vec<Action> {
        let now = self.watch_list();
        if now == self.watching {
            return Vec::new();
        }
        self.watching = now.clone();
        now
    }

    fn burst(&self) -> f64 {
        self.settings.eviction_rate.max(1.0)
    }

    /// The overlay renders must heed, when it changed.
    fn publish(&mut self) -> Vec<Action> {
        let overlay = self.overlay();
        if self.published.as_ref() == Some(&overlay) {
            return Vec::new();
        }
        self.published = Some(overlay.clone());
        vec![Action::Publish(overlay)]
    }

    /// Live taints and evictions, as a render takes them.
    pub fn overlay(&self) -> ClusterState {
        overlay(&self.memory)
    }

    fn save(&mut self) -> Vec<Action> {
        if self.saved.as_ref() == Some(&self.memory) {
            return Vec::new();
        }
        self.saved = Some(self.memory.clone());
        vec![Action::Save(self.memory.clone())]
    }

    fn record(&mut self, moved: Move) -> Action {
        self.memory.history.push_back(moved.clone());
        while self.memory.history.len() > HISTORY {
            self.memory.history.pop_front();
        }
        Action::Moved(moved)
    }
}

/// The live taints and evictions `memory` holds, as a render takes them (a sharded
/// replica that does not lead renders with the leader's, read from its store).
pub fn overlay(memory: &Memory) -> ClusterState {
    let taints = memory
        .clusters
        .iter()
        .filter(|(_, h)| !h.taints.is_empty())
        .map(|(c, h)| (c.clone(), h.taints.iter().map(|t| t.taint.clone()).collect()))
        .collect();
    let evictions = memory
        .evictions
        .iter()
        .map(|(key, tasks)| {
            let tasks = tasks.iter().map(|(c, t)| (c.clone(), Evicted { keep: t.kept.then_some(t.replicas) }));
            (key.clone(), tasks.collect())
        })
        .collect();
    ClusterState { taints, evictions, ..ClusterState::default() }
}
