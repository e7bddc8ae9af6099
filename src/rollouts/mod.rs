//! The rollout loop (docs/rollouts.md): between the reconcile loop, which renders and
//! publishes each good revision, and the members' workers, which converge on what they
//! are given. For every RolloutPolicy it decides ([`step`]) which revision each member
//! runs the policy's templates at, and passes each publication on with those holds.
//! Its executor carries out the decision: it renders held revisions as the head was
//! rendered, observes members from the members themselves ([`observe`]), reads the
//! gates from Prometheus ([`gates`]), keeps the state and reads people's commands in the
//! host cluster ([`store`]), and reports in `/status` and metrics ([`report`]).
//!
//! Without a RolloutPolicy in the repository this loop passes every publication on as
//! it comes and contacts nothing. Only the leader observes, reads gates and commands,
//! and saves; every write to a member is still its worker's, under the fence.

mod gates;
mod observe;
mod report;
pub mod step;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_core::model::{ClusterState, SyncMode};
use flotilla_core::rollout::PolicyId;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::clusters::Held;
use crate::clusters::connect::Access;
use crate::leader::Fence;
use crate::members::Publication;
use crate::metrics::Metrics;
use crate::rendering::Renderer;
use crate::status::Board;
use step::{Action, Event, State};

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The instance (stamped into objects, so expected digests match what was applied).
    pub instance: String,
    /// How often members are observed, gates read and commands looked for: a failing
    /// gate or member halts within one period.
    pub monitor_period: Duration,
    /// Whether there is a host cluster to keep the state and read commands in.
    pub stored: bool,
}

/// The rollout loop.
pub struct Rollouts {
    /// How it runs.
    pub settings: Settings,
    /// Renders held revisions.
    pub renderer: Renderer,
    /// How members are reached.
    pub access: Access,
    /// The host cluster's ConfigMaps; `None` without a host cluster (the state is then
    /// this process's alone, and commands cannot be given).
    pub store: Option<store::Store>,
    /// Saves only while leading.
    pub fence: Fence,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Member health from the failover loop: a member it holds not Ready is not
    /// contacted (and counts as not standing).
    pub health: Option<watch::Receiver<ClusterState>>,
}

/// What the loop listens to, and where it passes publications on.
pub struct Inputs {
    /// Publications of the reconcile loop.
    pub publications: mpsc::UnboundedReceiver<Publication>,
    /// To the members' workers.
    pub members: mpsc::UnboundedSender<Publication>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
}

/// What the background work shares with the loop.
struct Shared {
    /// The gates' last readings, by policy (status only).
    readings: Mutex<BTreeMap<PolicyId, BTreeMap<String, gates::Reading>>>,
    /// Work in flight, by what it is for: a slow member is not asked again meanwhile.
    busy: Mutex<BTreeSet<String>>,
    http: Option<crate::forge::http::Http>,
}

