//! The failover loop: member health, the taints it brings, and the evictions that
//! move opted-in workloads off failing members. It probes every Push member, reads the
//! Pull members' heartbeat Leases, watches the health of the workloads whose moves
//! depend on it, and publishes what renders must heed (live taints, evictions) as a
//! [`ClusterState`] overlay, waking the reconcile loop when it changes. Its memory lives
//! in the host cluster ([`store`]), so a restarted or new leader continues. The
//! decisions are [`step`]'s; this module only observes and carries them out.

pub mod step;
mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flotilla_core::failover::Readiness;
use flotilla_core::model::{ClusterState, ObjectKey, Plan};
use k8s_openapi::jiff::Timestamp;
use kube::config::Kubeconfig;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::clusters::connect::Access;
use crate::clusters::probe;
use crate::leader::Fence;
use crate::metrics::Metrics;
use crate::status::{Board, ClusterHealthStatus, FailoverStatus, MoveStatus};
use step::{Action, Event, Millis, State};

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the decision needs.
    pub decide: step::Settings,
    /// Time between probes of a Push member (`--cluster-status-update-frequency`).
    pub probe_interval: Duration,
    /// Time between reads of the heartbeat Leases and of the watched workloads'
    /// health (`--cluster-monitor-period`).
    pub monitor_period: Duration,
    /// Instance name (the stored memory's name).
    pub instance: String,
    /// The controller's namespace in the host cluster.
    pub namespace: String,
    /// A sharded replica (`--sharding`): while another replica leads, it renders with the
    /// leader's taints and evictions, read from the leader's stored memory every
    /// monitor period, so that every replica renders the same placements.
    pub sharded: bool,
}

/// What the loop works with.
pub struct Failover {
    /// Settings.
    pub settings: Settings,
    /// How members (and the host cluster) are reached.
    pub access: Access,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Checked right before the memory is stored.
    pub fence: Fence,
    /// Where the overlay goes.
    pub overlay: watch::Sender<ClusterState>,
    /// Wakes the reconcile loop to render with a new overlay.
    pub wake: Box<dyn Fn() + Send + Sync>,
}

/// What the loop listens to.
pub struct Inputs {
    /// Each render of the reconcile loop.
    pub rendered: watch::Receiver<Option<Arc<Plan>>>,
    /// Whether this instance leads.
    pub leading: watch::Receiver<bool>,
    /// Becomes true when the controller stops.
    pub stop: watch::Receiver<bool>,
}

/// The tasks the loop runs beside itself.
struct Tasks {
    probes: BTreeMap<String, JoinHandle<()>>,
    observed: BTreeSet<(ObjectKey, String)>,
    observer: Option<JoinHandle<()>>,
    saving: watch::Sender<Option<step::Memory>>,
    saver: JoinHandle<()>,
    /// The newest revision's interpreter, for the health of customized kinds.
    interpreter: Arc<flotilla_core::interpret::Interpreter>,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.probes.values().for_each(JoinHandle::abort);
        self.observer.iter().for_each(JoinHandle::abort);
        self.saver.abort();
    }
}

/// Wall-clock milliseconds since the epoch.
fn now() -> Millis {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as Millis)
}

