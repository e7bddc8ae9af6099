//! The fleet's members, each its own unit of work. The reconcile loop renders a
//! revision once, fleet-wide, and publishes it here; each member has a worker with its
//! own target, attempt in flight, retries and state ([`step`]), so a slow or frozen
//! member is that member's problem and never holds another's deploys.
//!
//! What a member's target is (the newest good revision the reconcile loop publishes,
//! except what a rollout holds the member at: `crate::rollouts`) is decided outside; the
//! worker only converges on what it is given. Every worker reads the one published plan
//! (shared, read-only: no per-member copy), and the held revisions' plans alike.
//!
//! Workers run as futures on the task that runs this fleet: their member clients' futures
//! need not be `Send`, and every one of them waits on I/O, so none holds another up.

mod report;
pub mod step;
mod worker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flotilla_core::model::{ClusterState, Plan};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::config::Kubeconfig;
use tokio::sync::{mpsc, watch};

use crate::clusters::Held;
use crate::clusters::connect::{Pool, Trust};
use crate::git::Revision;
use crate::leader::Fence;
use crate::metrics::Metrics;
use crate::status::Board;

/// How members are reconciled.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Instance name (inventory, prune scope).
    pub instance: String,
    /// Which kubeconfig credentials to trust.
    pub trust: Trust,
    /// Requests in flight per member.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// One attempt at one member takes at most this long.
    pub cluster_timeout: Duration,
    /// The followed repository, recorded in each inventory.
    pub source: flotilla_core::inventory::Source,
    /// Take over inventories another source recorded.
    pub adopt: bool,
    /// What the repository may touch; `None`: everything.
    pub scope: Option<Arc<flotilla_core::project::Project>>,
    /// The user objects are written as in each member, if any.
    pub acting_as: Option<String>,
}

/// One rendered revision for the members named.
pub struct Publication {
    /// The revision.
    pub revision: Revision,
    /// Its plan, shared by every worker.
    pub plan: Arc<Plan>,
    /// The cluster state it was rendered with (a revision a rollout holds members at is
    /// rendered with it too).
    pub state: Arc<ClusterState>,
    /// The member credentials as they were read for it.
    pub kubeconfig: Arc<Kubeconfig>,
    /// The members this instance applies (Push members; an agent's own).
    pub members: Vec<String>,
    /// Per member, what rollouts hold it at: objects from older revisions' plans.
    pub holds: BTreeMap<String, Vec<Held>>,
}

/// A member's target: the publication's plan at its generation, with its holds.
pub struct Target {
    goal: step::Goal,
    plan: Arc<Plan>,
    holds: Vec<Held>,
    kubeconfig: Arc<Kubeconfig>,
}

impl Target {
    /// Whether `other` asks for what this asks for: the same plan (not one rendered
    /// anew, as a resync is) with the same holds.
    fn same(&self, plan: &Arc<Plan>, holds: &[Held]) -> bool {
        let held = |h: &Held| (h.policy.clone(), h.revision.clone(), Arc::as_ptr(&h.plan));
        Arc::ptr_eq(&self.plan, plan) && self.holds.iter().map(held).eq(holds.iter().map(held))
    }
}

/// What every worker shares.
pub struct Fleet {
    /// How members are reconciled.
    pub settings: Settings,
    /// Member clients, shared with the other loops.
    pub pool: Arc<Pool>,
    /// Checked right before each write.
    pub fence: Fence,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Member health from the failover loop (its health taints), if it runs.
    pub health: Option<watch::Receiver<ClusterState>>,
}

/// What the fleet listens to.
pub struct Inputs {
    /// Publications of the reconcile loop.
    pub publications: mpsc::UnboundedReceiver<Publication>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
    /// With `--sharding`: the members this replica owns (only theirs get workers), and
    /// where the members each publication names are told.
    pub shard: Option<(watch::Receiver<crate::shard::step::Shard>, watch::Sender<std::collections::BTreeSet<String>>)>,
}

