//! `flotilla run`: the long-running controller, composed of loops. It opens the followed
//! branch, starts the HTTP listeners, elects a leader, and runs the reconcile loop and
//! (in the push controller) the autoscaler, endpoints and failover loops until SIGINT or SIGTERM. Each loop is a
//! module of its own that imports nothing from here; this module only wires them: who
//! wakes whom, who reads whose output.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tracing::info;

mod members;

use crate::autoscaler::{self, Autoscaler, Writer};
use crate::clusters::connect::Pool;
use crate::clusters::credentials::Credentials;
use crate::git::{Branch, Git, GitAuth};
use crate::host::Host;
use crate::leader::elect::Timing;
use crate::leader::{Election, Fence, Leadership};
use crate::metrics::Metrics;
use crate::reconciler::{Inputs, Reconciler, Trigger};
use crate::server::webhook::Webhooks;
use crate::status::Board;

/// Settings of the controller.
pub struct Config {
    /// URL or local repository path.
    pub repo: String,
    /// Branch to follow.
    pub branch: String,
    /// Credentials for the remote.
    pub git_auth: GitAuth,
    /// SSH private key write-back commits are signed with.
    pub signing_key: Option<PathBuf>,
    /// Bare caches of fetched remotes.
    pub cache_dir: PathBuf,
    /// How the reconcile loop runs.
    pub reconcile: crate::reconciler::Settings,
    /// Where member credentials come from (re-read every cycle).
    pub credentials: Credentials,
    /// Host cluster (kubeconfig and context); `None` uses in-cluster configuration.
    pub host: Option<(PathBuf, Option<String>)>,
    /// Leader election, when replicas share the work.
    pub election: Option<Election>,
    /// Where to serve health, metrics and status (and webhooks, without `webhook_listen`).
    pub listen: String,
    /// Where to serve webhooks on their own.
    pub webhook_listen: Option<String>,
    /// Shared secret for webhooks; none disables them.
    pub webhook_secret: Option<Vec<u8>>,
    /// The autoscaler (`None` for a pull-mode agent: one writer of replica counts).
    pub autoscale: Option<autoscaler::Settings>,
    /// Pull-request plans and previews, when on.
    pub previews: Option<crate::previews::Follow>,
    /// The endpoints loop of multi-cluster Services (`None` for a pull-mode agent).
    pub endpoints: Option<crate::endpoints::Settings>,
    /// The failover loop: member health, taints, evictions (`None` for a pull-mode
    /// agent).
    pub failover: Option<crate::failover::Settings>,
    /// A pull-mode agent's heartbeat, when it reports to a push controller.
    pub heartbeat: Option<Heartbeat>,
    /// The rollout loop (`None` for a pull-mode agent without a heartbeat host: it
    /// applies what it renders).
    pub rollouts: Option<crate::rollouts::Settings>,
    /// The fleet page at `/ui/` on the main listener, when on.
    pub ui: Option<crate::ui::Settings>,
    /// `--sharding`: the members are shared among the replicas (each holds a membership
    /// Lease with `election`'s timing); the fleet-wide loops stay on the leader.
    pub sharding: bool,
}

/// A pull-mode agent's heartbeat Lease in the push controller's host cluster.
pub struct Heartbeat {
    /// That host cluster: kubeconfig and context.
    pub host: (PathBuf, Option<String>),
    /// The member this agent serves.
    pub cluster: String,
    /// Time between renewals.
    pub every: std::time::Duration,
}

/// What every loop shares.
struct Parts {
    metrics: Arc<Metrics>,
    board: Arc<Board>,
    host: Arc<Host>,
    pool: Arc<Pool>,
}

