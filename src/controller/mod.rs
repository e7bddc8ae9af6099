//! `flotilla run`: the long-running controller. Each cycle fetches the watched branch,
//! renders a new revision completely, and reconciles every member cluster. A revision
//! that does not render is reported and the last good one stays applied (nothing is
//! pruned); a periodic resync corrects drift even when Git did not move; a webhook
//! push wakes the loop at once.

pub mod git;
pub mod metrics;
pub mod server;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use flotilla_core::load::ParseCache;
use flotilla_core::model::{ClusterState, Limits, Plan};
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::Notify;
use tracing::{error, info, warn};

use crate::clusters;
use metrics::{ClusterLabel, Metrics, RevisionLabels};

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct Config {
    /// URL (`file://`, `git://`) or local repository path.
    pub repo: String,
    /// Branch to follow.
    pub branch: String,
    /// Subdirectory of the repository that holds the fleet (empty: the root).
    pub path: String,
    /// Poll interval.
    pub interval: Duration,
    /// Reconcile at least this often even without a new revision.
    pub resync: Duration,
    /// Where member credentials come from (re-read every cycle).
    pub members: Members,
    /// Pull mode: the one member this instance is the agent of; `None` for the push
    /// controller, which applies the `syncMode: Push` members.
    pub agent: Option<String>,
    /// Host cluster (kubeconfig and context); `None` uses in-cluster configuration.
    pub host: Option<(PathBuf, Option<String>)>,
    /// The controller's namespace in the host cluster.
    pub namespace: String,
    /// Where to serve HTTP.
    pub listen: String,
    /// Bare caches of fetched remotes.
    pub cache_dir: PathBuf,
    /// Shared secret for webhooks; none disables them.
    pub webhook_secret: Option<Vec<u8>>,
    /// Instance name (inventory, prune scope).
    pub instance: String,
    /// Per-cluster apply settings.
    pub trust: clusters::connect::Trust,
    /// Requests in flight per cluster.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Per-cluster timeout.
    pub cluster_timeout: Duration,
    /// Leader election, when replicas share the work.
    pub election: Option<Election>,
    /// Credentials for the remote.
    pub git_auth: git::GitAuth,
    /// The autoscaler.
    pub autoscale: crate::autoscaler::Settings,
}

/// Where member credentials come from.
#[derive(Debug, Clone)]
pub enum Members {
    /// A kubeconfig file with one context per member.
    File(PathBuf),
    /// Labelled Secrets in the controller's namespace of the host cluster.
    Secrets,
    /// The cluster this process runs in (an agent inside its member).
    InCluster,
}

/// The Lease's name and how long it lasts (it lives in the controller's namespace).
#[derive(Debug, Clone)]
pub struct Election {
    /// Lease name.
    pub name: String,
    /// Seconds of validity without renewal.
    pub duration: u64,
}

/// For a local repository, wakes the loop when its Git directory changes (a commit, a
/// reset), debounced, so a development loop does not wait for the poll interval.
fn watch_local(
    repo: &str,
    shared: Arc<Shared>,
) -> anyhow::Result<Option<notify_debouncer_mini::Debouncer<notify_debouncer_mini::notify::RecommendedWatcher>>> {
    if repo.contains("://") {
        return Ok(None);
    }
    let git_dir = git2::Repository::open(repo).context("opening the repository")?.path().to_path_buf();
    let mut debouncer = notify_debouncer_mini::new_debouncer(Duration::from_millis(200), move |events| {
        if matches!(events, Ok(ref e) if !Vec::is_empty(e)) {
            shared.trigger.notify_one();
        }
    })
    .context("watching the repository")?;
    debouncer
        .watcher()
        .watch(&git_dir, notify_debouncer_mini::notify::RecursiveMode::Recursive)
        .with_context(|| format!("watching {}", git_dir.display()))?;
    info!(path = %git_dir.display(), "watching the local repository for commits");
    Ok(Some(debouncer))
}

