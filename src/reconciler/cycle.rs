//! One cycle: render a revision completely (through the parse cache), then publish it
//! to the members this instance applies; each member's worker converges on it on its
//! own (`crate::members`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use flotilla_core::model::{ClusterState, Plan};
use tracing::{error, warn};

use super::Reconciler;
use super::step::Outcome;
use crate::clusters;
use crate::git::Revision;
use crate::host::ReplicaState;
use crate::metrics::ErrorReason;

impl Reconciler {
    /// Renders `revision` and publishes it to the members.
    pub(super) async fn cycle(&self, revision: Revision, placements: &mut ClusterState) -> Outcome {
        let Some((plan, state)) = self.render(revision, placements).await else { return Outcome::RenderFailed };
        let plan = Arc::new(plan);
        self.rendered.send_replace(Some(plan.clone()));
        let declared: BTreeSet<String> = plan.clusters.keys().cloned().collect();
        let (members, pulled) = match &self.settings.agent {
            Some(agent) => match clusters::agent_cluster(&plan, agent) {
                Ok(()) => (vec![agent.clone()], Vec::new()),
                Err(e) => {
                    self.metrics.error(agent, ErrorReason::SyncMode);
                    error!(error = %e, "not applying");
                    self.board.update(|s| s.error = Some(format!("{revision}: {e}")));
                    return Outcome::NotPublished { clusters: declared };
                }
            },
            None => clusters::by_sync_mode(&plan),
        };
        let kubeconfig = match self.credentials.read(&self.host).await {
            Ok(k) => k,
            Err(e) => {
                self.metrics.error("-", ErrorReason::Credentials);
                error!(error = format!("{e:#}"), "cannot read the member credentials");
                return Outcome::NotPublished { clusters: declared };
            }
        };
        self.pool.retain(&kubeconfig);
        let head = revision.to_string();
        self.board.update(|s| {
            // Pull members are listed, never contacted.
            for name in &pulled {
                s.clusters.insert(name.clone(), format!("{head}: syncMode Pull: applied by its agent"));
            }
        });
        let kubeconfig = Arc::new(kubeconfig);
        let (state, holds) = (Arc::new(state), Default::default());
        let publication = crate::members::Publication { revision, plan, state, kubeconfig, members, holds };
        // The fleet ends only when the controller stops.
        let _ = self.publish.send(publication);
        Outcome::Published { clusters: declared }
    }

    /// Renders `revision` completely, returning the plan and the cluster state it was
    /// rendered with; a failure is reported and leaves what is applied alone.
    async fn render(&self, revision: Revision, placements: &mut ClusterState) -> Option<(Plan, ClusterState)> {
        let mut state = placements.clone();
        if let Some(overlay) = &self.overlay {
            let overlay = overlay.borrow();
            (state.taints, state.evictions) = (overlay.taints.clone(), overlay.evictions.clone());
        }
        if self.settings.replica_state {
            let replicas = ReplicaState {
                host: &self.host,
                namespace: &self.settings.namespace,
                instance: &self.settings.instance,
            };
            match replicas.read().await {
                Ok(replicas) => state.replicas = replicas,
                Err(e) => {
                    // Rendering without them would undo the autoscaler's decisions.
                    self.metrics.error("-", ErrorReason::AutoscalerState);
                    error!(error = format!("{e:#}"), "cannot read the autoscaler's state ConfigMap; not rendering");
                    return None;
                }
            }
        }
        let clock = Instant::now();
        let renderer = crate::rendering::Renderer {
            git: self.git.clone(),
            path: self.settings.path.clone(),
            cache: self.parse_cache.clone(),
            scope: self.settings.scope.clone(),
            admission: self.settings.admission,
        };
        let rendered = renderer.render(revision, state.clone()).await;
        self.metrics.render_seconds.observe(clock.elapsed().as_secs_f64());
        match rendered {
            Ok(plan) => {
                self.metrics.render_failing.set(0);
                placements.previous = plan.placements.clone();
                for p in &plan.problems {
                    warn!(object = %p.object, reason = ?p.reason, message = %p.message, "render problem");
                }
                for n in &plan.loaded.not_acted_on {
                    warn!(object = %n.object, file = %n.origin.file, why = n.why, "object accepted, not acted on");
                }
                Some((plan, state))
            }
            Err(e) => {
                let message = format!("{e:#}");
                error!(%revision, error = %message, "revision does not render; the last good revision stays applied");
                self.metrics.error("-", ErrorReason::Render);
                self.metrics.render_failing.set(1);
                self.board.update(|s| s.error = Some(format!("{revision}: {message}")));
                None
            }
        }
    }
}