/// Runs until interrupted (SIGINT, Ctrl-C) or terminated (SIGTERM).
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::new(&mut registry));
    let pool = Arc::new(Pool::counting(metrics.member_clients.clone()));
    let parts = Parts { metrics, board: Arc::default(), host: Arc::new(Host::new(config.host.clone())), pool };
    let (triggers, triggered) = mpsc::unbounded_channel();
    let (deliver, deliveries) = mpsc::unbounded_channel();
    let (page, snapshots) = watch::channel(Arc::default());
    let ui = config.ui.as_ref().map(|s| fleet_page(&config, &parts, s, snapshots));
    serve(&config, &parts, Arc::new(registry), (triggers.clone(), deliver), ui).await?;

    let (git, _watcher) = open_branch(&config, triggers.clone()).await?;
    let namespace = &config.reconcile.namespace;
    let leadership =
        Leadership::start(config.election.as_ref(), &parts.host, namespace, crate::identity::identity()).await?;
    let mut sharded = Sharded::start(&config, &parts, &leadership).await?;
    let stop = shutdown_signal();
    let parse_cache = Arc::new(Mutex::new(Default::default()));
    let (rendered, plans) = watch::channel(None);
    let (failover, overlay) = members::failover_loop(&config, &parts, &leadership, (&plans, &stop), triggers.clone());
    let autoscaler = config.autoscale.clone().map(|settings| {
        let loop_ = autoscaler_loop(&config, settings, &parts, &git, &parse_cache, triggers, leadership.fence());
        tokio::spawn(loop_.run(plans.clone(), leadership.subscribe(), stop.clone()))
    });
    let endpoints = members::endpoints_loop(&config, &parts, &leadership, &plans, &stop);
    let heartbeat = members::heartbeat(&config, &stop);
    let feed = members::fleet_page(&config, &parts, (page, overlay.clone()), &plans, &stop);
    let (publish, publications) = mpsc::unbounded_channel();
    let (publications, rolling) = members::rollouts_loop(
        &config,
        &parts,
        (&git, &parse_cache),
        (&leadership, overlay.clone(), &stop),
        publications,
    );
    let previews = config.previews.as_ref().map(|follow| {
        let loop_ = previews_loop(follow, (&config, &parts), (&git, &parse_cache), &leadership, overlay.clone());
        let inputs = crate::previews::Inputs {
            deliveries,
            rendered: plans.clone(),
            leading: leadership.subscribe(),
            stop: stop.clone(),
        };
        loop_.run(inputs)
    });
    let fleet = members_fleet(&config.reconcile, &parts, sharded.fence.clone(), overlay.clone());
    let reconciler = reconcile_loop(
        (&config.reconcile, &config.credentials),
        &parts,
        git,
        (rendered, parse_cache),
        (publish, overlay),
    );
    // The preview loop and the members' workers run beside the reconcile loop on this
    // task (the member clients they share are not all `Send` across every lifetime a
    // spawned task would need).
    let previewing = futures::future::OptionFuture::from(previews);
    let (shard, leading) = (sharded.shard.take(), leadership.subscribe());
    let converging = fleet.run(crate::members::Inputs { publications, leading, stop: stop.clone(), shard });
    let reconciling = reconciler.run(Inputs { triggers: Some(triggered), leading: sharded.rendering.clone(), stop });
    tokio::join!(reconciling, previewing, converging);
    info!("stopping");
    for task in [autoscaler, endpoints, failover, heartbeat, rolling, feed].into_iter().flatten() {
        let _ = task.await;
    }
    sharded.release().await;
    leadership.release().await;
    Ok(())
}

/// The fleet page: its token or Kubernetes reviews, and the live diff through the
/// members' shared clients.
fn fleet_page(
    config: &Config,
    parts: &Parts,
    settings: &crate::ui::Settings,
    snapshots: watch::Receiver<Arc<crate::ui::Snapshot>>,
) -> crate::ui::Ui {
    let reviews = settings.kubernetes.then(|| {
        let (namespace, instance) = (config.reconcile.namespace.clone(), config.reconcile.instance.clone());
        crate::ui::auth::Kubernetes::new(parts.host.clone(), namespace, instance)
    });
    let live = crate::ui::live::Live {
        access: members::access(config, parts),
        applying: applying(&config.reconcile),
        scope: config.reconcile.scope.clone(),
    };
    crate::ui::Ui::new(snapshots, crate::ui::auth::Auth::new(settings.token.clone(), reviews)).comparing(live)
}

/// What `--sharding` changes in a run: the members' fence is this replica's
/// membership rather than the fleet's Lease, and every replica renders (the render is
/// pure: they agree) and applies its own members; without it only the leader does.
struct Sharded {
    fence: Fence,
    rendering: watch::Receiver<bool>,
    _always: watch::Sender<bool>,
    shard: Option<(watch::Receiver<crate::shard::step::Shard>, watch::Sender<std::collections::BTreeSet<String>>)>,
    handle: Option<crate::shard::Handle>,
}

impl Sharded {
    async fn start(config: &Config, parts: &Parts, leadership: &Leadership) -> anyhow::Result<Self> {
        let (always, rendering) = watch::channel(true);
        if !config.sharding {
            let (fence, rendering) = (leadership.fence(), leadership.subscribe());
            return Ok(Self { fence, rendering, _always: always, shard: None, handle: None });
        }
        let election = config.election.as_ref().context("--sharding needs --leader-elect")?;
        let (told, members) = watch::channel(Default::default());
        let sharding = crate::shard::Sharding {
            host: parts.host.clone(),
            namespace: config.reconcile.namespace.clone(),
            instance: config.reconcile.instance.clone(),
            identity: crate::identity::identity().to_owned(),
            timing: election.timing,
        };
        let handle = sharding.start(members).await?;
        let fence = Fence::until(handle.until.clone());
        let shard = Some((handle.shard.clone(), told));
        Ok(Self { fence, rendering, _always: always, shard, handle: Some(handle) })
    }

