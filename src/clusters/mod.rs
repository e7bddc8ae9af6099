//! The executor: reconciles a plan into member clusters, each independently, in
//! parallel, with timeouts, so a dead or slow cluster is reported while the others
//! converge. Only this module writes to clusters.

pub mod apply;
pub mod connect;
pub mod credentials;
pub mod get;
pub mod inventory;
pub mod probe;
pub mod status;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use flotilla_core::diff::PruneBudget;
use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::rollout::PolicyId;
use kube::config::Kubeconfig;

use apply::{Report, Settings};
use flotilla_core::finish;

use crate::leader::Fence;

/// The one server-side-apply field manager flotilla uses. Never rename it: SSA
/// ownership is keyed on it.
pub const FIELD_MANAGER: &str = "flotilla";

/// Objects a member takes from an older revision while a rollout holds it back
/// (docs/rollouts.md): the objects `keys` come from `plan`, whole, never mixed with the
/// newer revision's.
#[derive(Debug, Clone)]
pub struct Held {
    /// The RolloutPolicy holding the member.
    pub policy: PolicyId,
    /// The revision it is held at for those objects.
    pub revision: String,
    /// That revision's plan.
    pub plan: Arc<Plan>,
    /// The objects the policy governs.
    pub keys: Arc<BTreeSet<ObjectKey>>,
}

/// Options of an apply run.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Show a progress bar per cluster (on a terminal).
    pub progress: bool,
    /// Instance name: scopes the inventory and what may be pruned.
    pub instance: &'a str,
    /// Which kubeconfig credentials to trust.
    pub trust: connect::Trust,
    /// Member clients, kept between runs by a long-running caller.
    pub pool: &'a connect::Pool,
    /// Deletion safety.
    pub budget: PruneBudget,
    /// Requests in flight per cluster.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Whole-cluster timeout.
    pub cluster_timeout: Duration,
    /// Whether a failed cluster is tried again, with backoff, until `cluster_timeout`
    /// (a one-shot command). A loop that retries on its own schedule says no: one
    /// attempt per cluster, so one unreachable member costs it one request timeout,
    /// not the cluster timeout.
    pub retry: bool,
    /// Checked before each batch of applies and each delete: a controller that lost its
    /// lease writes nothing more.
    pub fence: &'a Fence,
    /// The repository applied, recorded in each inventory.
    pub source: &'a flotilla_core::inventory::Source,
    /// Take over inventories another source recorded.
    pub adopt: bool,
    /// What the instance may touch: objects outside are never pruned.
    pub scope: Option<&'a flotilla_core::project::Project>,
    /// The user objects are written as (`system:serviceaccount:NS:NAME`), so each
    /// member's RBAC for it bounds the repository; the inventory, discovery and the HPA
    /// listing stay this instance's own.
    pub acting_as: Option<&'a str>,
}

/// How a loop other than the reconcile loop writes to (or dry-runs against) members, as
/// the reconcile loop does: its credentials' trust, its limits, its source and user.
#[derive(Debug, Clone)]
pub struct Applying {
    /// Which kubeconfig credentials to trust.
    pub trust: connect::Trust,
    /// Requests in flight per cluster.
    pub concurrency: usize,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Per-cluster timeout.
    pub cluster_timeout: Duration,
    /// The followed repository, recorded in each inventory.
    pub source: flotilla_core::inventory::Source,
    /// The user objects are written as in each member, if any.
    pub acting_as: Option<String>,
    /// This controller's instance.
    pub instance: String,
}

impl Applying {
    /// The options of one attempt per cluster (the loop retries on its own schedule) for
    /// inventory `instance`, taking over no other source's inventory.
    pub fn options<'a>(
        &'a self,
        instance: &'a str,
        pool: &'a connect::Pool,
        fence: &'a Fence,
        scope: Option<&'a flotilla_core::project::Project>,
    ) -> Options<'a> {
        Options {
            progress: false,
            instance,
            trust: self.trust,
            pool,
            budget: Default::default(),
            concurrency: self.concurrency,
            request_timeout: self.request_timeout,
            cluster_timeout: self.cluster_timeout,
            retry: false,
            fence,
            source: &self.source,
            adopt: false,
            scope,
            acting_as: self.acting_as.as_deref(),
        }
    }
}

/// The outcome for one cluster.
pub type Outcome = Result<Report, String>;

/// The declared clusters by who applies them, as Karmada splits them: `syncMode: Push`
/// clusters are applied from here; `Pull` clusters by an agent inside each member
/// (`flotilla run --agent NAME`), and never contacted from here.
pub fn by_sync_mode(plan: &Plan) -> (Vec<String>, Vec<String>) {
    let (push, pull): (Vec<_>, Vec<_>) =
        plan.loaded.clusters.iter().partition(|c| c.spec.sync_mode == flotilla_core::model::SyncMode::Push);
    let names = |v: Vec<&flotilla_core::model::Cluster>| v.into_iter().map(|c| c.name.clone()).collect();
    (names(push), names(pull))
}

