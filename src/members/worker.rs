//! One member's worker: the executor of [`super::step`]. It turns what it sees (a new
//! target, the member's health taint, the lease, an attempt's end, a retry time) into
//! events, and carries out what the step decides: start an attempt, or drop the one in
//! flight (a dropped attempt sends nothing more).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::watch;
use tracing::info;

use super::step::{Action, Attempted, Event, State};
use super::{Fleet, Target};
use crate::clusters;

type Attempt = Pin<Box<dyn Future<Output = (clusters::Outcome, std::time::Duration)>>>;

/// One member's worker.
pub(super) struct Worker {
    name: String,
    fleet: Arc<Fleet>,
    /// Attempts in flight across the fleet.
    busy: Arc<AtomicUsize>,
    leading: watch::Receiver<bool>,
    health: Option<watch::Receiver<flotilla_core::model::ClusterState>>,
}

impl Worker {
    pub(super) fn new(
        name: String,
        (fleet, busy): (Arc<Fleet>, Arc<AtomicUsize>),
        leading: watch::Receiver<bool>,
    ) -> Self {
        let health = fleet.health.clone();
        Self { name, fleet, busy, leading, health }
    }

    /// Converges the member on the targets that arrive, until their sender is dropped
    /// (the member left the repository, or the controller stops).
    pub(super) async fn work(mut self, mut targets: watch::Receiver<Option<Arc<Target>>>) {
        let mut state = State::new();
        state.step(Event::Leading(*self.leading.borrow_and_update()));
        state.step(Event::Ready(self.ready()));
        let mut latest: Option<Arc<Target>> = None;
        let mut attempt: Option<(u64, Attempt)> = None;
        loop {
            let retry_at = state.retry_at();
            let event = tokio::select! {
                // The lease first: a target published under a term this worker has not
                // seen begin yet must not meet it standing by and be dropped, and one
                // published before the lease was lost must meet it standing by.
                biased;
                _ = crate::leader::changed(&mut self.leading) => Event::Leading(*self.leading.borrow()),
                changed = targets.changed() => {
                    if changed.is_err() {
                        // The member left: its attempt in flight is dropped with it.
                        if attempt.is_some() {
                            self.busy.fetch_sub(1, Ordering::SeqCst);
                        }
                        return;
                    }
                    let Some(target) = targets.borrow_and_update().clone() else { continue };
                    let goal = target.goal;
                    latest = Some(target);
                    Event::Target(goal)
                }
                _ = changed(&mut self.health) => Event::Ready(self.ready()),
                ((outcome, took), generation) = run(&mut attempt) => {
                    attempt = None;
                    if self.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                        // The last attempt in flight: the fleet's cycle is over.
                        crate::memory::hand_back(&self.fleet.metrics).await;
                    }
                    if targets.has_changed().is_err() {
                        return;
                    }
                    self.ended(latest.as_deref().filter(|t| t.goal.generation == generation), outcome, took, generation)
                }
                _ = sleep_until(retry_at), if retry_at.is_some() => Event::Tick(Instant::now()),
            };
            for action in state.step(event) {
                match action {
                    Action::Start(goal) => {
                        let target = latest.clone().expect("a goal comes with its target");
                        info!(cluster = %self.name, revision = %goal.revision, "reconciling");
                        self.busy.fetch_add(1, Ordering::SeqCst);
                        attempt = Some((goal.generation, self.attempt(target)));
                    }
                    Action::Cancel => {
                        info!(cluster = %self.name, "attempt dropped: a newer target, the member not Ready, or the lease lost");
                        self.busy.fetch_sub(1, Ordering::SeqCst);
                        attempt = None;
                    }
                }
            }
            super::report::state(&self.fleet, &self.name, &state);
        }
    }

    /// An attempt's end as an event, recorded when it was at the newest target.
    fn ended(
        &self,
        newest: Option<&Target>,
        outcome: clusters::Outcome,
        took: std::time::Duration,
        generation: u64,
    ) -> Event {
        let result = match &outcome {
            Ok(report) if report.failed.is_empty() => Attempted::Applied,
            Ok(report) => Attempted::Partly(format!("{} objects refused (see its line)", report.failed.len())),
            Err(e) => Attempted::Failed(e.clone()),
        };
        if let Some(target) = newest {
            super::report::attempted(&self.fleet, &self.name, target, outcome, took);
        }
        Event::Finished { generation, result, now: Instant::now() }
    }

    /// Whether the failover loop holds the member Ready (no health taint); without the
    /// failover loop, every member is.
    fn ready(&self) -> bool {
        let Some(health) = &self.health else { return true };
        !flotilla_core::failover::held_not_ready(&health.borrow(), &self.name)
    }

    /// One attempt at `target`, bounded by the cluster timeout and not retried here.
    fn attempt(&self, target: Arc<Target>) -> Attempt {
        let (fleet, name) = (self.fleet.clone(), self.name.clone());
        Box::pin(async move {
            let clock = Instant::now();
            let settings = &fleet.settings;
            let options = clusters::Options {
                progress: false,
                instance: &settings.instance,
                trust: settings.trust,
                pool: &fleet.pool,
                budget: Default::default(),
                concurrency: settings.concurrency,
                request_timeout: settings.request_timeout,
                cluster_timeout: settings.cluster_timeout,
                retry: false,
                fence: &fleet.fence,
                source: &settings.source,
                adopt: settings.adopt,
                scope: settings.scope.as_deref(),
                acting_as: settings.acting_as.as_deref(),
            };
            let outcome =
                clusters::reconcile_one((&target.plan, &target.holds), &target.kubeconfig, &name, options).await;
            (outcome, clock.elapsed())
        })
    }
}

/// The attempt in flight's end, with its generation; never, without one.
async fn run(attempt: &mut Option<(u64, Attempt)>) -> ((clusters::Outcome, std::time::Duration), u64) {
    match attempt {
        Some((generation, future)) => (future.await, *generation),
        None => std::future::pending().await,
    }
}

/// A change of the health overlay; never, without the failover loop (or once it ends).
async fn changed(health: &mut Option<watch::Receiver<flotilla_core::model::ClusterState>>) {
    if let Some(receiver) = health
        && receiver.changed().await.is_ok()
    {
        return;
    }
    *health = None;
    std::future::pending().await
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}
