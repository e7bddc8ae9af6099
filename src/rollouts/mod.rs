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
mod survey;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_core::model::ClusterState;
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
    /// A Pull agent's member: the loop follows the push controller's rollouts for it,
    /// read from the push controller's host cluster, and reports what its member runs.
    pub follow: Option<String>,
    /// A sharded replica (`--sharding`): it decides while it leads the fleet and
    /// follows the leader's stored state otherwise.
    pub sharded: bool,
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
    /// The forge (`--previews`), if any: each rollout's commit gets a status.
    pub forge: Option<crate::forge::Forge>,
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
    /// Per Pull member: the last sequence its agent wrote, and when it was first seen.
    seen: Mutex<BTreeMap<String, (u64, std::time::Instant)>>,
    /// A follower's own writes of what it sees.
    sequence: std::sync::atomic::AtomicU64,
    /// The commit status last posted per context, and to which commit.
    posted: Mutex<BTreeMap<String, (String, crate::forge::Status)>>,
}

impl Rollouts {
    /// Runs until `stop` (or the reconcile loop is gone).
    pub async fn run(self, mut inputs: Inputs) {
        let this = Arc::new(self);
        let http = crate::forge::http::Http::anonymous()
            .inspect_err(|e| warn!(error = %format!("{e:#}"), "rollouts: no HTTP client; gates cannot be read"))
            .ok();
        let shared = Arc::new(Shared {
            readings: Default::default(),
            busy: Default::default(),
            http,
            seen: Default::default(),
            sequence: Default::default(),
            posted: Default::default(),
        });
        let (events, mut arrived) = mpsc::unbounded_channel::<Event>();
        let mut state = match (&this.settings.follow, this.settings.sharded) {
            (Some(_), _) => State::follower(),
            (None, true) => State::sharded(),
            (None, false) => State::new(),
        };
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
            this.post_statuses(&state, &shared);
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