/// `--writeback=state` decisions from the host cluster.
async fn state_overrides(config: &Config, shared: &Shared) -> anyhow::Result<std::collections::BTreeMap<String, i64>> {
    let host = host_client(config, shared).await?;
    crate::autoscaler::read_state(&host, &config.namespace, &config.instance).await.map_err(anyhow::Error::msg)
}

/// Every sync period, while leading: evaluate the autoscalers of the last rendered
/// revision and write their decisions; a write wakes the main loop to apply it.
async fn autoscale_loop(config: Arc<Config>, watched: Arc<Mutex<git::Watched>>, shared: Arc<Shared>) {
    let mut effective = config.autoscale.clone();
    if effective.writeback == crate::autoscaler::Writeback::Git && !git::is_url(&config.repo) {
        // Committing into a local repository's checked-out branch would leave its work
        // tree behind; decide and report only.
        warn!(
            "--repo is a local path: autoscaler decisions are reported, not written (use a remote URL or --writeback=state)"
        );
        effective.writeback = crate::autoscaler::Writeback::Off;
    }
    let settings = &effective;
    let mut state = crate::autoscaler::State::default();
    // After a write, the plan still shows the old counts until the next render: wait for
    // it rather than decide from stale replicas.
    let mut written_at: Option<u64> = None;
    loop {
        tokio::time::sleep(settings.interval).await;
        let renders = shared.renders.load(Ordering::Relaxed);
        if written_at.is_some_and(|n| n == renders) {
            continue;
        }
        written_at = None;
        let plan = shared.plan.lock().expect("plan lock").clone();
        let Some(plan) = plan.filter(|_| shared.leading.load(Ordering::Relaxed)) else { continue };
        if plan.loaded.federated_hpas.is_empty() && plan.loaded.cron_federated_hpas.is_empty() {
            continue;
        }
        let kubeconfig = match member_kubeconfig(&config, &shared).await {
            Ok(k) => k,
            Err(e) => {
                error!(error = format!("{e:#}"), "autoscaler: cannot read the member credentials");
                continue;
            }
        };
        let overrides = match settings.writeback {
            crate::autoscaler::Writeback::State => match state_overrides(&config, &shared).await {
                Ok(o) => o,
                Err(e) => {
                    error!(error = format!("{e:#}"), "autoscaler: cannot read its state ConfigMap");
                    continue;
                }
            },
            _ => Default::default(),
        };
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let sync = crate::autoscaler::Sync {
            settings,
            plan: &plan,
            members: crate::autoscaler::observe::Clients {
                pool: &shared.members,
                kubeconfig: &kubeconfig,
                trust: config.trust,
                timeout: config.request_timeout,
            },
            overrides: &overrides,
            now,
        };
        let (config, watched, shared_ref) = (&config, &watched, &shared);
        let write = async |edits: Vec<crate::autoscaler::writeback::Edit>, message: String| -> Result<bool, String> {
            match config.autoscale.writeback {
                crate::autoscaler::Writeback::State => {
                    let host = host_client(config, shared_ref).await.map_err(|e| format!("{e:#}"))?;
                    crate::autoscaler::write_state(&host, &config.namespace, &config.instance, &edits).await
                }
                _ => {
                    let (watched, cache, prefix) =
                        (watched.clone(), shared_ref.parse_cache.clone(), config.path.clone());
                    let (name, email) = config.autoscale.author.clone();
                    tokio::task::spawn_blocking(move || {
                        watched.lock().expect("repository lock").commit_on_head(
                            (&name, &email),
                            &message,
                            6,
                            |dir, head| crate::autoscaler::writeback::files(dir, head, &prefix, &edits, &cache),
                        )
                    })
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|commit| {
                        if let Some(commit) = commit {
                            info!(%commit, "autoscaler: pushed");
                        }
                        commit.is_some()
                    })
                }
            }
        };
        let outcome = crate::autoscaler::sync(sync, &mut state, write).await;
        crate::autoscaler::report(&outcome);
        let label = match &outcome {
            Ok(true) => "written",
            Ok(false) => "unchanged",
            Err(_) => "failed",
        };
        shared.metrics.autoscaler_syncs.get_or_create(&metrics::OutcomeLabel { outcome: label.into() }).inc();
        for (id, status) in &state.status {
            for (kind, value) in [("current", status.current_replicas), ("desired", status.desired_replicas)] {
                if let Some(value) = value {
                    let labels = metrics::AutoscalerLabels { autoscaler: id.clone(), replicas: kind.into() };
                    shared.metrics.autoscaler_replicas.get_or_create(&labels).set(value);
                }
            }
        }
        let previous =
            std::mem::replace(&mut *shared.autoscaler.lock().expect("autoscaler lock"), state.status.clone());
        for id in previous.keys().filter(|id| !state.status.contains_key(*id)) {
            for kind in ["current", "desired"] {
                let labels = metrics::AutoscalerLabels { autoscaler: id.clone(), replicas: kind.into() };
                shared.metrics.autoscaler_replicas.remove(&labels);
            }
        }
        if outcome == Ok(true) {
            written_at = Some(renders);
            // A commit moves the branch; a state write does not, so ask for a cycle.
            if settings.writeback == crate::autoscaler::Writeback::State {
                shared.force_cycle.store(true, Ordering::Relaxed);
            }
            shared.trigger.notify_one();
        }
    }
}