impl Rollouts {
    /// Runs until `stop` (or the reconcile loop is gone).
    pub async fn run(self, mut inputs: Inputs) {
        let this = Arc::new(self);
        let http = crate::forge::http::Http::anonymous()
            .inspect_err(|e| warn!(error = %format!("{e:#}"), "rollouts: no HTTP client; gates cannot be read"))
            .ok();
        let shared = Arc::new(Shared { readings: Default::default(), busy: Default::default(), http });
        let (events, mut arrived) = mpsc::unbounded_channel::<Event>();
        let mut state = State::new();
        let mut last: Option<Publication> = None;
        let mut every = tokio::time::interval(this.settings.monitor_period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = Some(Event::Leading(*inputs.leading.borrow_and_update()));
        loop {
            let event = match first.take() {
                Some(event) => event,
                None => tokio::select! {
                    published = inputs.publications.recv() => {
                        let Some(published) = published else { break };
                        let event = Event::Published { revision: published.revision.to_string(), plan: published.plan.clone(), now: now() };
                        last = Some(published);
                        event
                    }
                    _ = crate::leader::changed(&mut inputs.leading) => Event::Leading(*inputs.leading.borrow()),
                    Some(event) = arrived.recv() => event,
                    _ = every.tick() => {
                        this.survey(&state, last.as_ref(), &shared, &events);
                        Event::Tick(now())
                    }
                    _ = inputs.stop.changed() => break,
                },
            };
            if let Event::Leading(true) = event {
                this.load(&events);
            }
            for action in state.step(event) {
                this.carry(action, last.as_ref(), &events, &inputs.members).await;
            }
            let readings = shared.readings.lock().expect("readings lock").clone();
            let head = state.head().map(|h| &*h.plan);
            report::report(&this.board, &this.metrics, (state.policies(), head), &readings);
        }
    }

    /// Reads the stored state (retrying until the host answers) and says so.
    fn load(&self, events: &mpsc::UnboundedSender<Event>) {
        let (store, events) = (self.store.clone(), events.clone());
        tokio::spawn(async move {
            let Some(store) = store else {
                let _ = events.send(Event::Loaded(None));
                return;
            };
            let mut warned = false;
            loop {
                match store.load().await {
                    Ok(stored) => {
                        let _ = events.send(Event::Loaded(stored));
                        return;
                    }
                    Err(e) if !warned => {
                        warned = true;
                        warn!(error = %format!("{e:#}"), "rollouts: cannot read their state; holding new revisions until it can");
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
    }

    async fn carry(
        &self,
        action: Action,
        last: Option<&Publication>,
        events: &mpsc::UnboundedSender<Event>,
        members: &mpsc::UnboundedSender<Publication>,
    ) {
        match action {
            Action::Render(revision) => self.render(revision, last, events),
            Action::Save(stored) => {
                let Some(store) = &self.store else { return };
                let saved = tokio::time::timeout(self.access.request_timeout, store.save(&stored, &self.fence)).await;
                match saved {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!(error = %format!("{e:#}"), "rollouts: cannot store their state"),
                    Err(_) => warn!("rollouts: storing their state timed out"),
                }
            }
            Action::Assign(assignment) => {
                let Some(last) = last.filter(|l| l.revision.to_string() == assignment.head.revision) else { return };
                for (policy, holds) in held_summary(&assignment.holds) {
                    info!(policy = %policy, "rollouts: {holds}");
                }
                let publication = Publication {
                    revision: last.revision,
                    plan: assignment.head.plan,
                    state: last.state.clone(),
                    kubeconfig: last.kubeconfig.clone(),
                    members: last.members.clone(),
                    holds: assignment.holds,
                };
                let _ = members.send(publication);
            }
            Action::Warn(text) => warn!("rollouts: {text}"),
        }
    }

    /// Renders `revision` as the last publication was rendered.
    fn render(&self, revision: String, last: Option<&Publication>, events: &mpsc::UnboundedSender<Event>) {
        let (renderer, events) = (self.renderer.clone(), events.clone());
        let state = last.map(|l| (*l.state).clone()).unwrap_or_default();
        tokio::spawn(async move {
            let plan = match revision.parse::<crate::git::Revision>() {
                Ok(oid) => renderer.render(oid, state).await.map(Arc::new).map_err(|e| format!("{e:#}")),
                Err(e) => Err(format!("not a commit id: {e}")),
            };
            let _ = events.send(Event::Rendered { revision, plan });
        });
    }

    /// Starts this period's work: each watched member observed, each soaking rollout's
    /// gates read, people's commands read; each reports back as an event.
    fn survey(
        &self,
        state: &State,
        last: Option<&Publication>,
        shared: &Arc<Shared>,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        if !self.fence.holds() {
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

    fn observe(
        &self,
        watch: &step::Watch,
        last: &Publication,
        shared: &Arc<Shared>,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        let pull: BTreeSet<&str> = watch
            .plan
            .loaded
            .clusters
            .iter()
            .filter(|c| c.spec.sync_mode == SyncMode::Pull)
            .map(|c| c.name.as_str())
            .collect();
        for member in watch.members.iter().filter(|m| !pull.contains(m.as_str())) {
            let (policy, cluster) = (watch.policy.clone(), member.clone());
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

    fn read_gates(
        &self,
        policy: &PolicyId,
        gates: Vec<flotilla_core::model::rollout::Gate>,
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

/// Per policy, the members it holds and at which revision, for the log.
fn held_summary(holds: &BTreeMap<String, Vec<Held>>) -> BTreeMap<PolicyId, String> {
    let mut by: BTreeMap<PolicyId, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for (member, held) in holds {
        for h in held {
            by.entry(h.policy.clone()).or_default().entry(&h.revision).or_default().push(member);
        }
    }
    by.into_iter()
        .map(|(policy, at)| {
            let parts: Vec<String> = at.iter().map(|(r, m)| format!("{} held at {r}", m.join(", "))).collect();
            (policy, parts.join("; "))
        })
        .collect()
}

/// Unix milliseconds now (the decision's clock is the wall clock: its state outlives
/// this process, and a new leader reads it).
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
