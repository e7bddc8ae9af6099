//! One cycle: render a revision completely (through the parse cache), then reconcile
//! every member cluster this instance applies, and record each outcome.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_core::model::{ClusterState, Plan};
use tracing::{error, info, warn};

use super::Reconciler;
use super::step::Outcome;
use crate::clusters;
use crate::git::Revision;
use crate::host::ReplicaState;
use crate::metrics::{ClusterLabel, ErrorReason, RevisionLabels};

impl Reconciler {
    /// Renders and reconciles `revision`.
    pub(super) async fn cycle(&self, revision: Revision, placements: &mut ClusterState) -> Outcome {
        let Some(plan) = self.render(revision, placements).await else { return Outcome::RenderFailed };
        let plan = Arc::new(plan);
        self.rendered.send_replace(Some(plan.clone()));
        let declared: BTreeSet<String> = plan.clusters.keys().cloned().collect();
        let (names, pulled) = match &self.settings.agent {
            Some(agent) => match clusters::agent_cluster(&plan, agent) {
                Ok(()) => (vec![agent.clone()], Vec::new()),
                Err(e) => {
                    self.metrics.error(agent, ErrorReason::SyncMode);
                    error!(error = %e, "not applying");
                    self.board.update(|s| s.error = Some(format!("{revision}: {e}")));
                    return Outcome::Ran { attempted: 1, failed: 1, incomplete: 0, clusters: declared };
                }
            },
            None => clusters::by_sync_mode(&plan),
        };
        let kubeconfig = match self.credentials.read(&self.host).await {
            Ok(k) => k,
            Err(e) => {
                self.metrics.error("-", ErrorReason::Credentials);
                error!(error = format!("{e:#}"), "cannot read the member credentials");
                return Outcome::Ran { attempted: names.len(), failed: names.len(), incomplete: 0, clusters: declared };
            }
        };
        self.pool.retain(&kubeconfig);
        let settings = &self.settings;
        let options = clusters::Options {
            progress: false,
            instance: &settings.instance,
            trust: settings.trust,
            pool: &self.pool,
            budget: Default::default(),
            concurrency: settings.concurrency,
            request_timeout: settings.request_timeout,
            cluster_timeout: settings.cluster_timeout,
            fence: &self.fence,
            source: &settings.source,
            adopt: settings.adopt,
            scope: settings.scope.as_deref(),
            acting_as: settings.acting_as.as_deref(),
        };
        let clock = Instant::now();
        // As Karmada's execution controller, nothing is sent to a member the failover
        // loop finds not Ready: the cycle would only wait for it to time out, and hold
        // back the next render (the one that moves its replicas elsewhere).
        let unready = self.unready();
        let (names, skipped): (Vec<String>, Vec<String>) = names.into_iter().partition(|n| !unready.contains(n));
        let mut outcomes = clusters::reconcile_all(&plan, &kubeconfig, &names, options).await;
        outcomes.extend(skipped.iter().map(|n| (n.clone(), Err("not contacted: the member is not Ready".to_owned()))));
        let names = [names, skipped].concat();
        let (failed, incomplete) = self.record(revision, outcomes, &pulled, clock.elapsed());
        Outcome::Ran { attempted: names.len(), failed, incomplete, clusters: declared }
    }

    /// Members the failover loop holds not Ready (they carry its health taint).
    fn unready(&self) -> BTreeSet<String> {
        let Some(overlay) = &self.overlay else { return BTreeSet::new() };
        let overlay = overlay.borrow();
        overlay
            .taints
            .iter()
            .filter(|(_, taints)| taints.iter().any(flotilla_core::failover::is_health_taint))
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Renders `revision` completely; a failure is reported and leaves what is applied
    /// alone.
    async fn render(&self, revision: Revision, placements: &mut ClusterState) -> Option<Plan> {
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
        };
        let rendered = renderer.render(revision, state).await;
        self.metrics.render_seconds.observe(clock.elapsed().as_secs_f64());
        match rendered {
            Ok(plan) => {
                self.metrics.render_failing.set(0);
                placements.previous = plan.placements.clone();
                for p in &plan.problems {
                    warn!(object = %p.object, reason = ?p.reason, message = %p.message, "render problem");
                }
                Some(plan)
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

    /// Records each cluster's outcome in metrics and `/status`; returns how many failed,
    /// and how many were reconciled with objects that failed.
    fn record(
        &self,
        revision: Revision,
        outcomes: Vec<(String, clusters::Outcome)>,
        pulled: &[String],
        took: Duration,
    ) -> (usize, usize) {
        let (mut failed, mut incomplete) = (0, 0);
        let head = revision.to_string();
        for (cluster, outcome) in outcomes {
            let label = ClusterLabel { cluster: cluster.clone() };
            self.metrics.reconcile_seconds.get_or_create(&label).observe(took.as_secs_f64());
            let line = match outcome {
                Ok(report) => {
                    incomplete += usize::from(!report.failed.is_empty());
                    self.count_applied(&cluster, &head, &report);
                    format!("{head}: {}", report.summary())
                }
                Err(e) => {
                    failed += 1;
                    self.metrics.error(&cluster, ErrorReason::Reconcile);
                    error!(cluster, error = %e, "cluster not reconciled");
                    format!("{head}: failed: {e}")
                }
            };
            info!(cluster, "{line}");
            self.board.update(|s| s.clusters.insert(cluster, line));
        }
        self.board.update(|s| {
            // Pull members are listed, never contacted.
            for name in pulled {
                s.clusters.insert(name.clone(), format!("{head}: syncMode Pull: applied by its agent"));
            }
            if failed == 0 {
                s.applied = Some(head.clone());
                s.error = None;
            }
        });
        (failed, incomplete)
    }

    /// Counts what one cluster's reconcile wrote and moves its revision gauge.
    fn count_applied(&self, cluster: &str, head: &str, report: &clusters::apply::Report) {
        let metrics = &self.metrics;
        let label = ClusterLabel { cluster: cluster.to_owned() };
        metrics.applied.get_or_create(&label).inc_by(report.applied.len() as u64);
        metrics.pruned.get_or_create(&label).inc_by(report.pruned.len() as u64);
        metrics.kept.get_or_create(&label).inc_by(report.kept.len() as u64);
        metrics.prune_refused.get_or_create(&label).set(i64::from(report.prune_refused.is_some()));
        self.board.update(|s| {
            match &report.prune_refused {
                Some(why) => s.prune_refused.insert(cluster.to_owned(), why.clone()),
                None => s.prune_refused.remove(cluster),
            };
            let kept: Vec<String> = report.kept.iter().map(|(k, why)| format!("{}: {why}", k.spelled())).collect();
            match kept.is_empty() {
                true => s.kept.remove(cluster),
                false => s.kept.insert(cluster.to_owned(), kept),
            };
        });
        for _ in &report.failed {
            metrics.error(cluster, ErrorReason::Object);
        }
        let old = self.board.update(|s| s.revisions.insert(cluster.to_owned(), head.to_owned()));
        if let Some(old) = old.filter(|old| old != head) {
            metrics.applied_revision.remove(&RevisionLabels { cluster: cluster.to_owned(), revision: old });
        }
        let labels = RevisionLabels { cluster: cluster.to_owned(), revision: head.to_owned() };
        metrics.applied_revision.get_or_create(&labels).set(1);
    }
}
