//! `flotilla run`: the controller's settings from the command line, then the controller.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Outcome, runtime};
use crate::autoscaler;
use crate::cli::RunArgs;
use crate::clusters::credentials::Credentials;
use crate::controller::{self, Config};
use crate::git::GitAuth;

/// Runs the controller until it is stopped.
pub fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    let config = config(args)?;
    runtime()?.block_on(controller::run(config))?;
    Ok(Outcome::Clean)
}

fn config(args: RunArgs) -> anyhow::Result<Config> {
    crate::git::check_transport(&args.repo, args.reconcile.trust.insecure_allow_http).map_err(anyhow::Error::msg)?;
    let in_cluster = kube::Config::incluster().is_ok();
    require_host(&args, in_cluster)?;
    let webhook_secret = args.webhook_secret_file.as_deref().map(webhook_secret).transpose()?;
    let reconcile = reconcile_settings(&args)?;
    let credentials = credentials(&args);
    let timing =
        crate::leader::elect::Timing::new(args.lease_duration, args.lease_renew_deadline, args.lease_retry_period)
            .map_err(anyhow::Error::msg)?;
    let election =
        args.leader_elect.then(|| controller::election(&args.reconcile.instance, args.agent.as_deref(), timing));
    // One writer of replica counts: the push controller (Karmada runs FederatedHPA in the
    // control plane, not in its agents).
    let autoscale = match args.agent {
        Some(_) => {
            tracing::info!("pull-mode agent: applying this member only; autoscaling is left to the push controller");
            None
        }
        None => Some(autoscale(&args)?),
    };
    let previews = previews(&args)?;
    let endpoints = endpoints(&args);
    let failover = args.agent.is_none().then(|| failover(&args)).transpose()?;
    let heartbeat = heartbeat(&args);
    let rollouts = rollouts(&args, in_cluster);
    let ui = ui(&args)?;
    anyhow::ensure!(
        !args.sharding || args.leader_elect,
        "--sharding needs --leader-elect: the fleet-wide loops keep one owner, the fleet's Lease"
    );
    Ok(Config {
        sharding: args.sharding,
        ui,
        rollouts,
        failover,
        heartbeat,
        endpoints,
        previews,
        signing_key: args.writeback_signing_key.clone(),
        git_auth: git_auth(&args),
        cache_dir: args.cache_dir.clone().unwrap_or_else(default_cache_dir),
        repo: args.repo,
        branch: args.branch,
        reconcile,
        credentials,
        host: args.host_kubeconfig.map(|p| (p, args.host_context)),
        election,
        listen: args.listen,
        webhook_listen: args.webhook_listen,
        webhook_secret,
        autoscale,
    })
}

/// Where member credentials come from.
fn credentials(args: &RunArgs) -> Credentials {
    match (&args.kubeconfig, &args.agent) {
        _ if args.member_secrets => Credentials::Secrets { namespace: args.namespace.clone() },
        (Some(path), _) => Credentials::File(path.clone()),
        (None, Some(cluster)) => Credentials::InCluster { cluster: cluster.clone() },
        (None, None) => unreachable!("clap requires --kubeconfig, --member-secrets or --agent"),
    }
}

/// The endpoints loop's settings. Endpoints of multi-cluster Services are collected by
/// the push controller, which reaches every Push member; an agent has none.
fn endpoints(args: &RunArgs) -> Option<crate::endpoints::Settings> {
    args.agent.is_none().then(|| crate::endpoints::Settings {
        decide: crate::endpoints::step::Settings {
            instance: args.reconcile.instance.clone(),
            unreachable_after: args.endpoint_withdraw_after,
            retry: std::time::Duration::from_secs(2),
        },
        probe_interval: std::time::Duration::from_secs(2),
    })
}

/// The fleet page's settings, with `--ui`.
fn ui(args: &RunArgs) -> anyhow::Result<Option<crate::ui::Settings>> {
    let token = args
        .ui
        .then(|| crate::ui::token(args.ui_token_file.as_deref(), &args.listen, args.ui_kubernetes_auth))
        .transpose()?;
    Ok(token.map(|token| crate::ui::Settings { token, kubernetes: args.ui_kubernetes_auth, every: args.ui_refresh }))
}

