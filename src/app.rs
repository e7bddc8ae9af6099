//! One small function per subcommand: gather inputs from the edges, call the pure
//! pipeline, print.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use flotilla_core::model::{ClusterState, Limits, Plan};
use serde_json::Value;
use tracing::{info, warn};

use crate::cli::{ApplyArgs, Cli, Command, Format, GetArgs, RenderArgs, RunArgs, SourceArgs, StatusArgs};
use crate::clusters;
use crate::output;
use crate::source;

/// How a successful run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything rendered.
    Clean,
    /// The run worked but found problems (exit 1).
    Problems,
}

impl Outcome {
    /// 0 or 1.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Clean => ExitCode::SUCCESS,
            Outcome::Problems => ExitCode::from(1),
        }
    }
}

/// Runs a subcommand. Errors mean invalid input or usage (exit 2).
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Render(args) => render(args),
        Command::Validate(args) => validate(args),
        Command::Apply(args) => apply(args),
        Command::Get(args) => get(args),
        Command::Status(args) => status(args),
        Command::Run(args) => run_controller(*args),
    }
}

/// The error with its causes, `a: b: c`.
pub fn describe(err: &anyhow::Error) -> String {
    format!("{err:#}")
}

fn plan(args: &SourceArgs) -> anyhow::Result<Plan> {
    let limits = Limits::default();
    let files = source::read(&args.repo, args.rev.as_deref(), &limits)?;
    let state = match &args.cluster_state {
        Some(path) => read_state(path)?,
        None => ClusterState::default(),
    };
    let plan = flotilla_core::plan(&files, &state, &limits)?;
    for key in &plan.unclaimed {
        warn!(object = %key, "no PropagationPolicy claims this template; it goes nowhere");
    }
    Ok(plan)
}

fn read_state(path: &Path) -> anyhow::Result<ClusterState> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("{} is not a valid cluster state", path.display()))
}

fn report(plan: &Plan) -> Outcome {
    for p in &plan.problems {
        let at = p.cluster.as_deref().map(|c| format!(" in cluster {c}")).unwrap_or_default();
        eprintln!("problem: {}{at} ({}:{}): {}", p.object, p.origin.file, p.origin.line, p.message);
    }
    if plan.problems.is_empty() { Outcome::Clean } else { Outcome::Problems }
}

fn render(args: RenderArgs) -> anyhow::Result<Outcome> {
    let plan = plan(&args.source)?;
    if let Some(unknown) = args.clusters.iter().find(|c| !plan.clusters.contains_key(*c)) {
        bail!("cluster {unknown} is not declared in the repository (no cluster.karmada.io/v1alpha1 Cluster named so)");
    }
    let view = plan.view(&args.clusters);
    match (&args.out_dir, args.format) {
        (Some(dir), _) => output::write_dir(&plan, &view, dir)?,
        (None, Format::Json) => {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, &view).context("cannot write the plan")?;
            writeln!(stdout)?;
        }
        (None, Format::Yaml) => output::write_yaml(&plan, &view, &mut std::io::stdout().lock())?,
    }
    Ok(report(&plan))
}

fn validate(args: SourceArgs) -> anyhow::Result<Outcome> {
    let plan = plan(&args)?;
    let l = &plan.loaded;
    info!(
        revision = %plan.revision,
        templates = l.templates.len(),
        propagation_policies = l.propagation_policies.len(),
        override_policies = l.override_policies.len(),
        clusters = l.clusters.len(),
        "repository is valid"
    );
    Ok(report(&plan))
}