/// The client for the host cluster: `--host-kubeconfig`, or in-cluster configuration;
/// made on first use and kept (in-cluster, kube re-reads the rotated token itself).
async fn host_client(config: &Config, shared: &Shared) -> anyhow::Result<kube::Client> {
    shared.host.get_or_try_init(|| make_host_client(config)).await.cloned()
}

async fn make_host_client(config: &Config) -> anyhow::Result<kube::Client> {
    let kube_config = match &config.host {
        Some((path, context)) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).context("reading the host kubeconfig")?;
            let options = kube::config::KubeConfigOptions { context: context.clone(), ..Default::default() };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.context("host kubeconfig")?
        }
        None => kube::Config::incluster().context("in-cluster configuration for the host cluster")?,
    };
    kube::Client::try_from(kube_config).context("host cluster client")
}

/// Member credentials for this cycle.
async fn member_kubeconfig(config: &Config, shared: &Shared) -> anyhow::Result<kube::config::Kubeconfig> {
    match &config.members {
        Members::File(path) => Ok(clusters::connect::read(path)?),
        Members::Secrets => {
            let client = host_client(config, shared).await?;
            Ok(clusters::connect::from_secrets(&client, &config.namespace).await?)
        }
        Members::InCluster => {
            let name = config.agent.as_deref().expect("in-cluster members only for an agent");
            let server =
                std::env::var("KUBERNETES_SERVICE_HOST").ok().zip(std::env::var("KUBERNETES_SERVICE_PORT").ok());
            let (host, port) =
                server.context("not in a Pod (KUBERNETES_SERVICE_HOST/PORT unset): pass --kubeconfig")?;
            Ok(clusters::connect::in_cluster(name, &host, &port))
        }
    }
}

/// A watch on lease ownership, or always-leading without election.
struct Leadership {
    watch: Option<tokio::sync::watch::Receiver<bool>>,
    _task: Option<
        tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>,
    >,
}

impl Leadership {
    async fn start(election: Option<&Election>, config: &Config, shared: &Shared) -> anyhow::Result<Self> {
        let Some(election) = election else { return Ok(Self { watch: None, _task: None }) };
        let client = host_client(config, shared).await?;
        let identity =
            format!("{}-{}", std::env::var("HOSTNAME").unwrap_or_else(|_| "flotilla".into()), std::process::id());
        let grace = (election.duration / 3).max(1);
        let manager = kube_lease_manager::LeaseManagerBuilder::new(client, &election.name)
            .with_namespace(&config.namespace)
            .with_identity(identity)
            .with_duration(election.duration)
            .with_grace(grace)
            .with_field_manager("flotilla-lease")
            .build()
            .await
            .context("creating the lease manager")?;
        let (watch, task) = manager.watch().await;
        info!(lease = %format!("{}/{}", config.namespace, election.name), "leader election on");
        Ok(Self { watch: Some(watch), _task: Some(task) })
    }

