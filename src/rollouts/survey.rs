//! Each monitor period's work, in the background, each piece reporting back as an
//! event: the leader observes the members its rollouts watch (a Pull member through
//! what its agent wrote), reads the gates of rollouts in progress and looks for
//! commands; a Pull agent reads the push controller's rollouts and writes what its own
//! member runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use flotilla_core::model::SyncMode;
use flotilla_core::model::rollout::Gate;
use flotilla_core::rollout::PolicyId;
use tokio::sync::mpsc;
use tracing::warn;

use super::step::{Event, State, Watch};
use super::store::{Seen, SeenPolicy};
use super::{Rollouts, Shared, gates, now, observe};
use crate::members::Publication;

/// An agent that has not written for this many periods is not trusted: its member
/// does not stand.
const STALE_PERIODS: u32 = 3;

impl Rollouts {
    /// Starts this period's work.
    pub(super) fn survey(
        &self,
        state: &State,
        last: Option<&Publication>,
        shared: &Arc<Shared>,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        // A sharded replica that does not lead reads the leader's rollouts (reading
        // needs no fence); the leader decides and observes.
        if self.settings.sharded && state.following() {
            self.reload(shared, events);
            return;
        }
        if !self.fence.holds() {
            return;
        }
        if let Some(own) = &self.settings.follow {
            self.reload(shared, events);
            if let Some(last) = last {
                self.report_own(own, state.watching(), last, shared);
            }
            return;
        }
        let Some(last) = last else { return };
        for watch in state.watching() {
            self.observe(&watch, last, shared, events);
            let Some(policy) = watch.policy.find(&watch.plan.loaded) else { continue };
            if !policy.spec.gates.is_empty() {
                self.read_gates(&watch.policy, policy.spec.gates.clone(), shared, events);
            }
        }
        self.read_commands(shared, events);
    }

    /// Observes each watched member: a Push member directly, a Pull member through what
    /// its agent wrote, a member the health loop holds not Ready not at all.
    fn observe(&self, watch: &Watch, last: &Publication, shared: &Arc<Shared>, events: &mpsc::UnboundedSender<Event>) {
        let pull: BTreeSet<&str> = watch
            .plan
            .loaded
            .clusters
            .iter()
            .filter(|c| c.spec.sync_mode == SyncMode::Pull)
            .map(|c| c.name.as_str())
            .collect();
        for member in &watch.members {
            let (policy, cluster) = (watch.policy.clone(), member.clone());
            if pull.contains(member.as_str()) {
                self.observe_pulled(watch, member, shared, events);
                continue;
            }
            let held =
                self.health.as_ref().is_some_and(|h| flotilla_core::failover::held_not_ready(&h.borrow(), member));
            if held {
                let _ = events.send(Event::Observed { policy, cluster, at: None, healthy: false, now: now() });
                continue;
            }
            let Some(done) = Busy::start(shared, format!("observe {} {member}", watch.policy)) else { continue };
            let (access, kubeconfig, watch) = (self.access.clone(), last.kubeconfig.clone(), watch.clone());
            let (instance, events) = (self.settings.instance.clone(), events.clone());
            tokio::spawn(async move {
                let seen = observe::member(&access, &kubeconfig, &instance, &cluster, &watch).await;
                drop(done);
                let at = seen.at.then(|| watch.revision.clone());
                let _ = events.send(Event::Observed { policy, cluster, at, healthy: seen.healthy, now: now() });
            });
        }
    }

    /// A Pull member, as its agent last wrote it saw it: standing only while the agent
    /// keeps writing (its sequence moved within [`STALE_PERIODS`]).
    fn observe_pulled(&self, watch: &Watch, member: &str, shared: &Arc<Shared>, events: &mpsc::UnboundedSender<Event>) {
        let Some(store) = self.store.clone() else { return };
        let Some(done) = Busy::start(shared, format!("seen {} {member}", watch.policy)) else { return };
        let (shared, events, watch, member) = (shared.clone(), events.clone(), watch.clone(), member.to_owned());
        let fresh_for = self.settings.monitor_period * STALE_PERIODS;
        tokio::spawn(async move {
            let seen = store.seen(&member).await;
            drop(done);
            let seen = seen
                .inspect_err(|e| warn!(error = %format!("{e:#}"), member, "rollouts: cannot read what the agent saw"))
                .ok()
                .flatten();
            let fresh = seen.as_ref().is_some_and(|s| {
                let mut known = shared.seen.lock().expect("seen lock");
                let entry = known.entry(member.clone()).or_insert((s.sequence, Instant::now()));
                if entry.0 != s.sequence {
                    *entry = (s.sequence, Instant::now());
                }
                entry.1.elapsed() < fresh_for
            });
            let mine = seen.filter(|_| fresh).and_then(|s| {
                s.policies.into_iter().find(|p| p.policy == watch.policy && p.revision == watch.revision)
            });
            let (at, healthy) = mine.map_or((None, false), |p| (p.at.then(|| watch.revision.clone()), p.healthy));
            let _ = events.send(Event::Observed { policy: watch.policy, cluster: member, at, healthy, now: now() });
        });
    }

