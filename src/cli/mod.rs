//! The command line. Others script against it: keep it stable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod failover;
mod rollout;
mod run;

pub use failover::FailoverArgs;
pub use rollout::{RolloutAction, RolloutArgs, RolloutCommandArgs, RolloutStatusArgs, StatusFormat};
pub use run::RunArgs;

/// GitOps for fleets of Kubernetes clusters, speaking Karmada's policy API.
#[derive(Debug, Parser)]
#[command(name = "flotilla", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human, env = "FLOTILLA_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Fetch the remote charts HelmCharts pin (`spec.repository`) that the chart cache
    /// does not hold, verifying each against its digest. Without it nothing is fetched:
    /// a render makes no network call.
    #[arg(long, global = true, env = "FLOTILLA_FETCH_CHARTS")]
    pub fetch_charts: bool,
    /// Credentials for private OCI registries, in the file `helm registry login` writes
    /// (a Docker `config.json`). Given to `helm pull` of `oci://` charts only, and only
    /// by whoever runs flotilla: a repository never names credentials.
    #[arg(long, global = true, value_name = "FILE", env = "FLOTILLA_CHART_REGISTRY_CONFIG")]
    pub chart_registry_config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line of this process. Installed as `kubectl-flotilla` (a kubectl
    /// plugin: `kubectl flotilla render …`), its help and errors say so.
    pub fn from_env() -> Self {
        let argv0 = std::env::args_os().next().map(PathBuf::from);
        let plugin = argv0.as_deref().and_then(|p| p.file_name()).is_some_and(|n| n == "kubectl-flotilla");
        let mut command = <Self as clap::CommandFactory>::command();
        if plugin {
            command = command.bin_name("kubectl flotilla");
        }
        let matches = command.get_matches();
        <Self as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Plain text lines.
    Human,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render what every member cluster must run, offline.
    Render(RenderArgs),
    /// Check that a repo loads and every template can be placed.
    Validate(SourceArgs),
    /// What changes in every cluster between two revisions, offline: objects added,
    /// changed (field by field) and removed, and new problems.
    Diff(DiffArgs),
    /// Render, then reconcile every member cluster: server-side apply, prune, drift.
    Apply(ApplyArgs),
    /// List live objects of one kind across member clusters.
    Get(GetArgs),
    /// Health of everything the repo places, per cluster and summed per object.
    Status(StatusArgs),
    /// The controller: follow a Git branch and keep every member cluster reconciled.
    Run(Box<RunArgs>),
    /// Rollouts in waves (RolloutPolicy): where each stands; pause, resume, abort.
    Rollout(RolloutArgs),
    /// Why an object is where it is, offline: the policy that claimed it, each member's
    /// verdict, the replica arithmetic and the overrides applied per member.
    Why(WhyArgs),
    /// The fleet page on a laptop: serve `/ui/` for a repository and its members,
    /// refreshed live (the controller serves the same page on its listener).
    Ui(UiArgs),
    /// A shell completion script on stdout (`source <(flotilla completion bash)`).
    Completion(CompletionArgs),
}

/// `flotilla ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Kubeconfig with one context per member cluster, named after it.
    #[arg(long, value_name = "FILE", env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// Address to serve on. Off loopback, --ui-token-file is required.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// A file holding the token every request must present (`Authorization: Bearer`,
    /// or the cookie `/ui/login` sets).
    #[arg(long, value_name = "FILE", env = "FLOTILLA_UI_TOKEN_FILE")]
    pub ui_token_file: Option<PathBuf>,
    /// How often the repository is rendered again and the members read.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub refresh: Duration,
    /// How long a request to a member may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
    /// The instance whose objects the workload page compares with the members (`live=1`):
    /// an object another instance owns is shown as a conflict.
    #[arg(long, default_value = "default", value_parser = instance_name)]
    pub instance: String,
}

/// `flotilla why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The object: `KIND/NAMESPACE/NAME`, or `KIND/NAME` when cluster-scoped; KIND as
    /// kubectl takes it (`Deployment`, `deployments`, `deploy`, `deployments.apps`).
    pub object: String,
    /// Only these members (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = WhyFormat::Text)]
    pub output: WhyFormat,
}

/// `flotilla why -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WhyFormat {
    /// Lines for a person.
    Text,
    /// The explanation as one JSON object (what the fleet page shows).
    Json,
}