    /// Gives the membership up (the members' workers have stopped).
    async fn release(self) {
        if let Some(handle) = self.handle {
            handle.release().await;
        }
    }
}

/// Opens the followed branch (fetching into the cache happens later, in the loop) and
/// hands it to its Git thread; a local repository's commits wake the loop (`triggers`).
async fn open_branch(
    config: &Config,
    triggers: mpsc::UnboundedSender<Trigger>,
) -> anyhow::Result<(Git, Option<crate::git::LocalWatch>)> {
    let git = open_git(config).await?;
    let watcher = crate::git::watch_local(&config.repo, move || {
        let _ = triggers.send(Trigger::Fetch);
    })?;
    Ok((git, watcher))
}

async fn open_git(config: &Config) -> anyhow::Result<Git> {
    let (repo, branch, cache, auth) =
        (config.repo.clone(), config.branch.clone(), config.cache_dir.clone(), config.git_auth.clone());
    let opened = tokio::task::spawn_blocking(move || Branch::open(&repo, &branch, &cache, auth)).await?;
    let mut opened = opened.context("opening the repository")?;
    if let Some(key) = config.signing_key.clone() {
        opened.sign_with(key);
    }
    Ok(Git::spawn(opened))
}

/// Binds the listeners and serves them in the background.
async fn serve(
    config: &Config,
    parts: &Parts,
    registry: Arc<Registry>,
    (triggers, pulls): (mpsc::UnboundedSender<Trigger>, mpsc::UnboundedSender<crate::forge::PullRequest>),
    ui: Option<crate::ui::Ui>,
) -> anyhow::Result<()> {
    use crate::server;
    let bind = async |address: &str| {
        tokio::net::TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))
    };
    let listener = bind(&config.listen).await?;
    let mut app = server::router(server::Endpoints { board: parts.board.clone(), registry });
    // The fleet page is on the main listener only: exposing webhooks never exposes it.
    if let Some(ui) = ui {
        app = app.merge(ui.router());
    }
    if let Some(secret) = config.webhook_secret.clone() {
        let mut hooks = server::webhook::router(Webhooks {
            secret: secret.clone(),
            branch: config.branch.clone(),
            metrics: parts.metrics.clone(),
            push: Box::new(move || {
                let _ = triggers.send(Trigger::Fetch);
            }),
            deliveries: Default::default(),
        });
        if let Some(follow) = &config.previews {
            hooks = hooks.merge(server::webhook::pulls_router(server::webhook::PullHooks {
                kind: follow.forge.kind(),
                secret,
                metrics: parts.metrics.clone(),
                deliver: Box::new(move |pull| {
                    let _ = pulls.send(pull);
                }),
                deliveries: Default::default(),
            }));
        }
        match &config.webhook_listen {
            Some(address) => {
                let webhook_listener = bind(address).await?;
                info!(address = %webhook_listener.local_addr()?, "serving webhooks");
                tokio::spawn(server::serve(webhook_listener, hooks, server::Limits::default()));
            }
            None => app = app.merge(hooks),
        }
    }
    let page = if config.ui.is_some() { " and the fleet page at /ui/" } else { "" };
    info!(address = %listener.local_addr()?, "serving /healthz, /readyz, /metrics and /status{page}");
    tokio::spawn(server::serve(listener, app, server::Limits::default()));
    Ok(())
}

/// The reconcile loop: fetch, render, publish to the members.
fn reconcile_loop(
    (settings, credentials): (&crate::reconciler::Settings, &Credentials),
    parts: &Parts,
    git: Git,
    (rendered, parse_cache): (
        watch::Sender<Option<Arc<flotilla_core::model::Plan>>>,
        Arc<Mutex<flotilla_core::load::ParseCache>>,
    ),
    (publish, overlay): (
        mpsc::UnboundedSender<crate::members::Publication>,
        Option<watch::Receiver<flotilla_core::model::ClusterState>>,
    ),
) -> Reconciler {
    Reconciler {
        settings: settings.clone(),
        git,
        host: parts.host.clone(),
        credentials: credentials.clone(),
        pool: parts.pool.clone(),
        board: parts.board.clone(),
        metrics: parts.metrics.clone(),
        rendered,
        parse_cache,
        publish,
        overlay,
    }
}