impl Fleet {
    /// Runs until `stop` (or the reconcile loop is gone): starts a worker for each member
    /// a publication names, hands each its target, and stops the workers of members no
    /// longer named. Stopping drops every attempt in flight; the inventory makes that
    /// safe, as losing the lease mid-reconcile always was.
    pub async fn run(self, mut inputs: Inputs) {
        let fleet = Arc::new(self);
        // Attempts in flight across the fleet: when the last one ends, the allocator's
        // free pages go back to the system, as after a whole cycle before.
        let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut targets: BTreeMap<String, watch::Sender<Option<Arc<Target>>>> = BTreeMap::new();
        let mut workers = FuturesUnordered::new();
        let mut generation = 0;
        let mut last: Option<Publication> = None;
        let (mut shard, told) = match inputs.shard.take() {
            Some((shard, told)) => (Some(shard), Some(told)),
            None => (None, None),
        };
        // A sharded replica's workers do not wait for the fleet's lease: owning their
        // member is their right to write (fenced by the membership), and losing it
        // stops them.
        let (_always, always) = watch::channel(true);
        let leading = if shard.is_some() { always } else { inputs.leading.clone() };
        loop {
            tokio::select! {
                published = inputs.publications.recv() => {
                    let Some(published) = published else { break };
                    generation += 1;
                    if let Some(told) = &told {
                        told.send_replace(published.members.iter().cloned().collect());
                    }
                    last = Some(published);
                }
                Ok(()) = changed(&mut shard) => {}
                Some(()) = workers.next(), if !workers.is_empty() => continue,
                _ = inputs.stop.changed() => break,
            }
            let Some(published) = &last else { continue };
            let owned = shard.as_ref().map(|s| s.borrow().owned.clone());
            let mine: Vec<String> =
                published.members.iter().filter(|m| owned.as_ref().is_none_or(|o| o.contains(*m))).cloned().collect();
            // A member no longer named (or no longer this replica's): its sender
            // dropped, its worker ends.
            targets.retain(|name, _| mine.contains(name));
            for name in &mine {
                let sender = targets.entry(name.clone()).or_insert_with(|| {
                    let (sender, receiver) = watch::channel(None);
                    let run = worker::Worker::new(name.clone(), (fleet.clone(), busy.clone()), leading.clone());
                    workers.push(Box::pin(run.work(receiver)));
                    sender
                });
                let holds = published.holds.get(name).cloned().unwrap_or_default();
                // A rollout's new assignment leaves most members as they were.
                if sender.borrow().as_ref().is_some_and(|t| t.same(&published.plan, &holds)) {
                    continue;
                }
                let goal = step::Goal { generation, revision: published.revision };
                let (plan, kubeconfig) = (published.plan.clone(), published.kubeconfig.clone());
                sender.send_replace(Some(Arc::new(Target { goal, plan, holds, kubeconfig })));
            }
            expect(&fleet, shard.as_ref(), *inputs.leading.borrow(), published, &mine);
        }
    }
}

/// Shows what the fleet expects of its members now (those of this replica's share, with
/// `--sharding`), and the share itself.
fn expect(
    fleet: &Fleet,
    shard: Option<&watch::Receiver<crate::shard::step::Shard>>,
    leads_fleet: bool,
    published: &Publication,
    mine: &[String],
) {
    let shard_status = shard.map(|s| {
        let s = s.borrow();
        fleet.metrics.shard_members.set(mine.len() as i64);
        fleet.metrics.shard_replicas.set(s.replicas.len() as i64);
        let replica = crate::identity::identity().to_owned();
        let (replicas, clusters, joining) = (s.replicas.clone(), mine.to_vec(), s.joining);
        crate::status::ShardStatus { replica, replicas, clusters, joining, leads_fleet }
    });
    // A joining replica owns nothing yet: it is not ready for having nothing to do.
    let joining = shard_status.as_ref().is_some_and(|s| s.joining);
    fleet.board.update(|s| {
        s.shard = shard_status;
        if !joining {
            s.expect(published.revision.to_string(), mine)
        }
    });
}

/// A change of this replica's shard; never, without sharding.
async fn changed(shard: &mut Option<watch::Receiver<crate::shard::step::Shard>>) -> Result<(), ()> {
    match shard {
        Some(receiver) => receiver.changed().await.map_err(|_| ()),
        None => std::future::pending().await,
    }
}