/// `flotilla completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `flotilla status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Repo to render and compare with the clusters (omit with --controller).
    #[arg(required_unless_present = "controller")]
    pub repo: Option<PathBuf>,
    /// Git revision of the repo (as for render).
    #[arg(long = "ref", value_name = "REV")]
    pub rev: Option<String>,
    /// Instead: ask a running controller (`http://ADDR`, its --listen address);
    /// repeat it for every replica of a sharded controller.
    #[arg(long, value_name = "URL", conflicts_with_all = ["repo", "rev"])]
    pub controller: Vec<String>,
    /// Kubeconfig with one context per member cluster, named after it.
    #[arg(long, value_name = "FILE", env = "KUBECONFIG", required_unless_present = "controller")]
    pub kubeconfig: Option<PathBuf>,
    /// Output: a table when unset; `wide` adds columns, `json` and `yaml` give every
    /// object with its health and status in each member (with --controller, the whole
    /// `/status`).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ListFormat>,
    /// How long a request may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
}

/// `-o` of `get` and `status`, as kubectl spells them; a table when unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// The table with more columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `flotilla get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Kind, plural, short name or `plural.group`: pods, deploy, svc, serviceexports…
    pub kind: String,
    /// Namespace (default: `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Label selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Only these clusters (repeatable; default: every context of the kubeconfig).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Kubeconfig with one context per member cluster.
    #[arg(long, value_name = "FILE", env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// Output: the servers' table when unset; `wide` shows every column they offer,
    /// `json` and `yaml` a v1 List of the objects, each annotated with its member
    /// (`resource.karmada.io/cached-from-cluster`, as karmada-search does) and a Secret's
    /// values masked.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ListFormat>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// How long a request may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
}

/// What member credentials and transports may be trusted (`get`, `apply`, `run`).
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Trust kubeconfig credential plugins (exec, auth-provider), which run programs.
    #[arg(long)]
    pub allow_exec_plugins: bool,
    /// Trust kubeconfig clusters that skip TLS verification.
    #[arg(long)]
    pub allow_insecure_tls: bool,
    /// Allow plain-text transports: http:// API servers and, for `run`, git:// and
    /// http:// repositories (no confidentiality or integrity: a network in the middle
    /// reads credentials and changes what is applied).
    #[arg(long)]
    pub insecure_allow_http: bool,
}

impl TrustArgs {
    /// The trust a member client is built with.
    pub fn trust(&self) -> crate::clusters::connect::Trust {
        crate::clusters::connect::Trust {
            exec_plugins: self.allow_exec_plugins,
            insecure_tls: self.allow_insecure_tls,
            insecure_http: self.insecure_allow_http,
        }
    }
}

/// `flotilla apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Kubeconfig with one context per member cluster, named after it.
    #[arg(long, value_name = "FILE", env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// Only these clusters (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Delete even when a render is empty or more than half of a cluster's inventory
    /// would go.
    #[arg(long)]
    pub force_prune: bool,
    #[command(flatten)]
    pub reconcile: ReconcileArgs,
}

/// How `apply` and `run` reconcile clusters.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Name of this flotilla instance: its inventory in each cluster, and the only
    /// objects it will ever delete. Two repos applied to one cluster need two names.
    #[arg(long, default_value = "default", value_parser = instance_name)]
    pub instance: String,
    /// Take over inventories that record another repository, branch or path (once, after
    /// moving this instance to a new source; two repositories need two instance names).
    #[arg(long)]
    pub adopt_inventory: bool,
    /// Write objects as this ServiceAccount (NAMESPACE/NAME) in every member, by
    /// impersonation, so each member's RBAC for it bounds what the repository can do (as
    /// Flux's serviceAccountName). The credentials must allow impersonating it.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = service_account)]
    pub service_account: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Requests in flight per cluster.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// How long one request may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
    /// How long one cluster may take in total.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub cluster_timeout: Duration,
}

/// Where the repo comes from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Repo directory (or a directory inside a Git work tree when --ref is given).
    pub repo: PathBuf,
    /// Read this Git revision (branch, tag or SHA) from the object database instead of
    /// the working tree.
    #[arg(long = "ref", value_name = "REV")]
    pub rev: Option<String>,
    /// Observed cluster capacity, previous placements, live taints and evictions (YAML
    /// or JSON), for dynamic weights, Aggregated division and failover.
    #[arg(long, value_name = "FILE")]
    pub cluster_state: Option<PathBuf>,
    /// What this instance may touch: an Argo CD AppProject (or its spec's fields:
    /// destinations, cluster/namespace resource white- and blacklists). Objects outside
    /// it are problems, never applied or pruned. Without it, the repository has full
    /// control of every member.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_SCOPE")]
    pub scope: Option<PathBuf>,
    /// Admit NoExecute taints in ClusterTaintPolicies (Karmada's webhook flag of the same
    /// name; refused by default: such a taint evicts every workload that does not
    /// tolerate it). A revision that declares one without this does not load.
    #[arg(long, env = "FLOTILLA_ALLOW_NO_EXECUTE_TAINT_POLICY")]
    pub allow_no_execute_taint_policy: bool,
}