    fn leading(&self) -> bool {
        self.watch.as_ref().is_none_or(|w| *w.borrow())
    }

    /// Gives the lease up (closing the watch makes the manager release it): the lease no
    /// longer names a process that is gone, and a standby takes it on its next look
    /// instead of first waiting for it to lapse and clearing it.
    async fn release(self) {
        let Self { watch, _task: task } = self;
        drop(watch);
        if let Some(task) = task {
            match tokio::time::timeout(Duration::from_secs(5), task).await {
                Ok(Ok(Ok(_))) => info!("released the lease"),
                Ok(Ok(Err(e))) => warn!(error = %e, "could not release the lease; it lapses after its duration"),
                Ok(Err(e)) => warn!(error = %e, "the lease task failed"),
                Err(_) => warn!("releasing the lease timed out; it lapses after its duration"),
            }
        }
    }

    /// Resolves when leadership changes (never without election).
    async fn changed(&mut self) {
        match &mut self.watch {
            Some(w) => {
                if w.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

/// What `/status` reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// Newest revision seen on the branch.
    pub head: Option<String>,
    /// Revision last applied to every cluster without a cluster-level failure.
    pub applied: Option<String>,
    /// Why the newest revision is not applied, if it is not.
    pub error: Option<String>,
    /// Per cluster: the last outcome.
    pub clusters: std::collections::BTreeMap<String, String>,
    /// Per cluster: the revision last applied there.
    pub revisions: std::collections::BTreeMap<String, String>,
}

/// State shared between the loop and the HTTP server.
pub struct Shared {
    /// Metrics registry.
    pub registry: Registry,
    /// The metrics.
    pub metrics: Metrics,
    /// Set once a revision has been applied.
    pub ready: AtomicBool,
    /// Wakes the loop (webhooks).
    pub trigger: Notify,
    /// Webhook secret.
    pub webhook_secret: Option<Vec<u8>>,
    /// The branch webhooks must name.
    pub branch: String,
    /// Reported by `/status`.
    pub status: Mutex<Status>,
    /// The last render's placements, fed to the next (dynamic and aggregated division
    /// keep their distribution, as Karmada's steady mode does). In memory only.
    pub placements: Mutex<ClusterState>,
    /// Documents of the last rendered revision by blob id: a commit re-parses only the
    /// files it changed.
    pub parse_cache: Arc<Mutex<ParseCache>>,
    /// Whether this instance leads (the autoscaler writes only then).
    pub leading: AtomicBool,
    /// The last revision rendered, for the autoscaler.
    pub plan: Mutex<Option<Arc<Plan>>>,
    /// The autoscaler's memory and status.
    pub autoscaler: crate::autoscaler::Shared,
    /// Set when the next loop must render and reconcile even if Git did not move (the
    /// autoscaler wrote its state ConfigMap).
    pub force_cycle: AtomicBool,
    /// Successful renders so far (the autoscaler waits for one after each write).
    pub renders: std::sync::atomic::AtomicU64,
    /// Member clients, kept across cycles and shared with the autoscaler.
    pub members: clusters::connect::Pool,
    /// The host cluster's client, once made.
    pub host: tokio::sync::OnceCell<kube::Client>,
}

/// Runs until interrupted (SIGINT, Ctrl-C) or terminated (SIGTERM).
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let members = clusters::connect::Pool::counting(metrics.member_clients.clone());
    let shared = Arc::new(Shared {
        registry,
        metrics,
        ready: AtomicBool::new(false),
        trigger: Notify::new(),
        webhook_secret: config.webhook_secret.clone(),
        branch: config.branch.clone(),
        status: Mutex::new(Status::default()),
        placements: Mutex::new(ClusterState::default()),
        parse_cache: Arc::default(),
        leading: AtomicBool::new(false),
        plan: Mutex::new(None),
        autoscaler: Arc::default(),
        force_cycle: AtomicBool::new(false),
        renders: Default::default(),
        members,
        host: Default::default(),
    });
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    info!(address = %listener.local_addr()?, "serving /healthz, /readyz, /metrics, /status and webhooks");
    let app = server::router(shared.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (repo, branch, cache) = (config.repo.clone(), config.branch.clone(), config.cache_dir.clone());
    let auth = config.git_auth.clone();
    let opened = tokio::task::spawn_blocking(move || git::Watched::open(&repo, &branch, &cache, auth)).await?;
    let _watcher = watch_local(&config.repo, shared.clone())?;
    // libgit2 repositories may move between threads but not be shared: one at a time.
    let watched = Arc::new(Mutex::new(opened.context("opening the repository")?));
    let mut leadership = Leadership::start(config.election.as_ref(), &config, &shared).await?;
    let config = Arc::new(config);
    match &config.agent {
        // One writer of replica counts: the push controller (Karmada runs FederatedHPA in
        // the control plane, not in its agents).
        Some(cluster) => {
            info!(cluster, "pull-mode agent: applying this member only; autoscaling is left to the push controller")
        }
        None => drop(tokio::spawn(autoscale_loop(config.clone(), watched.clone(), shared.clone()))),
    }
    let mut stop = shutdown_signal();
    let mut applied: Option<git2::Oid> = None;
    let mut last_reconcile: Option<Instant> = None;
    loop {
        shared.leading.store(leadership.leading(), Ordering::Relaxed);
        if !leadership.leading() {
            // A standby is not ready: webhooks and traffic go to the leader.
            shared.ready.store(false, Ordering::Relaxed);
            info!("standing by: another instance holds the lease");
            tokio::select! {
                _ = leadership.changed() => {
                    if leadership.leading() {
                        info!("acquired the lease; taking over");
                        applied = None;
                    }
                    continue;
                }
                _ = stop.changed() => break,
            }
        }
        if let Some(head) = fetch(&watched, &shared).await {
            let moved = applied != Some(head);
            let due = last_reconcile.is_none_or(|t| t.elapsed() >= config.resync);
            let rewritten = applied.filter(|p| moved && !watched.lock().expect("repository lock").descends(head, *p));
            if let Some(previous) = rewritten {
                warn!(%previous, %head, "the branch was rewritten (force-push or reset); applying the new head");
            }
            let forced = shared.force_cycle.swap(false, Ordering::Relaxed);
            if moved || due || forced {
                // Losing the lease cancels the cycle; a cut-short reconcile is finished
                // by whoever leads next (the inventory makes that safe).
                tokio::select! {
                    done = cycle(&config, &watched, head, &shared) => {
                        if done {
                            applied = Some(head);
                        }
                        hand_back_memory(&shared).await;
                    }
                    _ = leadership.changed() => warn!("lost the lease during a reconcile; stopping it"),
                    // Stopping mid-reconcile is safe for the same reason.
                    _ = stop.changed() => break,
                }
                last_reconcile = Some(Instant::now());
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(config.interval) => {}
            _ = leadership.changed() => {}
            _ = shared.trigger.notified() => info!("webhook: fetching now"),
            _ = stop.changed() => break,
        }
    }
    info!("stopping");
    shared.ready.store(false, Ordering::Relaxed);
    leadership.release().await;
    Ok(())
}

/// After a cycle its garbage is freed: gives the allocator's free pages back to the
/// system (on a blocking thread; glibc locks each arena while it trims it) and records
/// what the heap holds.
async fn hand_back_memory(shared: &Shared) {
    let clock = Instant::now();
    let released = tokio::task::spawn_blocking(crate::memory::release_free_pages).await;
    tracing::debug!(?released, took = ?clock.elapsed(), "returned free memory to the system");
    if let Some(heap) = crate::memory::heap() {
        shared.metrics.heap_allocated.set(heap.allocated as i64);
        shared.metrics.heap_free.set(heap.free as i64);
    }
}

/// Becomes true on SIGINT or SIGTERM (what Kubernetes sends a Pod it stops). One
/// listener for the whole run, so a signal during a reconcile is not missed.
fn shutdown_signal() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => info!("interrupted"),
            _ = term.recv() => info!("terminated"),
        }
        let _ = tx.send(true);
        // Keep the sender alive: a dropped sender would read as another change.
        std::future::pending::<()>().await;
    });
    rx
}