/// The rollout loop's settings: its state is kept in the host cluster when there is one.
/// A Pull agent follows the push controller's rollouts from the push controller's host
/// cluster (its heartbeat's), or not at all without one.
fn rollouts(args: &RunArgs, in_cluster: bool) -> Option<crate::rollouts::Settings> {
    let (stored, follow) = match &args.agent {
        Some(member) if args.failover.heartbeat_kubeconfig.is_some() => (true, Some(member.clone())),
        Some(_) => {
            tracing::warn!(
                "no --heartbeat-kubeconfig: this agent does not follow rollouts, and a rollout that moves this member halts at its progress deadline"
            );
            return None;
        }
        None => (args.host_kubeconfig.is_some() || in_cluster, None),
    };
    if !stored {
        tracing::info!(
            "no host cluster: rollouts in progress are kept in memory only, and `flotilla rollout` commands cannot reach this instance"
        );
    }
    let (instance, monitor_period) = (args.reconcile.instance.clone(), args.rollout_monitor_period);
    Some(crate::rollouts::Settings { instance, monitor_period, stored, follow, sharded: args.sharding })
}

/// Refuses flags whose state lives in the host cluster when there is none: neither
/// `--host-kubeconfig` nor an in-cluster configuration. Without it they would do nothing
/// while `/status` looked as if all were well.
fn require_host(args: &RunArgs, in_cluster: bool) -> anyhow::Result<()> {
    if args.host_kubeconfig.is_some() || in_cluster {
        return Ok(());
    }
    let needing: Vec<&str> = [
        (args.leader_elect, "--leader-elect (its Lease)"),
        (args.member_secrets, "--member-secrets (the member credentials)"),
        (args.writeback == autoscaler::Writeback::State, "--writeback=state (the replica counts)"),
        (
            args.failover.enable_no_execute_taint_eviction,
            "--enable-no-execute-taint-eviction (its taints and evictions)",
        ),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect();
    anyhow::ensure!(
        needing.is_empty(),
        "{} keeps its state in a host cluster, and there is none: give --host-kubeconfig (and --host-context), \
         or run inside a cluster",
        needing.join(", ")
    );
    Ok(())
}

/// The forge whose pull requests get plans and previews (`--previews`).
fn previews(args: &RunArgs) -> anyhow::Result<Option<crate::previews::Follow>> {
    let p = &args.previews;
    if !p.previews {
        return Ok(None);
    }
    anyhow::ensure!(args.agent.is_none(), "--previews runs in the push controller, not in a pull-mode agent");
    let (Some(kind), Some(api), Some(repo), Some(token_file)) =
        (p.forge, p.forge_api.as_deref(), p.forge_repo.as_deref(), p.forge_token_file.as_deref())
    else {
        unreachable!("clap requires --forge, --forge-api, --forge-repo and --forge-token-file with --previews")
    };
    crate::git::check_transport(api, args.reconcile.trust.insecure_allow_http).map_err(anyhow::Error::msg)?;
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("cannot read the forge token file {}", token_file.display()))?;
    let token = token.trim();
    anyhow::ensure!(!token.is_empty(), "the forge token file {} is empty", token_file.display());
    let forge = crate::forge::Forge::new(kind, api, repo, token)?;
    let step = crate::previews::step::Settings {
        base: args.branch.clone(),
        label: p.preview_label.clone(),
        drafts: p.preview_drafts,
        ttl: p.preview_ttl.as_secs(),
        max_previews: p.max_previews,
    };
    Ok(Some(crate::previews::Follow { forge, step, poll: p.preview_poll_interval }))
}

/// How the reconciler runs: the members, the source, and what the repository may touch.
fn reconcile_settings(args: &RunArgs) -> anyhow::Result<crate::reconciler::Settings> {
    let reconcile = crate::reconciler::Settings {
        path: args.path.clone(),
        interval: args.interval,
        resync: args.resync,
        agent: args.agent.clone(),
        instance: args.reconcile.instance.clone(),
        trust: args.reconcile.trust.trust(),
        concurrency: args.reconcile.concurrency,
        request_timeout: args.reconcile.request_timeout,
        cluster_timeout: args.reconcile.cluster_timeout,
        namespace: args.namespace.clone(),
        replica_state: args.writeback == autoscaler::Writeback::State,
        source: run_source(args),
        adopt: args.reconcile.adopt_inventory,
        acting_as: args.reconcile.service_account.clone(),
        verifier: crate::git::Verifier::new(args.verify_commits.clone(), args.verify_commits_keyring.clone()),
        scope: args.scope.as_deref().map(super::read_scope).transpose()?.map(std::sync::Arc::new),
        admission: flotilla_core::load::Admission { allow_no_execute_taint_policy: args.allow_no_execute_taint_policy },
    };
    if reconcile.scope.is_none() {
        tracing::warn!(
            "no --scope given: the repository has full control of every member (any kind, any namespace); \
             see docs/security.md"
        );
    }
    Ok(reconcile)
}

