//! The controller's Prometheus metrics (OpenMetrics text at `/metrics`). Every loop
//! records into the one [`Metrics`]; a cluster that leaves the repository takes all of
//! its series with it ([`Metrics::forget_cluster`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels naming a cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabel {
    /// Cluster name.
    pub cluster: String,
}

/// Labels of an error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Cluster name, or `-` for errors before any cluster (fetch, render).
    pub cluster: String,
    /// One of [`ErrorReason`]'s labels.
    pub reason: String,
}

/// Why an error was counted: the fixed set of `reason` labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorReason {
    /// The branch could not be fetched.
    Fetch,
    /// A revision did not render.
    Render,
    /// The autoscaler's state ConfigMap could not be read.
    AutoscalerState,
    /// Member credentials could not be read.
    Credentials,
    /// An agent's member is undeclared or not `syncMode: Pull`.
    SyncMode,
    /// A cluster could not be reconciled.
    Reconcile,
    /// One object could not be applied.
    Object,
    /// The branch's head is not signed by an allowed signer (`--verify-commits`).
    Unverified,
}

impl ErrorReason {
    /// Every reason, for removing a cluster's series.
    const ALL: [ErrorReason; 8] = [
        Self::Fetch,
        Self::Render,
        Self::AutoscalerState,
        Self::Credentials,
        Self::SyncMode,
        Self::Reconcile,
        Self::Object,
        Self::Unverified,
    ];

    /// The label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Fetch => "fetch",
            Self::Render => "render",
            Self::AutoscalerState => "autoscaler-state",
            Self::Credentials => "credentials",
            Self::SyncMode => "sync-mode",
            Self::Reconcile => "reconcile",
            Self::Object => "object",
            Self::Unverified => "unverified",
        }
    }
}

/// Labels of a webhook delivery.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// github, gitlab or generic.
    pub source: String,
    /// accepted, bad_signature, too_large, malformed.
    pub outcome: String,
}

/// Labels of the last applied revision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RevisionLabels {
    /// Cluster name.
    pub cluster: String,
    /// Commit id.
    pub revision: String,
}

/// Labels of a member's target or applied revision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberRevisionLabels {
    /// Cluster name.
    pub cluster: String,
    /// Commit id.
    pub revision: String,
    /// `target` or `applied`.
    pub state: String,
}

/// Labels of an autoscaler gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AutoscalerLabels {
    /// `FederatedHPA <namespace>/<name>`.
    pub autoscaler: String,
    /// `current` or `desired`.
    pub replicas: String,
}

/// Labels of a rollout.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabel {
    /// `RolloutPolicy <namespace>/<name>` or `ClusterRolloutPolicy <name>`.
    pub policy: String,
}

/// Labels of a rollout's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutStateLabels {
    /// As [`PolicyLabel`].
    pub policy: String,
    /// idle, waiting, progressing, soaking, halted.
    pub state: String,
}

/// An outcome label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// written, unchanged, failed.
    pub outcome: String,
}