fn apply(args: ApplyArgs) -> anyhow::Result<Outcome> {
    // Rendering first: a repo that does not load changes nothing in any cluster.
    let plan = plan(&args.source)?;
    let kubeconfig = clusters::connect::read(&args.kubeconfig)?;
    let names: Vec<String> = if args.clusters.is_empty() {
        let (push, pull) = clusters::by_sync_mode(&plan);
        for name in pull {
            println!(
                "{name}: skipped (syncMode Pull: its agent applies it; name it with --cluster to apply from here)"
            );
        }
        push
    } else {
        if let Some(unknown) = args.clusters.iter().find(|c| !plan.clusters.contains_key(*c)) {
            bail!("cluster {unknown} is not declared in the repository");
        }
        args.clusters.clone()
    };
    let pool = clusters::connect::Pool::default();
    let options = clusters::Options {
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        pool: &pool,
        instance: &args.reconcile.instance,
        trust: clusters::connect::Trust {
            exec_plugins: args.reconcile.allow_exec_plugins,
            insecure_tls: args.reconcile.allow_insecure_tls,
        },
        budget: flotilla_core::diff::PruneBudget { force: args.force_prune, ..Default::default() },
        concurrency: args.reconcile.concurrency,
        request_timeout: std::time::Duration::from_secs(args.reconcile.request_timeout),
        cluster_timeout: std::time::Duration::from_secs(args.reconcile.cluster_timeout),
    };
    let outcomes = runtime()?.block_on(clusters::reconcile_all(&plan, &kubeconfig, &names, options));
    let mut outcome = report(&plan);
    for (cluster, result) in outcomes {
        match result {
            Ok(r) => {
                println!("{cluster}: {}", r.summary());
                for (key, why) in &r.failed {
                    eprintln!("error: {cluster}: {key}: {why}");
                }
                if let Some(refused) = &r.prune_refused {
                    eprintln!("warning: {cluster}: {refused}");
                }
                if !r.failed.is_empty() || r.prune_refused.is_some() {
                    outcome = Outcome::Problems;
                }
            }
            Err(e) => {
                println!("{cluster}: failed");
                eprintln!("error: {cluster}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    Ok(outcome)
}

fn get(args: GetArgs) -> anyhow::Result<Outcome> {
    let kubeconfig = clusters::connect::read(&args.kubeconfig)?;
    let names: Vec<String> = if args.clusters.is_empty() {
        kubeconfig.contexts.iter().map(|c| c.name.clone()).collect()
    } else {
        args.clusters.clone()
    };
    let trust =
        clusters::connect::Trust { exec_plugins: args.allow_exec_plugins, insecure_tls: args.allow_insecure_tls };
    let timeout = std::time::Duration::from_secs(args.request_timeout);
    let namespace =
        if args.all_namespaces { None } else { Some(args.namespace.clone().unwrap_or_else(|| "default".into())) };
    let query = clusters::get::Query { kind: args.kind.clone(), namespace, selector: args.selector.clone() };
    let query = &query;
    let results = runtime()?.block_on(clusters::each(&kubeconfig, &names, trust, timeout, |client, _| async move {
        clusters::get::list(&client, query).await
    }));
    let mut outcome = Outcome::Clean;
    let mut listings = Vec::new();
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(Some(listing)) => listings.push((name, listing)),
            Ok(None) => eprintln!("note: {name} does not serve {:?}", args.kind),
            Err(e) => {
                eprintln!("error: {name}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    let table = clusters::get::format(&listings, args.all_namespaces);
    if table.lines().count() <= 1 && outcome == Outcome::Clean {
        eprintln!("No resources found");
    } else {
        print!("{table}");
    }
    Ok(outcome)
}

fn status(args: StatusArgs) -> anyhow::Result<Outcome> {
    if let Some(url) = &args.controller {
        return controller_status(url, args.request_timeout);
    }
    let source =
        SourceArgs { repo: args.repo.clone().expect("clap requires it"), rev: args.rev.clone(), cluster_state: None };
    let plan = plan(&source)?;
    let kubeconfig = clusters::connect::read(args.kubeconfig.as_deref().expect("clap requires it"))?;
    let timeout = std::time::Duration::from_secs(args.request_timeout);
    let names: Vec<String> = plan.loaded.clusters.iter().map(|c| c.name.clone()).collect();
    let trust = clusters::connect::Trust::default();
    let plan_ref = &plan;
    let results = runtime()?.block_on(clusters::each(&kubeconfig, &names, trust, timeout, |client, name| async move {
        clusters::status::observe_cluster(&client, plan_ref, name).await
    }));
    let mut outcome = report(&plan);
    let mut observed = Vec::new();
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(o) => observed.push((name, o)),
            Err(e) => {
                eprintln!("error: {name}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    let (table, healthy) = clusters::status::table(&observed);
    print!("{table}");
    if !healthy {
        outcome = Outcome::Problems;
    }
    Ok(outcome)
}

/// The async runtime for commands that talk to clusters.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")
}

fn run_controller(args: RunArgs) -> anyhow::Result<Outcome> {
    let webhook_secret = match &args.webhook_secret_file {
        Some(path) => {
            let secret = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(secret.trim_ascii().to_vec())
        }
        None => None,
    };
    let cache_dir = args.cache_dir.clone().unwrap_or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        base.join("flotilla").join("repos")
    });
    let git_auth = crate::controller::git::GitAuth {
        username: args.git.git_username.clone(),
        password_file: args.git.git_password_file.clone(),
        ssh_key_file: args.git.git_ssh_key_file.clone(),
        known_hosts_file: args.git.git_known_hosts_file.clone(),
    };
    let (name, email) = args
        .writeback_author
        .split_once('<')
        .map(|(n, e)| (n.trim().to_owned(), e.trim_end_matches('>').trim().to_owned()))
        .filter(|(n, e)| !n.is_empty() && e.contains('@'))
        .context("--writeback-author must look like `Name <email>`")?;
    let autoscale = crate::autoscaler::Settings {
        interval: std::time::Duration::from_secs(args.autoscale_interval.max(1)),
        writeback: args.writeback,
        author: (name, email),
        timing: flotilla_core::autoscale::Timing {
            downscale_window: args.downscale_stabilization,
            ..Default::default()
        },
    };
    let config = crate::controller::Config {
        autoscale,
        git_auth,
        repo: args.repo,
        branch: args.branch,
        path: args.path,
        interval: std::time::Duration::from_secs(args.interval),
        resync: std::time::Duration::from_secs(args.resync),
        members: match (args.kubeconfig.clone(), &args.agent) {
            _ if args.member_secrets => crate::controller::Members::Secrets,
            (Some(path), _) => crate::controller::Members::File(path),
            (None, Some(_)) => crate::controller::Members::InCluster,
            (None, None) => unreachable!("clap requires --kubeconfig, --member-secrets or --agent"),
        },
        agent: args.agent.clone(),
        host: args.host_kubeconfig.clone().map(|p| (p, args.host_context.clone())),
        namespace: args.namespace.clone(),
        listen: args.listen,
        cache_dir,
        webhook_secret,
        instance: args.reconcile.instance.clone(),
        trust: clusters::connect::Trust {
            exec_plugins: args.reconcile.allow_exec_plugins,
            insecure_tls: args.reconcile.allow_insecure_tls,
        },
        concurrency: args.reconcile.concurrency,
        request_timeout: std::time::Duration::from_secs(args.reconcile.request_timeout),
        cluster_timeout: std::time::Duration::from_secs(args.reconcile.cluster_timeout),
        election: args.leader_elect.then(|| crate::controller::Election {
            // An agent's Lease differs from its push controller's, should both share a
            // host cluster and an instance name.
            name: match &args.agent {
                Some(cluster) => format!("flotilla-{}-agent-{cluster}", args.reconcile.instance),
                None => format!("flotilla-{}", args.reconcile.instance),
            },
            duration: args.lease_duration,
        }),
    };
    runtime()?.block_on(crate::controller::run(config))?;
    Ok(Outcome::Clean)
}

/// Prints what a running controller reports at `/status`; exit 1 unless the newest
/// revision is applied everywhere.
fn controller_status(url: &str, timeout: u64) -> anyhow::Result<Outcome> {
    let uri: http::Uri = format!("{}/status", url.trim_end_matches('/')).parse().context("invalid --controller URL")?;
    let body = runtime()?.block_on(async {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Empty<axum::body::Bytes>>();
        let get = tokio::time::timeout(std::time::Duration::from_secs(timeout), client.get(uri.clone()));
        let response =
            get.await.context("the controller did not answer in time")?.context("cannot reach the controller")?;
        anyhow::ensure!(response.status().is_success(), "the controller answered {}", response.status());
        let bytes =
            http_body_util::BodyExt::collect(response.into_body()).await.context("reading the answer")?.to_bytes();
        anyhow::Ok(bytes)
    })?;
    let status: Value = serde_json::from_slice(&body).context("the controller's /status is not JSON")?;
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    println!("head      {}", text(&status["head"]));
    println!("applied   {}", text(&status["applied"]));
    println!("error     {}", text(&status["error"]));
    let mut healthy = status["head"] == status["applied"] && status["error"].is_null();
    for (cluster, line) in status["clusters"].as_object().into_iter().flatten() {
        let line = text(line);
        healthy &= !line.contains(": failed");
        println!("{cluster:<12}{line}");
    }
    for (name, a) in status["autoscalers"].as_object().into_iter().flatten() {
        let number = |v: &Value| v.as_i64().map_or("-".to_owned(), |n| n.to_string());
        println!(
            "{name}  target {}  replicas {} → {}  last scale {}",
            text(&a["target"]),
            number(&a["currentReplicas"]),
            number(&a["desiredReplicas"]),
            text(&a["lastScaleTime"])
        );
        for m in a["currentMetrics"].as_array().into_iter().flatten() {
            match m["averageUtilization"].as_i64() {
                Some(u) => {
                    println!("    {} {u}% of request (recommends {})", text(&m["name"]), number(&m["recommends"]))
                }
                None => println!(
                    "    {} {}m per pod (recommends {})",
                    text(&m["name"]),
                    number(&m["averageMilli"]),
                    number(&m["recommends"])
                ),
            }
        }
        for c in a["conditions"].as_array().into_iter().flatten() {
            println!("    {} {} {}: {}", text(&c["type"]), text(&c["status"]), text(&c["reason"]), text(&c["message"]));
        }
        if let Some(message) = a["message"].as_str() {
            println!("    {message}");
        }
        for (rule, r) in a["rules"].as_object().into_iter().flatten() {
            println!("    rule {rule}: next {}", text(&r["nextExecutionTime"]));
            for run in
                r["successful"].as_array().into_iter().flatten().chain(r["failed"].as_array().into_iter().flatten())
            {
                println!("      {}", text(run));
            }
        }
    }
    Ok(if healthy { Outcome::Clean } else { Outcome::Problems })
}