    /// A follower reads the push controller's rollouts again.
    fn reload(&self, shared: &Arc<Shared>, events: &mpsc::UnboundedSender<Event>) {
        let Some(store) = self.store.clone() else { return };
        let Some(done) = Busy::start(shared, "reload".into()) else { return };
        let events = events.clone();
        tokio::spawn(async move {
            let read = store.load().await;
            drop(done);
            match read {
                Ok(stored) => {
                    let _ = events.send(Event::Loaded(stored));
                }
                Err(e) => warn!(error = %format!("{e:#}"), "rollouts: cannot read the push controller's rollouts"),
            }
        });
    }

    /// A follower observes its own member for each rollout watching it and writes what
    /// it saw for the push controller.
    fn report_own(&self, own: &str, watches: Vec<Watch>, last: &Publication, shared: &Arc<Shared>) {
        let (Some(store), Some(done)) = (self.store.clone(), Busy::start(shared, "report".into())) else { return };
        let watches: Vec<Watch> = watches.into_iter().filter(|w| w.members.contains(own)).collect();
        let (access, kubeconfig, instance) =
            (self.access.clone(), last.kubeconfig.clone(), self.settings.instance.clone());
        let (own, shared) = (own.to_owned(), shared.clone());
        tokio::spawn(async move {
            let mut policies = Vec::new();
            for watch in watches {
                let seen = observe::member(&access, &kubeconfig, &instance, &own, &watch).await;
                let (policy, revision) = (watch.policy, watch.revision);
                policies.push(SeenPolicy { policy, revision, at: seen.at, healthy: seen.healthy });
            }
            let sequence = shared.sequence.fetch_add(1, Ordering::SeqCst) + 1;
            if let Err(e) = store.save_seen(&own, &Seen { sequence, policies }).await {
                warn!(error = %format!("{e:#}"), "rollouts: cannot write what this member runs");
            }
            drop(done);
        });
    }

    /// Posts each rollout's commit status where it changed (the leader, with a forge).
    /// One post per context at a time; one that fails is posted again at the next change.
    pub(super) fn post_statuses(&self, state: &State, shared: &Arc<Shared>) {
        let Some(forge) = &self.forge else { return };
        if self.settings.follow.is_some() || !self.fence.holds() {
            return;
        }
        for (id, policy) in state.policies() {
            let Some((sha, status)) = super::report::commit_status(id, policy) else { continue };
            let posted = (sha.clone(), status.clone());
            if shared.posted.lock().expect("posted lock").get(&status.context) == Some(&posted) {
                continue;
            }
            let Some(done) = Busy::start(shared, format!("status {}", status.context)) else { continue };
            let (forge, shared) = (forge.clone(), shared.clone());
            tokio::spawn(async move {
                match forge.set_status(&sha, &status).await {
                    Ok(()) => {
                        shared.posted.lock().expect("posted lock").insert(status.context.clone(), posted);
                    }
                    Err(e) => warn!(error = %e, context = %status.context, "rollouts: cannot post the commit status"),
                }
                drop(done);
            });
        }
    }

    fn read_gates(
        &self,
        policy: &PolicyId,
        gates: Vec<Gate>,
        shared: &Arc<Shared>,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        let Some(done) = Busy::start(shared, format!("gates {policy}")) else { return };
        let (policy, shared, events) = (policy.clone(), shared.clone(), events.clone());
        tokio::spawn(async move {
            let (readings, failing) = match &shared.http {
                Some(http) => gates::read(http, &gates).await,
                None => (BTreeMap::new(), Some("no HTTP client to read gates with".to_owned())),
            };
            drop(done);
            shared.readings.lock().expect("readings lock").insert(policy.clone(), readings);
            let _ = events.send(Event::Gates { policy, failing, now: now() });
        });
    }

    fn read_commands(&self, shared: &Arc<Shared>, events: &mpsc::UnboundedSender<Event>) {
        let Some(store) = self.store.clone() else { return };
        let Some(done) = Busy::start(shared, "commands".into()) else { return };
        let events = events.clone();
        tokio::spawn(async move {
            let read = store.commands().await;
            drop(done);
            match read {
                Ok(recorded) => {
                    for r in recorded {
                        let _ =
                            events.send(Event::Command { policy: r.policy, id: r.id, command: r.command, now: now() });
                    }
                }
                Err(e) => warn!(error = %format!("{e:#}"), "rollouts: cannot read commands"),
            }
        });
    }
}

/// A piece of background work in flight, done when dropped.
struct Busy {
    shared: Arc<Shared>,
    what: String,
}

impl Busy {
    /// Marks `what` in flight, unless it already is.
    fn start(shared: &Arc<Shared>, what: String) -> Option<Self> {
        shared.busy.lock().expect("busy lock").insert(what.clone()).then(|| Self { shared: shared.clone(), what })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.shared.busy.lock().expect("busy lock").remove(&self.what);
    }
}