/// Every metric the controller exports.
pub struct Metrics {
    /// Seconds per fetch.
    pub fetch_seconds: Histogram,
    /// Seconds per render (read from Git, load through the parse cache, plan).
    pub render_seconds: Histogram,
    /// Seconds per reconcile of one cluster.
    pub reconcile_seconds: Family<ClusterLabel, Histogram>,
    /// Objects applied.
    pub applied: Family<ClusterLabel, Counter>,
    /// Objects pruned.
    pub pruned: Family<ClusterLabel, Counter>,
    /// 1 while the last reconcile of a cluster refused to prune.
    pub prune_refused: Family<ClusterLabel, Gauge>,
    /// Objects that left Git but were left in place (opted out, another owner).
    pub kept: Family<ClusterLabel, Counter>,
    /// Errors by cluster and reason.
    pub errors: Family<ErrorLabels, Counter>,
    /// 1 for the revision last applied to each cluster.
    pub applied_revision: Family<RevisionLabels, Gauge>,
    /// 1 while the newest revision fails to render (the last good one stays applied).
    pub render_failing: Gauge,
    /// Webhook deliveries by outcome.
    pub webhooks: Family<WebhookLabels, Counter>,
    /// Autoscaler replica counts (current in Git, desired by the last sync).
    pub autoscaler_replicas: Family<AutoscalerLabels, Gauge>,
    /// Autoscaler syncs by outcome.
    pub autoscaler_syncs: Family<OutcomeLabel, Counter>,
    /// Member clients built: one per member, plus one whenever its credentials change.
    pub member_clients: Counter,
    /// Heap bytes in use after the last cycle (the allocator's count).
    pub heap_allocated: Gauge,
    /// Heap bytes free but held by the allocator after the last cycle.
    pub heap_free: Gauge,
    /// 1 while the last fetch of the branch failed (the last good revision is still
    /// reconciled on every resync).
    pub source_unavailable: Gauge,
    /// 1 while this instance leads (always 1 without leader election).
    pub leading: Gauge,
    /// With `--sharding`: the members this replica owns.
    pub shard_members: Gauge,
    /// With `--sharding`: the live replicas this one sees, itself included.
    pub shard_replicas: Gauge,
    /// Per member: 1 Ready, 0 NotReady, -1 Unknown (the failover loop's decision).
    pub cluster_ready: Family<ClusterLabel, Gauge>,
    /// Per member: workloads failover moved off it.
    pub evictions: Family<ClusterLabel, Counter>,
    /// Per member: 1 for its target revision and for its applied revision.
    pub member_revision: Family<MemberRevisionLabels, Gauge>,
    /// Per member: when an attempt last applied everything (Unix seconds).
    pub member_last_success: Family<ClusterLabel, Gauge>,
    /// Per rollout: the batch it stands at (from 1; 0 when idle).
    pub rollout_wave: Family<PolicyLabel, Gauge>,
    /// Per rollout: 1 for the state it is in, 0 for the others.
    pub rollout_state: Family<RolloutStateLabels, Gauge>,
}

impl Metrics {
    /// Creates and registers the metrics.
    pub fn new(registry: &mut Registry) -> Self {
        let seconds = || Histogram::new(exponential_buckets(0.005, 2.0, 14));
        let metrics = Self {
            fetch_seconds: seconds(),
            render_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            reconcile_seconds: Family::new_with_constructor(seconds),
            applied: Family::default(),
            pruned: Family::default(),
            prune_refused: Family::default(),
            kept: Family::default(),
            errors: Family::default(),
            applied_revision: Family::default(),
            render_failing: Gauge::default(),
            webhooks: Family::default(),
            autoscaler_replicas: Family::default(),
            autoscaler_syncs: Family::default(),
            member_clients: Counter::default(),
            heap_allocated: Gauge::default(),
            heap_free: Gauge::default(),
            source_unavailable: Gauge::default(),
            leading: Gauge::default(),
            shard_members: Gauge::default(),
            shard_replicas: Gauge::default(),
            cluster_ready: Family::default(),
            evictions: Family::default(),
            member_revision: Family::default(),
            member_last_success: Family::default(),
            rollout_wave: Family::default(),
            rollout_state: Family::default(),
        };
        metrics.register(registry);
        metrics
    }

    fn register(&self, registry: &mut Registry) {
        self.register_clusters(registry);
        self.register_controller(registry);
        self.register_rollouts(registry);
    }

    /// What each cluster's reconcile did.
    fn register_clusters(&self, registry: &mut Registry) {
        let metrics = self;
        registry.register(
            "flotilla_reconcile_seconds",
            "Reconcile duration per cluster",
            metrics.reconcile_seconds.clone(),
        );
        registry.register("flotilla_applied_objects", "Objects written by server-side apply", metrics.applied.clone());
        registry.register("flotilla_pruned_objects", "Objects deleted by prune", metrics.pruned.clone());
        registry.register(
            "flotilla_prune_refused",
            "1 while the last reconcile of a cluster refused to prune",
            metrics.prune_refused.clone(),
        );
        registry.register(
            "flotilla_kept_objects",
            "Objects that left Git but were left in place (prune opt-out, another owner)",
            metrics.kept.clone(),
        );
        registry.register("flotilla_errors", "Errors by cluster and reason", metrics.errors.clone());
        registry.register(
            "flotilla_applied_revision",
            "Revision last applied per cluster",
            metrics.applied_revision.clone(),
        );
        registry.register(
            "flotilla_member_revision",
            "Per member: 1 for its target and its applied revision (state target or applied)",
            metrics.member_revision.clone(),
        );
        registry.register(
            "flotilla_member_last_success_timestamp_seconds",
            "Per member: when an attempt last applied everything",
            metrics.member_last_success.clone(),
        );
    }