async fn fetch(watched: &Arc<Mutex<git::Watched>>, shared: &Shared) -> Option<git2::Oid> {
    let clock = Instant::now();
    let w = watched.clone();
    let result =
        tokio::task::spawn_blocking(move || w.lock().expect("repository lock").head()).await.expect("fetch task");
    shared.metrics.fetch_seconds.observe(clock.elapsed().as_secs_f64());
    match result {
        Ok(head) => {
            shared.status.lock().expect("status lock").head = Some(head.to_string());
            Some(head)
        }
        Err(e) => {
            shared.metrics.error("-", "fetch");
            error!(error = format!("{:#}", anyhow::Error::new(e)), "fetch failed; keeping what is applied");
            None
        }
    }
}

/// Renders and reconciles one revision; true when every cluster was reconciled.
async fn cycle(config: &Config, watched: &Mutex<git::Watched>, head: git2::Oid, shared: &Shared) -> bool {
    let Some(plan) = render(config, watched, head, shared).await else { return false };
    let plan = Arc::new(plan);
    *shared.plan.lock().expect("plan lock") = Some(plan.clone());
    let (names, pulled) = match &config.agent {
        Some(agent) => match clusters::agent_cluster(&plan, agent) {
            Ok(()) => (vec![agent.clone()], Vec::new()),
            Err(e) => {
                shared.metrics.error(agent, "sync-mode");
                error!(error = %e, "not applying");
                shared.status.lock().expect("status lock").error = Some(format!("{head}: {e}"));
                return false;
            }
        },
        None => clusters::by_sync_mode(&plan),
    };
    let kubeconfig = match member_kubeconfig(config, shared).await {
        Ok(k) => k,
        Err(e) => {
            shared.metrics.error("-", "credentials");
            error!(error = format!("{e:#}"), "cannot read the member credentials");
            return false;
        }
    };
    shared.members.retain(&kubeconfig);
    let options = clusters::Options {
        progress: false,
        instance: &config.instance,
        trust: config.trust,
        pool: &shared.members,
        budget: Default::default(),
        concurrency: config.concurrency,
        request_timeout: config.request_timeout,
        cluster_timeout: config.cluster_timeout,
    };
    let clock = Instant::now();
    let outcomes = clusters::reconcile_all(&plan, &kubeconfig, &names, options).await;
    record(shared, head, outcomes, &pulled, clock.elapsed())
}

