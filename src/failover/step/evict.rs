//! Evictions, Karmada's taint manager and application failover in one: an opted-in
//! workload leaves a member whose NoExecute taint it no longer tolerates, or where it
//! has been unhealthy for its `decisionConditions.tolerationSeconds`; at most
//! `--eviction-rate` a second, and none while most members look unhealthy. The old copy
//! goes as the purge mode says; the eviction lasts until the workload is rescheduled
//! (its replicas or placement change in Git), as Karmada never moves replicas back of
//! its own accord.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_core::failover::{Placed, Readiness, opted_in, tolerated_for};
use flotilla_core::model::failover::PurgeMode;
use flotilla_core::model::{ObjectKey, Plan, SyncMode};

use super::health::ms;
use super::{Action, Millis, Move, State, Task};

/// Karmada's `gracePeriodSeconds` default for application failover.
const APPLICATION_GRACE_SECONDS: i64 = 600;

/// Why a workload must leave a member, and how.
struct Due {
    reason: String,
    purge: PurgeMode,
    grace_ms: Millis,
}

impl State {
    /// Evicts what is due, within the rate.
    pub(super) fn evict(&mut self, plan: &Plan, now: Millis) -> Vec<Action> {
        if !self.settings.eviction || self.halted(plan) {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for placed in opted_in(plan) {
            let key = placed.key.spelled();
            if self.memory.evictions.get(&key).is_some_and(|t| t.contains_key(placed.cluster)) {
                continue;
            }
            let Some(due) = self.due(plan, &placed, now) else { continue };
            if self.tokens < 1.0 {
                break;
            }
            self.tokens -= 1.0;
            let keep_until = (due.purge == PurgeMode::Gracefully).then_some(now + due.grace_ms);
            let task = Task {
                at: now,
                reason: due.reason.clone(),
                replicas: placed.replicas,
                purge: due.purge,
                kept: due.purge != PurgeMode::Directly,
                keep_until,
                fingerprint: placed.fingerprint(),
            };
            self.memory.evictions.entry(key.clone()).or_default().insert(placed.cluster.to_owned(), task);
            let before = plan.placements.get(&key).map(|p| p.clusters.clone()).unwrap_or_default();
            let moved = Move {
                at: now,
                object: key,
                from: placed.cluster.to_owned(),
                reason: due.reason,
                purge: due.purge,
                before,
                after: None,
            };
            actions.push(self.record(moved));
        }
        actions
    }

    /// More than the threshold's share of members unhealthy: this controller is more
    /// likely cut off than they are all down, so nothing moves.
    pub(super) fn halted(&self, plan: &Plan) -> bool {
        let total = plan.loaded.clusters.len();
        let unhealthy = self.memory.clusters.values().filter(|h| h.ready != Readiness::True).count();
        total > 0 && unhealthy as f64 / total as f64 > self.settings.unhealthy_threshold
    }

    fn due(&self, plan: &Plan, placed: &Placed<'_>, now: Millis) -> Option<Due> {
        let health = self.memory.clusters.get(placed.cluster);
        let live = health.into_iter().flat_map(|h| h.taints.iter().map(|t| (&t.taint, t.added)));
        // Taints declared in Git count from when this leader started.
        let declared = plan.loaded.clusters.iter().filter(|c| c.name == placed.cluster);
        let declared = declared.flat_map(|c| c.spec.taints.iter().map(|t| (t, self.started)));
        for (taint, added) in live.chain(declared) {
            let Some(seconds) = tolerated_for(placed.tolerations, taint) else { continue };
            if now >= added + seconds * 1000 {
                let borne = if seconds > 0 { format!(" past its {seconds}s toleration") } else { String::new() };
                let reason = format!("taint {}:{}{borne}", taint.key, taint.effect);
                let grace_ms = ms(self.settings.graceful_timeout);
                return Some(Due { reason, purge: placed.failover.cluster_purge(), grace_ms });
            }
        }
        let app = placed.failover.application.as_ref()?;
        if health.is_none_or(|h| h.ready != Readiness::True) {
            return None;
        }
        let since = self.workloads.get(&(placed.key.spelled(), placed.cluster.to_owned()))?.failing_since?;
        let tolerate = app.toleration_seconds();
        (now - since >= tolerate * 1000).then(|| Due {
            reason: format!("unhealthy for {}s (tolerated {tolerate}s)", (now - since) / 1000),
            purge: app.purge_mode.unwrap_or(PurgeMode::Gracefully),
            grace_ms: app.grace_period_seconds.unwrap_or(APPLICATION_GRACE_SECONDS) * 1000,
        })
    }

    /// A gracefully kept copy goes once the workload is healthy in every member it now
    /// runs in, or at its deadline.
    pub(super) fn finish_tasks(&mut self, plan: &Plan, now: Millis) {
        let workloads = &self.workloads;
        for (key, tasks) in &mut self.memory.evictions {
            let evicted: BTreeSet<String> = tasks.keys().cloned().collect();
            let placed = plan.placements.get(key).into_iter().flat_map(|p| p.clusters.keys());
            let running: Vec<&String> = placed.filter(|c| !evicted.contains(*c)).collect();
            let healthy_elsewhere = !running.is_empty()
                && running.iter().all(|c| workloads.get(&(key.clone(), (*c).clone())).is_some_and(|o| o.healthy));
            for task in tasks.values_mut().filter(|t| t.kept && t.purge == PurgeMode::Gracefully) {
                if healthy_elsewhere || task.keep_until.is_some_and(|until| now >= until) {
                    task.kept = false;
                }
            }
        }
    }

    /// On a new render: evictions end when the workload is rescheduled (its
    /// fingerprint changed), leaves Git or loses its opt-in, or the member is gone;
    /// moves learn where the replicas went.
    pub(super) fn retire(&mut self) {
        let Some(plan) = self.plan.clone() else { return };
        let fingerprints: BTreeMap<String, String> =
            opted_in(&plan).iter().map(|p| (p.key.spelled(), p.fingerprint())).collect();
        let declared: BTreeSet<&str> = plan.loaded.clusters.iter().map(|c| c.name.as_str()).collect();
        for (key, tasks) in &mut self.memory.evictions {
            let current = fingerprints.get(key);
            tasks.retain(|cluster, task| current == Some(&task.fingerprint) && declared.contains(cluster.as_str()));
        }
        self.memory.evictions.retain(|_, tasks| !tasks.is_empty());
        for moved in self.memory.history.iter_mut().filter(|m| m.after.is_none()) {
            let now = plan.placements.get(&moved.object).map(|p| p.clusters.clone()).unwrap_or_default();
            if now != moved.before {
                moved.after = Some(now);
            }
        }
    }

    /// The Push members to probe and the workloads whose health decides something.
    pub(super) fn watch_list(&self) -> Vec<Action> {
        let Some(plan) = &self.plan else { return Vec::new() };
        let push: BTreeSet<String> = plan
            .loaded
            .clusters
            .iter()
            .filter(|c| c.spec.sync_mode == SyncMode::Push)
            .map(|c| c.name.clone())
            .collect();
        let mut observe: BTreeSet<(ObjectKey, String)> = BTreeSet::new();
        let graceful = |key: &String| {
            self.memory
                .evictions
                .get(key)
                .is_some_and(|t| t.values().any(|t| t.kept && t.purge == PurgeMode::Gracefully))
        };
        for placed in opted_in(plan) {
            if placed.failover.application.is_some() || graceful(&placed.key.spelled()) {
                observe.insert((placed.key.clone(), placed.cluster.to_owned()));
            }
        }
        vec![Action::Probe(push), Action::Observe(observe)]
    }
}