    /// The controller's own state: fetch and render, webhooks, autoscaler, memory, lease.
    fn register_controller(&self, registry: &mut Registry) {
        let metrics = self;
        registry.register("flotilla_fetch_seconds", "Git fetch duration", metrics.fetch_seconds.clone());
        registry.register(
            "flotilla_render_seconds",
            "Render duration (Git read, cached parse, plan)",
            metrics.render_seconds.clone(),
        );
        registry.register(
            "flotilla_render_failing",
            "1 while the newest revision does not render",
            metrics.render_failing.clone(),
        );
        registry.register("flotilla_webhooks", "Webhook deliveries by outcome", metrics.webhooks.clone());
        registry.register(
            "flotilla_autoscaler_replicas",
            "FederatedHPA replicas: current in Git and desired by the last sync",
            metrics.autoscaler_replicas.clone(),
        );
        registry.register("flotilla_autoscaler_syncs", "Autoscaler syncs by outcome", metrics.autoscaler_syncs.clone());
        registry.register(
            "flotilla_member_clients_built",
            "Member cluster clients built (kept across cycles; rebuilt when credentials change)",
            metrics.member_clients.clone(),
        );
        registry.register(
            "flotilla_heap_allocated_bytes",
            "Heap bytes in use after the last cycle, as the allocator counts them",
            metrics.heap_allocated.clone(),
        );
        registry.register(
            "flotilla_heap_free_bytes",
            "Heap bytes free but kept by the allocator after the last cycle",
            metrics.heap_free.clone(),
        );
        registry.register(
            "flotilla_source_unavailable",
            "1 while the last fetch of the branch failed",
            metrics.source_unavailable.clone(),
        );
        registry.register("flotilla_leading", "1 while this instance leads", metrics.leading.clone());
        registry.register(
            "flotilla_shard_members",
            "Members this replica owns (--sharding)",
            metrics.shard_members.clone(),
        );
        registry.register(
            "flotilla_shard_replicas",
            "Live replicas this one sees, itself included (--sharding)",
            metrics.shard_replicas.clone(),
        );
        registry.register(
            "flotilla_cluster_ready",
            "Per member: 1 Ready, 0 NotReady, -1 Unknown",
            metrics.cluster_ready.clone(),
        );
        registry.register(
            "flotilla_failover_evictions",
            "Workloads failover moved off each member",
            metrics.evictions.clone(),
        );
    }

    /// Where each rollout stands.
    fn register_rollouts(&self, registry: &mut Registry) {
        let metrics = self;
        registry.register(
            "flotilla_rollout_wave",
            "Per rollout: the batch it stands at (from 1; 0 when idle)",
            metrics.rollout_wave.clone(),
        );
        registry.register(
            "flotilla_rollout_state",
            "Per rollout: 1 for its state (idle, waiting, progressing, soaking, halted)",
            metrics.rollout_state.clone(),
        );
    }

    /// Counts an error.
    pub fn error(&self, cluster: &str, reason: ErrorReason) {
        self.errors.get_or_create(&ErrorLabels { cluster: cluster.into(), reason: reason.label().into() }).inc();
    }

    /// Removes every series of a cluster the repository no longer declares; `revision`
    /// is the one its applied-revision gauge names, if any.
    pub fn forget_cluster(&self, cluster: &str, revision: Option<&str>) {
        let label = ClusterLabel { cluster: cluster.into() };
        self.reconcile_seconds.remove(&label);
        self.applied.remove(&label);
        self.pruned.remove(&label);
        self.cluster_ready.remove(&label);
        self.evictions.remove(&label);
        self.member_last_success.remove(&label);
        for reason in ErrorReason::ALL {
            self.errors.remove(&ErrorLabels { cluster: cluster.into(), reason: reason.label().into() });
        }
        if let Some(revision) = revision {
            self.applied_revision.remove(&RevisionLabels { cluster: cluster.into(), revision: revision.into() });
        }
    }
}