/// The members' workers, converging each member on what the reconcile loop publishes.
fn members_fleet(
    reconcile: &crate::reconciler::Settings,
    parts: &Parts,
    fence: Fence,
    health: Option<watch::Receiver<flotilla_core::model::ClusterState>>,
) -> crate::members::Fleet {
    let settings = crate::members::Settings {
        instance: reconcile.instance.clone(),
        trust: reconcile.trust,
        concurrency: reconcile.concurrency,
        request_timeout: reconcile.request_timeout,
        cluster_timeout: reconcile.cluster_timeout,
        source: reconcile.source.clone(),
        adopt: reconcile.adopt,
        scope: reconcile.scope.clone(),
        acting_as: reconcile.acting_as.clone(),
    };
    crate::members::Fleet {
        settings,
        pool: parts.pool.clone(),
        fence,
        board: parts.board.clone(),
        metrics: parts.metrics.clone(),
        health,
    }
}

/// How the loops beside the reconcile loop write to members: as it does.
fn applying(reconcile: &crate::reconciler::Settings) -> crate::clusters::Applying {
    crate::clusters::Applying {
        trust: reconcile.trust,
        concurrency: reconcile.concurrency,
        request_timeout: reconcile.request_timeout,
        cluster_timeout: reconcile.cluster_timeout,
        source: reconcile.source.clone(),
        acting_as: reconcile.acting_as.clone(),
        instance: reconcile.instance.clone(),
    }
}

/// The preview loop, applying previews as the reconcile loop applies production.
fn previews_loop(
    follow: &crate::previews::Follow,
    (config, parts): (&Config, &Parts),
    (git, parse_cache): (&Git, &Arc<Mutex<flotilla_core::load::ParseCache>>),
    leadership: &Leadership,
    health: Option<watch::Receiver<flotilla_core::model::ClusterState>>,
) -> crate::previews::Previews {
    let reconcile = &config.reconcile;
    let apply = applying(reconcile);
    let renderer = crate::rendering::Renderer {
        git: git.clone(),
        path: reconcile.path.clone(),
        cache: parse_cache.clone(),
        scope: reconcile.scope.clone(),
        admission: reconcile.admission,
    };
    crate::previews::Previews {
        settings: crate::previews::Settings { step: follow.step.clone(), poll: follow.poll, apply },
        forge: follow.forge.clone(),
        renderer,
        credentials: config.credentials.clone(),
        host: parts.host.clone(),
        pool: parts.pool.clone(),
        fence: leadership.fence(),
        health,
        board: parts.board.clone(),
    }
}

/// The autoscaler loop, writing where `--writeback` says and waking the reconcile loop
/// after each write.
fn autoscaler_loop(
    config: &Config,
    settings: autoscaler::Settings,
    parts: &Parts,
    git: &Git,
    parse_cache: &Arc<Mutex<flotilla_core::load::ParseCache>>,
    triggers: mpsc::UnboundedSender<Trigger>,
    fence: Fence,
) -> Autoscaler {
    let (writer, after) = match settings.writeback {
        autoscaler::Writeback::Git if !crate::git::is_url(&config.repo) => {
            // Committing into a local repository's checked-out branch would leave its
            // work tree behind; decide and report only.
            tracing::warn!(
                "--repo is a local path: autoscaler decisions are reported, not written (use a remote URL or --writeback=state)"
            );
            (Writer::Off, Trigger::Fetch)
        }
        autoscaler::Writeback::Git => {
            let committer = autoscaler::writeback::Committer {
                git: git.clone(),
                prefix: config.reconcile.path.clone(),
                author: settings.author.clone(),
                cache: parse_cache.clone(),
                fence: fence.clone(),
            };
            (Writer::Git(committer), Trigger::Fetch)
        }
        // A state write does not move the branch, so ask for a cycle.
        autoscaler::Writeback::State => (
            Writer::State {
                namespace: config.reconcile.namespace.clone(),
                instance: config.reconcile.instance.clone(),
            },
            Trigger::Force,
        ),
        autoscaler::Writeback::Off => (Writer::Off, Trigger::Fetch),
    };
    Autoscaler {
        settings,
        writer,
        host: parts.host.clone(),
        credentials: config.credentials.clone(),
        pool: parts.pool.clone(),
        trust: config.reconcile.trust,
        request_timeout: config.reconcile.request_timeout,
        board: parts.board.clone(),
        metrics: parts.metrics.clone(),
        fence,
        written: Box::new(move || {
            let _ = triggers.send(after);
        }),
    }
}

/// Becomes true on SIGINT or SIGTERM (what Kubernetes sends a Pod it stops). One
/// listener for the whole run, so a signal during a reconcile is not missed.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
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

/// A lease with `timing` (the Lease is named after the instance, and apart for an agent,
/// should both share a host cluster and an instance name).
pub fn election(instance: &str, agent: Option<&str>, timing: Timing) -> Election {
    let name = match agent {
        Some(cluster) => format!("flotilla-{instance}-agent-{cluster}"),
        None => format!("flotilla-{instance}"),
    };
    Election { name, timing }
}
