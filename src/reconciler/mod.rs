//! The reconcile loop: fetch the followed branch, decide ([`step`]), and when told to,
//! render a revision completely and publish it to the members ([`cycle`]), whose workers
//! each converge on it on their own (`crate::members`). A revision that does not render
//! is reported and the last good one stays applied; every resync republishes (drift is
//! corrected), even while the remote is down; a trigger (webhook, local commit,
//! autoscaler state) wakes the loop at once. Nothing here writes to a member: the
//! workers write, only while leading.

mod cycle;
pub mod step;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_core::load::ParseCache;
use flotilla_core::model::{ClusterState, Plan};
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::clusters::connect::{Pool, Trust};
use crate::clusters::credentials::Credentials;
use crate::git::{Git, Revision};
use crate::host::Host;
use crate::metrics::{ErrorReason, Metrics};
use crate::status::Board;
use step::{Action, Event, Outcome, State, Why};

/// How the loop runs and reconciles.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Subdirectory of the repository that holds the fleet (empty: the root).
    pub path: String,
    /// Time between fetches.
    pub interval: Duration,
    /// Reconcile at least this often even without a new revision.
    pub resync: Duration,
    /// Pull mode: the one member this instance is the agent of.
    pub agent: Option<String>,
    /// Instance name (inventory, prune scope).
    pub instance: String,
    /// Which kubeconfig credentials to trust.
    pub trust: Trust,
    /// Requests in flight per cluster.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Per-cluster timeout.
    pub cluster_timeout: Duration,
    /// The controller's namespace in the host cluster.
    pub namespace: String,
    /// Renders read replica counts from the host cluster (`--writeback=state`).
    pub replica_state: bool,
    /// The followed repository, branch and path, recorded in each inventory.
    pub source: flotilla_core::inventory::Source,
    /// Take over inventories another source recorded.
    pub adopt: bool,
    /// The user objects are written as in each member (impersonated), if any.
    pub acting_as: Option<String>,
    /// Only heads signed by an allowed signer are applied (`--verify-commits`).
    pub verifier: Option<crate::git::Verifier>,
    /// What the repository may touch; `None`: everything.
    pub scope: Option<std::sync::Arc<flotilla_core::project::Project>>,
    /// What the repository may declare.
    pub admission: flotilla_core::load::Admission,
}

/// Why the loop is woken early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The branch moved (a webhook, a local commit): fetch now.
    Fetch,
    /// Reconcile even if the branch did not move (the replica state changed).
    Force,
}

/// What the loop works with.
pub struct Reconciler {
    /// Settings.
    pub settings: Settings,
    /// The followed branch.
    pub git: Git,
    /// The host cluster.
    pub host: Arc<Host>,
    /// Member credentials.
    pub credentials: Credentials,
    /// Member clients, kept across cycles.
    pub pool: Arc<Pool>,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Each successful render is published here (for the autoscaler).
    pub rendered: watch::Sender<Option<Arc<Plan>>>,
    /// Documents of the last rendered revision by blob id.
    pub parse_cache: Arc<Mutex<ParseCache>>,
    /// Where rendered revisions go: the members' workers.
    pub publish: mpsc::UnboundedSender<crate::members::Publication>,
    /// What renders must heed beyond Git: live taints and evictions (the failover
    /// loop's), if any.
    pub overlay: Option<watch::Receiver<ClusterState>>,
}

/// What the loop listens to.
pub struct Inputs {
    /// Early wake-ups (`None`: none, or no sender is left).
    pub triggers: Option<mpsc::UnboundedReceiver<Trigger>>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
}

impl Reconciler {
    /// Runs until `stop`.
    pub async fn run(self, mut inputs: Inputs) {
        let mut state = State::new(self.settings.resync);
        let mut placements = ClusterState::default();
        let mut was_leading = None;
        while !*inputs.stop.borrow() {
            let leading = *inputs.leading.borrow_and_update();
            if was_leading != Some(leading) {
                was_leading = Some(leading);
                state.step(Event::Leading(leading));
                self.metrics.leading.set(i64::from(leading));
                info!(leading, "{}", if leading { "leading: taking over" } else { "standing by" });
            }
            if leading {
                // A fetch cannot be interrupted on the Git thread, but stopping need not
                // wait for it: nothing has been written yet.
                let event = tokio::select! {
                    event = self.fetch(state.applied()) => event,
                    _ = inputs.stop.changed() => break,
                };
                let actions = state.step(event);
                self.act(&mut state, actions, &mut placements, &mut inputs).await;
            }
            self.publish(&state, leading);
            self.wait(&mut state, &mut inputs, leading).await;
        }
    }