/// Renders `head` completely; a failure is reported and leaves what is applied alone.
async fn render(config: &Config, watched: &Mutex<git::Watched>, head: git2::Oid, shared: &Shared) -> Option<Plan> {
    let dir = watched.lock().expect("repository lock").path();
    let (rev, subdir) = (head.to_string(), config.path.clone());
    let mut state = shared.placements.lock().expect("placements lock").clone();
    if config.autoscale.writeback == crate::autoscaler::Writeback::State {
        match state_overrides(config, shared).await {
            Ok(replicas) => state.replicas = replicas,
            Err(e) => {
                // Rendering without them would undo the autoscaler's decisions.
                shared.metrics.error("-", "autoscaler-state");
                error!(error = %e, "cannot read the autoscaler's state ConfigMap; not rendering");
                return None;
            }
        }
    }
    let cache = shared.parse_cache.clone();
    let clock = Instant::now();
    let rendered = tokio::task::spawn_blocking(move || -> anyhow::Result<Plan> {
        let limits = Limits::default();
        let mut cache = cache.lock().expect("parse cache lock");
        let files = crate::source::read_git_subtree(&dir, &rev, &subdir, &limits, &cache)?;
        let loaded = flotilla_core::load::load_cached(&files, &mut cache, &limits)?;
        Ok(flotilla_core::plan_loaded(loaded, files.revision, &state))
    })
    .await
    .expect("render task");
    shared.metrics.render_seconds.observe(clock.elapsed().as_secs_f64());
    match rendered {
        Ok(plan) => {
            shared.renders.fetch_add(1, Ordering::Relaxed);
            shared.metrics.render_failing.set(0);
            shared.placements.lock().expect("placements lock").previous = plan.placements.clone();
            for p in &plan.problems {
                warn!(object = %p.object, reason = ?p.reason, message = %p.message, "render problem");
            }
            Some(plan)
        }
        Err(e) => {
            let message = format!("{e:#}");
            error!(revision = %head, error = %message, "revision does not render; the last good revision stays applied");
            shared.metrics.error("-", "render");
            shared.metrics.render_failing.set(1);
            shared.status.lock().expect("status lock").error = Some(format!("{head}: {message}"));
            None
        }
    }
}

