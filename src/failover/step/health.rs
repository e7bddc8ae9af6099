//! Member health, Karmada's way: a Push member is NotReady once its probes have failed
//! for the failure threshold and Ready again once they have passed for the success
//! threshold; a Pull member is Unknown once its agent's Lease has not been renewed for
//! the monitor grace period; nothing is decided about a member in the startup grace.
//! Each decision becomes taints: Karmada's NoSchedule health taint, plus whatever the
//! repo's ClusterTaintPolicies hold for the new condition.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flotilla_core::failover::{Readiness, health_taint, is_health_taint, policy_taints};
use flotilla_core::model::policy::Taint;
use flotilla_core::model::{Cluster, Plan, SyncMode};

use super::{Action, ClusterHealth, Millis, State, Timed};

/// One Push member's recent probes.
#[derive(Debug, Default, Clone)]
pub(super) struct Probes {
    failing_since: Option<Millis>,
    passing_since: Option<Millis>,
    last: Option<Millis>,
}

impl Probes {
    pub(super) fn record(&mut self, ok: bool, now: Millis) {
        self.last = Some(now);
        if ok {
            self.failing_since = None;
            self.passing_since.get_or_insert(now);
        } else {
            self.passing_since = None;
            self.failing_since.get_or_insert(now);
        }
    }
}

pub(super) fn ms(d: Duration) -> Millis {
    d.as_millis().try_into().unwrap_or(Millis::MAX)
}

impl State {
    /// Decides every declared member's readiness and taints; forgets the others.
    pub(super) fn update_health(&mut self, plan: &Plan, now: Millis) -> Vec<Action> {
        let mut actions = Vec::new();
        for cluster in &plan.loaded.clusters {
            let old = self.memory.clusters.get(&cluster.name).map(|h| h.ready);
            let Some((ready, reason)) = self.readiness(cluster, old, now) else { continue };
            let health = self.memory.clusters.entry(cluster.name.clone()).or_insert_with(|| ClusterHealth {
                ready,
                since: now,
                reason: reason.clone(),
                taints: Vec::new(),
            });
            if old != Some(ready) {
                (health.ready, health.since, health.reason) = (ready, now, reason.clone());
                actions.push(Action::Changed { cluster: cluster.name.clone(), ready, reason });
            }
            let conditions = BTreeMap::from([("Ready".to_owned(), ready.as_str().to_owned())]);
            let held: Vec<Taint> =
                health.taints.iter().map(|t| t.taint.clone()).filter(|t| !is_health_taint(t)).collect();
            let mut taints = policy_taints(&plan.loaded.cluster_taint_policies, cluster, &conditions, &held);
            taints.extend(health_taint(ready));
            let added: BTreeMap<(String, String), Millis> =
                health.taints.iter().map(|t| ((t.taint.key.clone(), t.taint.effect.clone()), t.added)).collect();
            health.taints = taints
                .into_iter()
                .map(|taint| {
                    let added = added.get(&(taint.key.clone(), taint.effect.clone())).copied().unwrap_or(now);
                    Timed { taint, added }
                })
                .collect();
        }
        let declared: BTreeSet<&str> = plan.loaded.clusters.iter().map(|c| c.name.as_str()).collect();
        self.memory.clusters.retain(|name, _| declared.contains(name.as_str()));
        actions
    }

    /// The member's readiness now and why, or `None` to leave it as it is.
    fn readiness(&self, cluster: &Cluster, old: Option<Readiness>, now: Millis) -> Option<(Readiness, String)> {
        let s = &self.settings;
        let starting = now - self.started < ms(s.startup_grace);
        let silent = |last: Millis| now - last > ms(s.monitor_grace);
        let secs = |since: Millis| (now - since) / 1000;
        match cluster.spec.sync_mode {
            SyncMode::Push => {
                let probes = self.probes.get(&cluster.name).filter(|p| p.last.is_some());
                let Some(probes) = probes else {
                    return (!starting).then(|| (Readiness::Unknown, "no probe has answered".to_owned()));
                };
                if probes.last.is_some_and(silent) {
                    return Some((Readiness::Unknown, "no probe result within the monitor grace period".into()));
                }
                if let Some(since) = probes.failing_since {
                    let failed = now - since >= ms(s.failure_threshold);
                    return failed.then(|| (Readiness::False, format!("probes have failed for {}s", secs(since))));
                }
                let since = probes.passing_since?;
                let recovered = matches!(old, None | Some(Readiness::True)) || now - since >= ms(s.success_threshold);
                recovered.then(|| (Readiness::True, "the API server answers /readyz".to_owned()))
            }
            SyncMode::Pull => match self.leases.get(&cluster.name) {
                Some(&renewed) if silent(renewed) => {
                    Some((Readiness::Unknown, format!("its agent has not renewed its Lease for {}s", secs(renewed))))
                }
                Some(_) => Some((Readiness::True, "its agent renews its Lease".to_owned())),
                None => (!starting).then(|| (Readiness::Unknown, "no Lease from its agent".to_owned())),
            },
        }
    }
}