impl Failover {
    /// Runs until `stop`.
    pub async fn run(self, mut inputs: Inputs) {
        let (events, mut received) = mpsc::unbounded_channel();
        let mut state = State::new(self.settings.decide.clone());
        let (saving, latest) = watch::channel(None);
        let saver = tokio::spawn(self.store().saver(self.fence.clone(), latest));
        let mut tasks = Tasks {
            probes: BTreeMap::new(),
            observed: BTreeSet::new(),
            observer: None,
            saving,
            saver,
            interpreter: Arc::default(),
        };
        let mut kubeconfig = Arc::new(Kubeconfig::default());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut monitor = tokio::time::interval(self.settings.monitor_period);
        monitor.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = Some(Event::Leading(*inputs.leading.borrow_and_update(), now()));
        loop {
            let event = match first.take() {
                Some(event) => event,
                None => tokio::select! {
                    _ = inputs.stop.changed() => break,
                    Ok(()) = inputs.leading.changed() => Event::Leading(*inputs.leading.borrow_and_update(), now()),
                    Ok(()) = inputs.rendered.changed() => {
                        let plan = inputs.rendered.borrow_and_update().clone();
                        let Some(plan) = plan else { continue };
                        match self.access.kubeconfig().await {
                            Ok(read) => kubeconfig = Arc::new(read),
                            Err(e) => warn!(error = %format!("{e:#}"), "failover: cannot read member credentials"),
                        }
                        tasks.interpreter = plan.loaded.interpreter.clone();
                        Event::Rendered(plan)
                    }
                    Some(event) = received.recv() => event,
                    _ = monitor.tick(), if self.settings.sharded || *inputs.leading.borrow() => {
                        if !*inputs.leading.borrow() {
                            self.follow().await;
                            continue;
                        }
                        match crate::heartbeat::read(&self.access.host, &self.settings.namespace).await {
                            Ok(leases) => Event::Leases(leases),
                            Err(e) => {
                                tracing::debug!(error = %format!("{e:#}"), "failover: cannot read heartbeat Leases");
                                continue;
                            }
                        }
                    }
                    _ = tick.tick() => Event::Tick(now()),
                },
            };
            let actions = state.step(event);
            let changed = !actions.is_empty();
            for action in actions {
                self.act(action, &kubeconfig, &mut tasks, &events);
            }
            if changed {
                self.report(&state);
            }
        }
        drop(tasks);
        info!("failover loop stopped");
    }

    /// Takes the leader's taints and evictions from its stored memory (a sharded replica
    /// that does not lead); a memory that cannot be read leaves the last one in force.
    async fn follow(&self) {
        match self.store().load().await {
            Ok(memory) => {
                let overlay = step::overlay(&memory.unwrap_or_default());
                if *self.overlay.borrow() != overlay {
                    info!("failover: following the leader's taints and evictions");
                    self.overlay.send_replace(overlay);
                    (self.wake)();
                }
            }
            Err(e) => warn!(error = %format!("{e:#}"), "failover: cannot read the leader's memory"),
        }
    }

    fn act(
        &self,
        action: Action,
        kubeconfig: &Arc<Kubeconfig>,
        tasks: &mut Tasks,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        match action {
            Action::Load => {
                let store = self.store();
                let events = events.clone();
                tokio::spawn(async move {
                    // A memory that cannot be read is never taken for an empty one:
                    // nothing is decided until it is read.
                    let memory = store.load_patiently().await;
                    let _ = events.send(Event::Loaded(memory));
                });
            }
            Action::Probe(members) => self.probe(members, kubeconfig, tasks, events),
            Action::Observe(workloads) => {
                if workloads != tasks.observed {
                    tasks.observer.take().iter().for_each(JoinHandle::abort);
                    tasks.observed = workloads.clone();
                    if !workloads.is_empty() {
                        let observer =
                            self.observer(workloads, kubeconfig.clone(), events.clone(), tasks.interpreter.clone());
                        tasks.observer = Some(tokio::spawn(observer));
                    }
                }
            }
            Action::Publish(overlay) => {
                self.overlay.send_replace(overlay);
                (self.wake)();
            }
            Action::Save(memory) => {
                tasks.saving.send_replace(Some(memory));
            }
            Action::Changed { cluster, ready, reason } => {
                let value = match ready {
                    Readiness::True => 1,
                    Readiness::False => 0,
                    Readiness::Unknown => -1,
                };
                self.metrics
                    .cluster_ready
                    .get_or_create(&crate::metrics::ClusterLabel { cluster: cluster.clone() })
                    .set(value);
                match ready {
                    Readiness::True => info!(cluster, %reason, "member is Ready"),
                    _ => warn!(cluster, ready = ready.as_str(), %reason, "member is not Ready"),
                }
            }
            Action::Moved(moved) => {
                let label = crate::metrics::ClusterLabel { cluster: moved.from.clone() };
                self.metrics.evictions.get_or_create(&label).inc();
                warn!(object = %moved.object, from = %moved.from, reason = %moved.reason, purge = ?moved.purge, "failover: evicted");
            }
        }
    }