/// Records each cluster's outcome in metrics and `/status`; true when all succeeded.
fn record(
    shared: &Shared,
    head: git2::Oid,
    outcomes: Vec<(String, clusters::Outcome)>,
    pulled: &[String],
    took: Duration,
) -> bool {
    let mut all_ok = true;
    let mut status = shared.status.lock().expect("status lock");
    // Clusters the revision no longer declares leave the status; only those applied from
    // here keep a revision gauge. Pull members are listed, never contacted.
    status.clusters.retain(|c, _| outcomes.iter().any(|(o, _)| o == c));
    for name in pulled {
        status.clusters.insert(name.clone(), format!("{head}: syncMode Pull: applied by its agent"));
    }
    let gone: Vec<String> =
        status.revisions.keys().filter(|c| !outcomes.iter().any(|(o, _)| o == *c)).cloned().collect();
    for cluster in gone {
        let revision = status.revisions.remove(&cluster).expect("listed above");
        shared.metrics.applied_revision.remove(&RevisionLabels { cluster, revision });
    }
    for (cluster, outcome) in outcomes {
        let label = ClusterLabel { cluster: cluster.clone() };
        shared.metrics.reconcile_seconds.get_or_create(&label).observe(took.as_secs_f64());
        let line = match outcome {
            Ok(report) => {
                shared.metrics.applied.get_or_create(&label).inc_by(report.applied.len() as u64);
                shared.metrics.pruned.get_or_create(&label).inc_by(report.pruned.len() as u64);
                for _ in &report.failed {
                    shared.metrics.error(&cluster, "object");
                }
                if let Some(old) = status.revisions.insert(cluster.clone(), head.to_string()) {
                    shared.metrics.applied_revision.remove(&RevisionLabels { cluster: cluster.clone(), revision: old });
                }
                let labels = RevisionLabels { cluster: cluster.clone(), revision: head.to_string() };
                shared.metrics.applied_revision.get_or_create(&labels).set(1);
                format!("{head}: {}", report.summary())
            }
            Err(e) => {
                all_ok = false;
                shared.metrics.error(&cluster, "reconcile");
                error!(cluster, error = %e, "cluster not reconciled");
                format!("{head}: failed: {e}")
            }
        };
        info!(cluster, "{line}");
        status.clusters.insert(cluster, line);
    }
    if all_ok {
        status.applied = Some(head.to_string());
        status.error = None;
        shared.ready.store(true, Ordering::Relaxed);
    }
    all_ok
}