/// The followed repository as the inventory records it: a URL as given (credentials
/// stripped), a local repository as `apply` names it.
fn run_source(args: &RunArgs) -> flotilla_core::inventory::Source {
    if crate::git::is_url(&args.repo) {
        flotilla_core::inventory::Source::new(&args.repo, &args.branch, &args.path)
    } else {
        let dir = Path::new(&args.repo).join(&args.path);
        crate::git::local_source(&dir, Some(&args.branch))
    }
}

/// The webhook secret: refused when empty, since anyone could sign with an empty key.
fn webhook_secret(path: &Path) -> anyhow::Result<Vec<u8>> {
    let secret = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let secret = secret.trim_ascii().to_vec();
    anyhow::ensure!(
        !secret.is_empty(),
        "the webhook secret file {} is empty: anyone could sign webhooks with an empty key",
        path.display()
    );
    Ok(secret)
}

fn git_auth(args: &RunArgs) -> GitAuth {
    GitAuth {
        username: args.git.git_username.clone(),
        password_file: args.git.git_password_file.clone(),
        ssh_key_file: args.git.git_ssh_key_file.clone(),
        known_hosts_file: args.git.git_known_hosts_file.clone(),
    }
}

fn autoscale(args: &RunArgs) -> anyhow::Result<autoscaler::Settings> {
    let (name, email) = args
        .writeback_author
        .split_once('<')
        .map(|(n, e)| (n.trim().to_owned(), e.trim_end_matches('>').trim().to_owned()))
        .filter(|(n, e)| !n.is_empty() && e.contains('@'))
        .context("--writeback-author must look like `Name <email>`")?;
    Ok(autoscaler::Settings {
        interval: args.autoscale_interval.max(std::time::Duration::from_secs(1)),
        writeback: args.writeback,
        author: (name, email),
        timing: flotilla_core::autoscale::Timing {
            downscale_window: args.downscale_stabilization,
            ..Default::default()
        },
    })
}

/// A pull-mode agent's heartbeat Lease, when it reports to a push controller.
fn heartbeat(args: &RunArgs) -> Option<controller::Heartbeat> {
    let path = args.failover.heartbeat_kubeconfig.clone()?;
    Some(controller::Heartbeat {
        host: (path, args.failover.heartbeat_context.clone()),
        cluster: args.agent.clone().expect("clap requires --agent with --heartbeat-kubeconfig"),
        every: args.failover.heartbeat_interval,
    })
}

/// The failover loop of the push controller, with Karmada's defaults.
fn failover(args: &RunArgs) -> anyhow::Result<crate::failover::Settings> {
    let f = &args.failover;
    // Probes answer once per update period: a grace period shorter than two of them
    // would find members Unknown between two healthy answers.
    anyhow::ensure!(
        f.cluster_monitor_grace_period >= 2 * f.cluster_status_update_frequency,
        "--cluster-monitor-grace-period ({:?}) must be at least twice --cluster-status-update-frequency ({:?})",
        f.cluster_monitor_grace_period,
        f.cluster_status_update_frequency
    );
    Ok(crate::failover::Settings {
        decide: crate::failover::step::Settings {
            failure_threshold: f.cluster_failure_threshold,
            success_threshold: f.cluster_success_threshold,
            monitor_grace: f.cluster_monitor_grace_period,
            startup_grace: f.cluster_startup_grace_period,
            eviction: f.enable_no_execute_taint_eviction,
            eviction_rate: f.eviction_rate.max(0.0),
            graceful_timeout: f.graceful_eviction_timeout,
            unhealthy_threshold: 0.55,
        },
        probe_interval: f.cluster_status_update_frequency.max(std::time::Duration::from_secs(1)),
        monitor_period: f.cluster_monitor_period.max(std::time::Duration::from_secs(1)),
        instance: args.reconcile.instance.clone(),
        namespace: args.namespace.clone(),
        sharded: args.sharding,
    })
}

/// `$XDG_CACHE_HOME/flotilla/repos`, else `~/.cache/flotilla/repos`.
fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
    base.join("flotilla").join("repos")
}