impl SourceArgs {
    /// What the repository may declare.
    pub fn admission(&self) -> flotilla_core::load::Admission {
        flotilla_core::load::Admission { allow_no_execute_taint_policy: self.allow_no_execute_taint_policy }
    }
}

/// `flotilla render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub format: Format,
    /// Write `<dir>/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml` instead of stdout.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Only these clusters (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Render as if this member had been unreachable for longer than every toleration,
    /// with eviction on (repeatable); what moves is listed on stderr.
    #[arg(long = "simulate-failure", value_name = "NAME")]
    pub simulate_failure: Vec<String>,
    /// Render the fleet as it stands after the first N batches of each rollout
    /// (RolloutPolicy) of the change from `--from`, as if each soaked and passed: the
    /// batches `flotilla diff` numbers (0: before the first moves).
    #[arg(long, value_name = "N", conflicts_with = "simulate_failure")]
    pub wave: Option<usize>,
    /// The revision the rollouts start from, with --wave (default: the parent of --ref,
    /// or HEAD when rendering the working tree).
    #[arg(long, value_name = "REV", requires = "wave")]
    pub from: Option<String>,
    /// Print the resource templates as loaded, before placement (plain manifests and what
    /// every chart and kustomization renders), each with the file it comes from.
    #[arg(long, conflicts_with_all = ["wave", "simulate_failure", "out_dir", "clusters"])]
    pub templates: bool,
}

/// `flotilla diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Repo directory inside a Git work tree (or the repository itself).
    pub repo: PathBuf,
    /// The earlier revision (branch, tag or SHA).
    #[arg(long, value_name = "REV", required_unless_present = "live", conflicts_with = "live")]
    pub from: Option<String>,
    /// The later revision.
    #[arg(long, value_name = "REV")]
    pub to: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Only these clusters (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Exit 1 when anything differs (2 stays for input that does not load).
    #[arg(long)]
    pub exit_code: bool,
    /// Render both revisions within this scope (see `flotilla apply --help`).
    #[arg(long, value_name = "FILE")]
    pub scope: Option<PathBuf>,
    /// Admit NoExecute taints in ClusterTaintPolicies (Karmada's webhook flag of the same
    /// name; refused by default: such a taint evicts every workload that does not
    /// tolerate it). A revision that declares one without this does not load.
    #[arg(long, env = "FLOTILLA_ALLOW_NO_EXECUTE_TAINT_POLICY")]
    pub allow_no_execute_taint_policy: bool,
    /// Also write the whole diff as JSON here (a markdown comment that runs over its
    /// budget points to it).
    #[arg(long, value_name = "FILE")]
    pub plan_file: Option<PathBuf>,
    /// Compare with `--to` as it would run had these members failed for longer than
    /// every toleration (repeatable; see `flotilla render --simulate-failure`). With
    /// `--from` and `--to` the same revision, the diff is what the failure moves.
    #[arg(long = "simulate-failure", value_name = "NAME", requires = "from")]
    pub simulate_failure: Vec<String>,
    /// Compare `--to` with the members as they are now instead of with `--from`: what
    /// `flotilla apply` of it would change, drift included (server-side apply dry runs,
    /// nothing written).
    #[arg(long, requires = "kubeconfig")]
    pub live: bool,
    /// Kubeconfig with one context per member cluster (`--live`).
    #[arg(long, value_name = "FILE", env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub reconcile: ReconcileArgs,
}

/// `flotilla diff` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Per cluster, one line per object and one per changed field.
    Text,
    /// `{"from", "to", "clusters": {NAME: {"added", "changed", "removed"}}, "problems"}`.
    Json,
    /// A pull-request comment: summary table, collapsible diffs, under 60,000 characters.
    Markdown,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A YAML stream per cluster.
    Yaml,
    /// One JSON object: `{"revision", "clusters", "problems"}`.
    Json,
}

/// `NAMESPACE/NAME` → the user a ServiceAccount authenticates as.
fn service_account(value: &str) -> Result<String, String> {
    let valid = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    match value.split_once('/') {
        Some((namespace, name)) if valid(namespace) && valid(name) => {
            Ok(format!("system:serviceaccount:{namespace}:{name}"))
        }
        _ => Err("expected NAMESPACE/NAME of a ServiceAccount".into()),
    }
}

/// Instance names become part of a ConfigMap name: a DNS label of at most 40 characters.
fn instance_name(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 40
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok { Ok(value.to_owned()) } else { Err("must be lowercase letters, digits and '-', at most 40".into()) }
}

/// A duration as Kubernetes tools write them (Go's `time.ParseDuration`): `30s`,
/// `1.5h`, `2h45m`; a bare number is seconds, as these flags took before.
pub fn duration(text: &str) -> Result<Duration, String> {
    flotilla_core::model::duration::parse(text)
}
