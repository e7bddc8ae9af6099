//! The fleet page's feed in the controller (`flotilla run --ui`): a loop that keeps the
//! page's snapshot current from what the controller already holds, the plan the
//! reconcile loop rendered and the status `/status` serves, plus a periodic reading of
//! the members (as `flotilla status` reads them) for health and ready replicas. The
//! decision is [`step`]; this module only carries it out. It writes nothing anywhere.

pub mod step;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flotilla_core::model::{ClusterState, Plan};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::{Snapshot, model};
use crate::clusters::connect::Access;
use crate::clusters::status::{Observed, objects, observe_cluster};
use crate::status::{Board, Status};
use step::{Action, Event, State};

/// Members read at once.
const READ_AT_ONCE: usize = 16;
/// How often the status is looked at for changes.
const STATUS_EVERY: Duration = Duration::from_millis(500);

/// The feed.
pub struct Feed {
    /// How members are reached (the clients every loop shares).
    pub access: Access,
    /// The controller's status.
    pub board: Arc<Board>,
    /// Member health as the failover loop holds it (what renders were made with), for
    /// the page's explanations.
    pub health: Option<watch::Receiver<ClusterState>>,
    /// Time between readings of the members.
    pub every: Duration,
    /// Where snapshots go (every open page watches it).
    pub publish: watch::Sender<Arc<Snapshot>>,
}

/// What wakes it.
pub struct Inputs {
    /// Every plan the reconcile loop renders.
    pub rendered: watch::Receiver<Option<Arc<Plan>>>,
    /// Becomes true on shutdown.
    pub stop: watch::Receiver<bool>,
}

/// One finished reading: per member, what it reports or why it could not be read.
type Reading = (Vec<(String, Observed)>, BTreeMap<String, String>);

impl Feed {
    /// Runs until `stop`.
    pub async fn run(self, mut inputs: Inputs) {
        let mut state = State::default();
        let (done, mut finished) = mpsc::unbounded_channel::<Reading>();
        let mut reading: Reading = Default::default();
        let mut status = self.board.snapshot();
        let mut due = tokio::time::interval(self.every);
        let mut poll = tokio::time::interval(STATUS_EVERY);
        for ticker in [&mut due, &mut poll] {
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        loop {
            let event = tokio::select! {
                _ = inputs.stop.changed() => return,
                changed = inputs.rendered.changed() => match changed {
                    Ok(()) if inputs.rendered.borrow_and_update().is_some() => Event::Rendered,
                    Ok(()) => continue,
                    Err(_) => return,
                },
                Some(read) = finished.recv() => {
                    reading = read;
                    Event::Observed
                }
                _ = due.tick() => Event::Due,
                _ = poll.tick() => {
                    let now = self.board.snapshot();
                    if now == status { continue }
                    status = now;
                    Event::StatusChanged
                }
            };
            let plan = inputs.rendered.borrow().clone();
            for action in step::step(&mut state, event) {
                match (action, &plan) {
                    (Action::Publish, _) => self.publish(plan.as_ref(), &reading, &status),
                    (Action::Observe, Some(plan)) => self.observe(plan.clone(), done.clone()),
                    // The step reads only after a render, and a render is never taken
                    // back; answer as a finished empty reading all the same.
                    (Action::Observe, None) => {
                        let _ = done.send(Default::default());
                    }
                }
            }
        }
    }

    /// Builds the snapshot and hands it to the pages.
    fn publish(&self, plan: Option<&Arc<Plan>>, (observed, errors): &Reading, status: &Status) {
        let state = self.health.as_ref().map(|h| h.borrow().clone()).unwrap_or_default();
        let fleet = plan.map(|p| model::fleet(p, &objects(p, observed), errors)).unwrap_or_default();
        let snapshot = Snapshot { fleet, plan: plan.cloned(), state, status: Some(status.clone()) };
        self.publish.send_replace(Arc::new(snapshot));
    }

    /// Reads every member the plan declares, a few at once, on a task of its own; the
    /// reading comes back on `done`.
    fn observe(&self, plan: Arc<Plan>, done: mpsc::UnboundedSender<Reading>) {
        let access = self.access.clone();
        tokio::spawn(async move {
            let reading = read(&access, &plan).await;
            let _ = done.send(reading);
        });
    }
}

async fn read(access: &Access, plan: &Arc<Plan>) -> Reading {
    let kubeconfig = match access.kubeconfig().await {
        Ok(k) => Arc::new(k),
        Err(e) => {
            let why = format!("cannot read the member credentials: {e:#}");
            return (Vec::new(), plan.clusters.keys().map(|c| (c.clone(), why.clone())).collect());
        }
    };
    let results: Vec<(String, Result<Observed, String>)> = futures::stream::iter(plan.clusters.keys().cloned())
        .map(|cluster| {
            let (kubeconfig, plan) = (kubeconfig.clone(), plan.clone());
            async move {
                let client =
                    access.pool.client(&kubeconfig, &cluster, access.trust, access.request_timeout, None).await;
                let observed = match client {
                    Ok(client) => observe_cluster(&client, &plan, &cluster).await,
                    Err(e) => Err(e.to_string()),
                };
                (cluster, observed)
            }
        })
        .buffer_unordered(READ_AT_ONCE)
        .collect()
        .await;
    let (mut observed, mut errors) = (Vec::new(), BTreeMap::new());
    for (cluster, result) in results {
        match result {
            Ok(o) => observed.push((cluster, o)),
            Err(e) => {
                errors.insert(cluster, e);
            }
        }
    }
    observed.sort_by(|a, b| a.0.cmp(&b.0));
    (observed, errors)
}