    /// Sleeps until the next fetch or resync is due, or something wakes the loop earlier.
    async fn wait(&self, state: &mut State, inputs: &mut Inputs, leading: bool) {
        // A stop seen mid-cycle is already marked seen: `stop.changed()` below would not
        // fire again, and the loop would sleep a whole interval before it stopped.
        if *inputs.stop.borrow() {
            return;
        }
        let interval = if leading {
            // A resync wakes the loop as a fetch does; it fetches first, as every wake-up.
            self.settings.interval.min(state.until_resync(Instant::now()))
        } else {
            Duration::MAX
        };
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = crate::leader::changed(&mut inputs.leading) => {}
            trigger = next_trigger(&mut inputs.triggers) => match trigger {
                Some(Trigger::Force) => { state.step(Event::Forced); }
                Some(Trigger::Fetch) => info!("woken: fetching now"),
                // Every sender is gone (the autoscaler ends when the controller stops):
                // the timer and `stop` still wake the loop.
                None => {}
            },
            _ = inputs.stop.changed() => {}
        }
    }

    /// Fetches the branch and says what came of it.
    async fn fetch(&self, applied: Option<Revision>) -> Event {
        let clock = Instant::now();
        let verifier = self.settings.verifier.clone();
        let fetched = self
            .git
            .run(move |branch| {
                let head = branch.fetch()?;
                let trusted = verifier.map(|v| branch.verify(head, &v)).transpose();
                Ok::<_, crate::git::FetchError>((head, applied.is_some_and(|a| !branch.descends(head, a)), trusted))
            })
            .await;
        self.metrics.fetch_seconds.observe(clock.elapsed().as_secs_f64());
        let now = Instant::now();
        match fetched {
            Ok(Ok((head, _, Err(why)))) => {
                // Not trusted: as a source that cannot be read, the last good revision
                // stays applied and is resynced, and the reason is on display.
                self.board.update(|s| s.head = Some(head.to_string()));
                self.metrics.error("-", ErrorReason::Unverified);
                Event::FetchFailed { reason: format!("head {head} is not applied: {why}"), now }
            }
            Ok(Ok((head, rewritten, Ok(signer)))) => {
                if let Some(signer) = signer {
                    tracing::debug!(%head, signer, "head verified");
                }
                self.board.update(|s| s.head = Some(head.to_string()));
                Event::Fetched { head, rewritten, now }
            }
            Ok(Err(e)) => {
                self.metrics.error("-", ErrorReason::Fetch);
                Event::FetchFailed { reason: format!("{:#}", anyhow::Error::new(e)), now }
            }
            Err(e) => Event::FetchFailed { reason: e.to_string(), now },
        }
    }

    /// Carries out actions, and those that their outcomes lead to.
    async fn act(&self, state: &mut State, actions: Vec<Action>, placements: &mut ClusterState, inputs: &mut Inputs) {
        let mut queue = std::collections::VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Reconcile { revision, why } => {
                    log_why(revision, why);
                    let outcome = tokio::select! {
                        outcome = self.cycle(revision, placements) => outcome,
                        _ = crate::leader::changed(&mut inputs.leading) => {
                            warn!("lost the lease during a reconcile; stopping it");
                            Outcome::Cancelled
                        }
                        // Stopping mid-reconcile is safe for the same reason.
                        _ = inputs.stop.changed() => Outcome::Cancelled,
                    };
                    crate::memory::hand_back(&self.metrics).await;
                    queue.extend(state.step(Event::Cycled { revision, outcome, now: Instant::now() }));
                }
                Action::SourceLost(reason) => {
                    error!(error = %reason, "cannot fetch the branch; the last good revision stays applied and is resynced")
                }
                Action::SourceBack => info!("the branch can be fetched again"),
                Action::ForgetCluster(cluster) => self.forget(&cluster),
            }
        }
    }

    /// A cluster the repository dropped leaves `/status` and the metrics.
    fn forget(&self, cluster: &str) {
        let (revision, member) = self.board.update(|s| {
            s.clusters.remove(cluster);
            s.failed.remove(cluster);
            for applied in &mut s.history {
                applied.members.remove(cluster);
            }
            (s.revisions.remove(cluster), s.members.remove(cluster))
        });
        self.metrics.forget_cluster(cluster, revision.as_deref());
        let revisions = member.map(|m| [("target", m.target), ("applied", m.applied)]).into_iter().flatten();
        for (state, revision) in revisions.filter_map(|(state, r)| Some((state, r?))) {
            let labels =
                crate::metrics::MemberRevisionLabels { cluster: cluster.into(), revision, state: state.into() };
            self.metrics.member_revision.remove(&labels);
        }
    }

    /// Shows the loop's state in `/status` and the metrics.
    fn publish(&self, state: &State, leading: bool) {
        self.metrics.source_unavailable.set(i64::from(state.source_unavailable().is_some()));
        self.board.update(|s| {
            s.leading = leading;
            s.fleet_ready = leading && state.ready();
            s.source_unavailable = state.source_unavailable().map(str::to_owned);
            s.settle();
        });
    }
}

fn log_why(revision: Revision, why: Why) {
    match why {
        Why::Rewritten { previous } => {
            warn!(%previous, head = %revision, "the branch was rewritten (force-push or reset); applying the new head")
        }
        Why::SourceUnavailable => warn!(%revision, "resync while the branch cannot be fetched: the last good revision"),
        Why::New | Why::Retry | Why::Resync | Why::Forced => info!(%revision, ?why, "reconciling"),
    }
}

/// The next trigger; once every sender is gone, the channel is dropped and this never
/// resolves (a closed channel would otherwise answer at once, forever).
async fn next_trigger(triggers: &mut Option<mpsc::UnboundedReceiver<Trigger>>) -> Option<Trigger> {
    let Some(open) = triggers else { return std::future::pending().await };
    let next = open.recv().await;
    if next.is_none() {
        *triggers = None;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_trigger_channel_is_dropped_and_never_answers_again() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut triggers = Some(rx);
        tx.send(Trigger::Fetch).unwrap();
        drop(tx);
        assert!(matches!(next_trigger(&mut triggers).await, Some(Trigger::Fetch)));
        assert!(next_trigger(&mut triggers).await.is_none());
        assert!(triggers.is_none());
        let never = tokio::time::timeout(Duration::from_millis(20), next_trigger(&mut triggers)).await;
        assert!(never.is_err(), "a closed channel no longer wakes the loop (nor hangs it)");
    }
}