/// The one cluster an agent applies: it must be declared, with `syncMode: Pull`
/// (otherwise the push controller applies it, and two writers would fight).
pub fn agent_cluster(plan: &Plan, name: &str) -> Result<(), String> {
    match plan.loaded.clusters.iter().find(|c| c.name == name) {
        None => Err(format!("cluster {name} is not declared in the repository; this agent applies nothing")),
        Some(c) if c.spec.sync_mode != flotilla_core::model::SyncMode::Pull => Err(format!(
            "cluster {name} is declared with syncMode {:?}: the push controller applies it; this agent applies nothing until it says Pull",
            c.spec.sync_mode
        )),
        Some(_) => Ok(()),
    }
}

/// A failure of a whole cluster, and whether trying again may help.
struct Failure {
    message: String,
    retry: bool,
}

impl Failure {
    fn of(error: impl std::error::Error + Send + Sync + 'static, retry: bool) -> Self {
        Self { message: format!("{:#}", anyhow::Error::new(error)), retry }
    }
}

/// Reconciles every named cluster concurrently and independently; one outcome per
/// cluster, in order. An unreachable cluster is retried with exponential backoff
/// (1 s, 2 s, 4 s … 16 s) until its timeout, while the others proceed; configuration
/// errors (no context, an untrusted credential, a corrupt inventory) are not retried.
pub async fn reconcile_all(
    plan: &Plan,
    kubeconfig: &Kubeconfig,
    clusters: &[String],
    options: Options<'_>,
) -> Vec<(String, Outcome)> {
    let bars = options.progress.then(indicatif::MultiProgress::new);
    let style = indicatif::ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    let runs = clusters.iter().map(|cluster| {
        let bar = bars.as_ref().map(|m| {
            let bar = m.add(indicatif::ProgressBar::new(0).with_style(style.clone()).with_prefix(cluster.clone()));
            bar.set_message("connecting");
            bar
        });
        async move {
            let outcome = with_retries((options.cluster_timeout, options.retry), cluster, || {
                attempt((plan, &[]), kubeconfig, cluster, options, bar.clone())
            })
            .await;
            if let Some(bar) = &bar {
                bar.finish_with_message(if outcome.is_ok() { "done" } else { "failed" });
            }
            (cluster.clone(), outcome)
        }
    });
    futures::future::join_all(runs).await
}

async fn attempt(
    (plan, held): (&Plan, &[Held]),
    kubeconfig: &Kubeconfig,
    cluster: &str,
    options: Options<'_>,
    progress: Option<indicatif::ProgressBar>,
) -> Result<Report, Failure> {
    let (client, acting) = clients(kubeconfig, cluster, options).await?;
    if let Some(bar) = &progress {
        bar.set_message("applying");
    }
    let settings = settings(options, cluster, acting, progress);
    let share = share(&client, (plan, held), cluster, options);
    apply::reconcile(&client, &plan.revision, share, settings).await.map_err(failure)
}

/// One attempt at one cluster, bounded by `options.cluster_timeout` and not retried: a
/// member's worker decides when to try again (`crate::members::step`). The member runs
/// `plan`, except the objects rollouts hold it at older revisions for (`held`).
pub async fn reconcile_one(
    (plan, held): (&Plan, &[Held]),
    kubeconfig: &Kubeconfig,
    cluster: &str,
    options: Options<'_>,
) -> Outcome {
    let limit = options.cluster_timeout;
    match tokio::time::timeout(limit, attempt((plan, held), kubeconfig, cluster, options, None)).await {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(failure)) => Err(failure.message),
        Err(_) => Err(format!("timed out after {limit:?}")),
    }
}

/// Removes everything `options.instance` applied from each named cluster (a preview that
/// ended), with the same retries and timeouts as a reconcile; one outcome per cluster.
pub async fn teardown_all(
    kubeconfig: &Kubeconfig,
    clusters: &[String],
    options: Options<'_>,
) -> Vec<(String, Outcome)> {
    let limit = (options.cluster_timeout, options.retry);
    each_retried(clusters, limit, |cluster| teardown_one(kubeconfig, cluster, options)).await
}

/// What applying `plan` would change in each named cluster now (server-side apply dry
/// runs, nothing written), with the same retries and timeouts as a reconcile.
pub async fn observe_all(
    plan: &Plan,
    kubeconfig: &Kubeconfig,
    clusters: &[String],
    options: Options<'_>,
) -> Vec<(String, Result<apply::live::LivePlan, String>)> {
    let limit = (options.cluster_timeout, options.retry);
    each_retried(clusters, limit, |cluster| observe_one(plan, kubeconfig, cluster, options)).await
}