    fn store(&self) -> store::Store {
        store::Store {
            host: self.access.host.clone(),
            namespace: self.settings.namespace.clone(),
            instance: self.settings.instance.clone(),
        }
    }

    /// Probes exactly `members`.
    fn probe(
        &self,
        members: BTreeSet<String>,
        kubeconfig: &Arc<Kubeconfig>,
        tasks: &mut Tasks,
        events: &mpsc::UnboundedSender<Event>,
    ) {
        tasks.probes.retain(|cluster, task| {
            let keep = members.contains(cluster);
            if !keep {
                task.abort();
            }
            keep
        });
        let probe = self.access.probe(self.settings.probe_interval);
        for cluster in members {
            if tasks.probes.contains_key(&cluster) {
                continue;
            }
            let (name, events) = (cluster.clone(), events.clone());
            let report = move |ok| events.send(Event::Probed { cluster: name.clone(), ok, now: now() }).is_ok();
            let task = tokio::spawn(probe::every(
                self.access.pool.clone(),
                kubeconfig.clone(),
                cluster.clone(),
                probe,
                report,
            ));
            tasks.probes.insert(cluster, task);
        }
    }

    /// Reads the watched workloads' health in their members every monitor period.
    fn observer(
        &self,
        workloads: BTreeSet<(ObjectKey, String)>,
        kubeconfig: Arc<Kubeconfig>,
        events: mpsc::UnboundedSender<Event>,
        interpreter: Arc<flotilla_core::interpret::Interpreter>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (pool, trust, timeout, period) =
            (self.access.pool.clone(), self.access.trust, self.access.request_timeout, self.settings.monitor_period);
        let mut by_cluster: BTreeMap<String, Vec<ObjectKey>> = BTreeMap::new();
        for (key, cluster) in workloads {
            by_cluster.entry(cluster).or_default().push(key);
        }
        async move {
            let mut every = tokio::time::interval(period);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                for (cluster, keys) in &by_cluster {
                    let Ok(client) = pool.client(&kubeconfig, cluster, trust, timeout, None).await else { continue };
                    let mut kinds = crate::clusters::apply::Kinds::new(&client, &client);
                    let Ok((live, _)) = crate::clusters::apply::observe(&client, &mut kinds, keys).await else {
                        continue;
                    };
                    for key in keys {
                        let object = live.get(key);
                        let healthy = flotilla_core::status::interpreted(&interpreter, key, object)
                            == flotilla_core::status::Health::Healthy;
                        let generation = object.and_then(|o| o["metadata"]["generation"].as_i64()).unwrap_or(0);
                        let (key, cluster) = (key.spelled(), cluster.clone());
                        let event = Event::Workload { key, cluster, healthy, generation, now: now() };
                        if events.send(event).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Shows health, evictions and moves in `/status`.
    fn report(&self, state: &State) {
        let memory = state.memory();
        let at = |ms: Millis| Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
        let health = memory
            .clusters
            .iter()
            .map(|(name, h)| {
                let taints = h.taints.iter().map(|t| format!("{}:{}", t.taint.key, t.taint.effect)).collect();
                (
                    name.clone(),
                    ClusterHealthStatus {
                        ready: h.ready.as_str().to_owned(),
                        since: at(h.since),
                        reason: h.reason.clone(),
                        taints,
                    },
                )
            })
            .collect();
        let moves = memory
            .history
            .iter()
            .map(|m| MoveStatus {
                at: at(m.at),
                object: m.object.clone(),
                from: m.from.clone(),
                reason: m.reason.clone(),
                purge: format!("{:?}", m.purge),
                before: m.before.clone(),
                after: m.after.clone(),
            })
            .collect();
        let evictions = memory
            .evictions
            .iter()
            .flat_map(|(key, tasks)| {
                tasks.iter().map(move |(cluster, t)| {
                    let copy =
                        if t.kept { format!("old copy kept ({:?})", t.purge) } else { "old copy gone".to_owned() };
                    format!("{key} off {cluster} since {}: {}; {copy}", at(t.at), t.reason)
                })
            })
            .collect();
        self.board.update(|s| {
            s.health = health;
            s.failover = Some(FailoverStatus { evictions, moves });
        });
    }
}
