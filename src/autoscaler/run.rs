//! The autoscaler's loop: every sync period, while leading, evaluate the autoscalers of
//! the last rendered revision and write their decisions through a [`Writer`]. After a
//! write it waits for a render of the written state before deciding again, so it never
//! decides from the replica counts it has just replaced.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_core::model::Plan;
use tokio::sync::watch;
use tracing::{error, info};

use super::writeback::{Committer, Edit, Target};
use super::{Round, Settings, State, observe};
use crate::clusters::connect::{Pool, Trust};
use crate::clusters::credentials::Credentials;
use crate::host::{Host, ReplicaState};
use crate::leader::Fence;
use crate::metrics::{AutoscalerLabels, Metrics, OutcomeLabel};
use crate::status::Board;

/// Where decisions are written.
pub enum Writer {
    /// A commit to the followed branch.
    Git(Committer),
    /// The replica-state ConfigMap in the host cluster (namespace, instance).
    State {
        /// The controller's namespace.
        namespace: String,
        /// The instance name.
        instance: String,
    },
    /// Nowhere: decide and report only.
    Off,
}

/// What the loop works with.
pub struct Autoscaler {
    /// Settings.
    pub settings: Settings,
    /// Where decisions go.
    pub writer: Writer,
    /// The host cluster.
    pub host: Arc<Host>,
    /// Member credentials.
    pub credentials: Credentials,
    /// Member clients, shared with the reconcile loop.
    pub pool: Arc<Pool>,
    /// Which kubeconfig credentials to trust.
    pub trust: Trust,
    /// Per-request timeout.
    pub request_timeout: std::time::Duration,
    /// Where status goes.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Checked right before a write of replica counts.
    pub fence: Fence,
    /// Called after a write: the branch moved, or (for the state ConfigMap) a render
    /// must run although it did not.
    pub written: Box<dyn Fn() + Send + Sync>,
}

impl Autoscaler {
    /// Runs until `stop`, deciding from each plan `rendered` publishes, writing only
    /// while `leading`.
    pub async fn run(
        self,
        rendered: watch::Receiver<Option<Arc<Plan>>>,
        leading: watch::Receiver<bool>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut state = State::default();
        // The plan decided from before the last write: wait for a newer one.
        let mut written_from: Option<Arc<Plan>> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.settings.interval) => {}
                _ = stop.changed() => return,
            }
            let plan = rendered.borrow().clone();
            let Some(plan) = plan.filter(|_| *leading.borrow()) else { continue };
            if written_from.as_ref().is_some_and(|w| Arc::ptr_eq(w, &plan)) {
                continue;
            }
            written_from = None;
            if plan.loaded.federated_hpas.is_empty() && plan.loaded.cron_federated_hpas.is_empty() {
                continue;
            }
            if self.sync(&plan, &mut state).await == Ok(true) {
                written_from = Some(plan);
                (self.written)();
            }
        }
    }

    /// One sync; whether it wrote.
    async fn sync(&self, plan: &Plan, state: &mut State) -> Result<bool, String> {
        let kubeconfig = self.credentials.read(&self.host).await.map_err(|e| {
            error!(error = format!("{e:#}"), "autoscaler: cannot read the member credentials");
            e.to_string()
        })?;
        let overrides = match &self.writer {
            Writer::State { namespace, instance } => self.replicas(namespace, instance).read().await.map_err(|e| {
                error!(error = format!("{e:#}"), "autoscaler: cannot read its state ConfigMap");
                e.to_string()
            })?,
            _ => BTreeMap::new(),
        };
        let round = Round {
            settings: &self.settings,
            plan,
            members: observe::Clients {
                pool: &self.pool,
                kubeconfig: &kubeconfig,
                trust: self.trust,
                timeout: self.request_timeout,
            },
            overrides: &overrides,
            now: k8s_openapi::jiff::Timestamp::now().as_second(),
        };
        let outcome = super::sync(round, state, async |edits, message| self.write(edits, message).await).await;
        self.report(&outcome, state);
        outcome
    }

    fn replicas<'a>(&'a self, namespace: &'a str, instance: &'a str) -> ReplicaState<'a> {
        ReplicaState { host: &self.host, namespace, instance }
    }

    async fn write(&self, edits: Vec<Edit>, message: String) -> Result<bool, String> {
        if !self.fence.holds() {
            return Err("this instance no longer holds the lease; not writing".into());
        }
        match &self.writer {
            Writer::Git(committer) => {
                let commit = committer.commit(edits, message, 6).await?;
                if let Some(commit) = commit {
                    info!(%commit, "autoscaler: pushed");
                }
                Ok(commit.is_some())
            }
            Writer::State { namespace, instance } => {
                let mut replicas = Vec::new();
                for edit in edits {
                    match edit.target {
                        Target::Template(key) => replicas.push((key, edit.value)),
                        Target::FederatedHpa { .. } => {
                            return Err("--writeback=state keeps replica counts only; CronFederatedHPA bounds \
                                        need --writeback=git"
                                .into());
                        }
                    }
                }
                self.replicas(namespace, instance).write(&replicas).await.map_err(|e| format!("{e:#}"))?;
                Ok(true)
            }
            Writer::Off => Ok(false),
        }
    }

    /// Logs the outcome and shows the autoscalers in `/status` and the metrics; series of
    /// autoscalers the repository dropped go.
    fn report(&self, outcome: &Result<bool, String>, state: &State) {
        let label = match outcome {
            Ok(true) => "written",
            Ok(false) => "unchanged",
            Err(_) => "failed",
        };
        match outcome {
            Ok(true) => info!("autoscaler wrote new replica counts"),
            Ok(false) => {}
            Err(e) => error!(error = %e, "autoscaler could not write its decisions"),
        }
        self.metrics.autoscaler_syncs.get_or_create(&OutcomeLabel { outcome: label.into() }).inc();
        let gauge = |id: &str, kind: &str| AutoscalerLabels { autoscaler: id.to_owned(), replicas: kind.into() };
        for (id, status) in &state.status {
            for (kind, value) in [("current", status.current_replicas), ("desired", status.desired_replicas)] {
                if let Some(value) = value {
                    self.metrics.autoscaler_replicas.get_or_create(&gauge(id, kind)).set(value);
                }
            }
        }
        let previous = self.board.update(|s| std::mem::replace(&mut s.autoscalers, state.status.clone()));
        for id in previous.keys().filter(|id| !state.status.contains_key(*id)) {
            for kind in ["current", "desired"] {
                self.metrics.autoscaler_replicas.remove(&gauge(id, kind));
            }
        }
    }
}