/// Runs `work` against every named cluster concurrently, each retried as a reconcile is
/// ([`with_retries`]); one outcome per cluster, in order.
async fn each_retried<'a, T, F, Fut>(
    clusters: &'a [String],
    limit: (Duration, bool),
    work: F,
) -> Vec<(String, Result<T, String>)>
where
    F: Fn(&'a str) -> Fut + Copy,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let runs = clusters
        .iter()
        .map(|cluster| async move { (cluster.clone(), with_retries(limit, cluster, || work(cluster)).await) });
    futures::future::join_all(runs).await
}

async fn observe_one(
    plan: &Plan,
    kubeconfig: &Kubeconfig,
    cluster: &str,
    options: Options<'_>,
) -> Result<apply::live::LivePlan, Failure> {
    let (client, acting) = clients(kubeconfig, cluster, options).await?;
    let share = share(&client, (plan, &[]), cluster, options).await.map_err(|e| Failure::of(e, true))?;
    apply::live::observe_share(&client, share, &settings(options, cluster, acting, None)).await.map_err(failure)
}

/// The cluster's finished share, without the `spec.replicas` its HPAs own: `plan`'s,
/// with what each hold governs taken from the held revision's plan instead.
async fn share<'p>(
    client: &kube::Client,
    (plan, held): (&'p Plan, &'p [Held]),
    cluster: &str,
    options: Options<'_>,
) -> Result<finish::Share<'p>, apply::ReconcileError> {
    let autoscaled = apply::autoscaled(client).await?;
    let context = finish::Context { instance: options.instance, autoscaled: &autoscaled };
    let newest = finish::finish(plan, cluster, context);
    Ok(held.iter().fold(newest, |share, hold| {
        flotilla_core::rollout::compose::held(share, finish::finish(&hold.plan, cluster, context), &hold.keys)
    }))
}

async fn teardown_one(kubeconfig: &Kubeconfig, cluster: &str, options: Options<'_>) -> Result<Report, Failure> {
    let (client, acting) = clients(kubeconfig, cluster, options).await?;
    apply::teardown(&client, settings(options, cluster, acting, None)).await.map_err(failure)
}

/// The instance's own client for `cluster`, and the one objects are written with (the
/// same, unless impersonating).
async fn clients(
    kubeconfig: &Kubeconfig,
    cluster: &str,
    options: Options<'_>,
) -> Result<(kube::Client, kube::Client), Failure> {
    let pool = options.pool;
    let connect = |acting_as| pool.client(kubeconfig, cluster, options.trust, options.request_timeout, acting_as);
    let client = connect(None).await.map_err(|e| Failure::of(e, false))?;
    let acting = match options.acting_as {
        Some(user) => connect(Some(user)).await.map_err(|e| Failure::of(e, false))?,
        None => client.clone(),
    };
    Ok((client, acting))
}

fn settings<'a>(
    options: Options<'a>,
    cluster: &'a str,
    acting: kube::Client,
    progress: Option<indicatif::ProgressBar>,
) -> Settings<'a> {
    Settings {
        instance: options.instance,
        budget: options.budget,
        concurrency: options.concurrency,
        progress,
        fence: options.fence,
        source: options.source,
        adopt: options.adopt,
        scope: options.scope.map(|project| (cluster, project)),
        acting,
        served: options.pool.served(cluster),
    }
}

/// A whole-cluster failure; retried unless another source owns the inventory or the
/// lease is lost.
fn failure(e: apply::ReconcileError) -> Failure {
    let retry = !matches!(e, apply::ReconcileError::OtherSource(..) | apply::ReconcileError::Fenced);
    Failure::of(e, retry)
}

/// `run` until it succeeds, fails for good, or `limit` (the time, and whether to retry
/// at all) is spent.
async fn with_retries<T, F, Fut>((limit, retry): (Duration, bool), cluster: &str, mut run: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut delay = Duration::from_secs(1);
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(remaining, run()).await {
            Ok(Ok(report)) => return Ok(report),
            Ok(Err(failure)) if retry && failure.retry && tokio::time::Instant::now() + delay < deadline => {
                tracing::warn!(cluster, error = %failure.message, "retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(16));
            }
            Ok(Err(failure)) => return Err(failure.message),
            Err(_) => return Err(format!("timed out after {limit:?}")),
        }
    }
}

/// Runs `work` against every named cluster concurrently, each with its own client; one
/// result per cluster, in order. Connection failures are that cluster's result. (A
/// one-shot: the long-running controller keeps its clients in a [`connect::Pool`].)
pub async fn each<'a, T, F, Fut>(
    kubeconfig: &'a Kubeconfig,
    names: &'a [String],
    trust: connect::Trust,
    timeout: Duration,
    work: F,
) -> Vec<Result<T, String>>
where
    F: Fn(kube::Client, &'a str) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let work = &work;
    futures::future::join_all(names.iter().map(|name| async move {
        let client = connect::client(kubeconfig, name, trust, timeout, None)
            .await
            .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
        work(client, name).await
    }))
    .await
}
