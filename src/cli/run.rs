//! The flags of `flotilla run`: the controller and its agents.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{ReconcileArgs, duration};
/// `flotilla run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Repository: a URL (`file://`, `git://`) fetched into a cache, or a local path.
    #[arg(long, env = "FLOTILLA_REPO")]
    pub repo: String,
    /// Branch to follow.
    #[arg(long, default_value = "main", env = "FLOTILLA_BRANCH")]
    pub branch: String,
    /// Subdirectory of the repository holding the fleet.
    #[arg(long, default_value = "", env = "FLOTILLA_PATH")]
    pub path: String,
    /// Apply only heads signed with an SSH key listed in this allowed-signers file
    /// (ssh-keygen's format, as Git's `gpg.ssh.allowedSignersFile`); an unsigned or
    /// unknown head is not applied and the last good revision stays. List the
    /// write-back key too (`--writeback-signing-key`).
    #[arg(long, value_name = "ALLOWED_SIGNERS")]
    pub verify_commits: Option<PathBuf>,
    /// Apply only heads signed with an OpenPGP key of this keyring (`gpg --export`,
    /// armored or binary); with `--verify-commits`, either kind of signature passes.
    #[arg(long, value_name = "KEYRING")]
    pub verify_commits_keyring: Option<PathBuf>,
    /// Sign write-back commits with this SSH private key (as `git commit -S` with
    /// `gpg.format ssh`), so they pass `--verify-commits`.
    #[arg(long, value_name = "FILE")]
    pub writeback_signing_key: Option<PathBuf>,
    /// What this instance may touch (see `flotilla apply --help`); a ConfigMap or
    /// Secret in the controller's namespace, mounted as a file, in-cluster.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_SCOPE")]
    pub scope: Option<PathBuf>,
    /// Admit NoExecute taints in ClusterTaintPolicies (Karmada's webhook flag of the same
    /// name; refused by default: such a taint evicts every workload that does not
    /// tolerate it). A revision that declares one without this does not load.
    #[arg(long, env = "FLOTILLA_ALLOW_NO_EXECUTE_TAINT_POLICY")]
    pub allow_no_execute_taint_policy: bool,
    /// How often a rollout in progress observes its members, reads its gates and looks
    /// for `flotilla rollout` commands: a failing gate or member halts it within one
    /// period (docs/rollouts.md).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub rollout_monitor_period: Duration,
    /// Time between fetches (`30s`, `5m`, `1h`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub interval: Duration,
    /// Time between reconciles when Git does not move (drift correction).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub resync: Duration,
    /// Kubeconfig with one context per member cluster (re-read every cycle). With
    /// --agent and without this, the member is the cluster the agent runs in.
    #[arg(long, value_name = "FILE", env = "KUBECONFIG", required_unless_present_any = ["member_secrets", "agent"])]
    pub kubeconfig: Option<PathBuf>,
    /// Take member credentials from Secrets in --namespace of the host cluster, one per
    /// member, labelled `flotilla.dev/cluster=<name>`, holding a kubeconfig under `kubeconfig`.
    #[arg(long, conflicts_with = "agent")]
    pub member_secrets: bool,
    /// Pull mode: run as the agent of this one member (declared `syncMode: Pull`),
    /// applying only its share, usually from inside it. Push controllers never contact
    /// Pull members; agents do not run the autoscaler.
    #[arg(long, value_name = "CLUSTER")]
    pub agent: Option<String>,
    /// Address for /healthz, /readyz, /metrics, /status (and webhooks, unless
    /// --webhook-listen serves them apart).
    #[arg(long, default_value = "127.0.0.1:8080", env = "FLOTILLA_LISTEN")]
    pub listen: String,
    /// Serve webhooks on this address only, so exposing them (an Ingress) does not
    /// expose /status and /metrics.
    #[arg(long, value_name = "ADDR", env = "FLOTILLA_WEBHOOK_LISTEN", requires = "webhook_secret_file")]
    pub webhook_listen: Option<String>,
    /// File holding the webhook secret (HMAC key / GitLab token); without it webhooks are off.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Serve the fleet page at /ui/ on --listen (never on --webhook-listen): members,
    /// objects, placement and why, rollouts, failover and services, live.
    #[arg(long, env = "FLOTILLA_UI")]
    pub ui: bool,
    /// File holding the fleet page's bearer token; required when --listen is not a
    /// loopback address.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_UI_TOKEN_FILE", requires = "ui")]
    pub ui_token_file: Option<PathBuf>,
    /// Also accept a Kubernetes bearer token on the fleet page: the host cluster reviews
    /// it (TokenReview), and its user must be allowed to `get` `fleets.flotilla.dev`
    /// named after --instance in --namespace (SubjectAccessReview).
    #[arg(long, env = "FLOTILLA_UI_KUBERNETES_AUTH", requires = "ui")]
    pub ui_kubernetes_auth: bool,
    /// How often the fleet page reads the members for health and ready replicas (a new
    /// render shows at once).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub ui_refresh: Duration,
    /// Where fetched repositories are cached.
    #[arg(long, value_name = "DIR", env = "FLOTILLA_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub git: GitArgs,
    #[command(flatten)]
    pub reconcile: ReconcileArgs,
    /// Run only while holding a Lease in the host cluster, so replicas can stand by.
    #[arg(long)]
    pub leader_elect: bool,
    /// Share the members among the replicas (with --leader-elect): each live replica
    /// holds a membership Lease and applies the members rendezvous hashing gives it,
    /// fenced as the leader is; the fleet-wide loops (autoscaler, previews, failover,
    /// rollouts, services) stay on the leader.
    #[arg(long, env = "FLOTILLA_SHARDING")]
    pub sharding: bool,
    /// Kubeconfig of the host cluster that holds the Lease (default: in-cluster config).
    #[arg(long, value_name = "FILE")]
    pub host_kubeconfig: Option<PathBuf>,
    /// Context of the host kubeconfig.
    #[arg(long, value_name = "NAME", requires = "host_kubeconfig")]
    pub host_context: Option<String>,
    /// The controller's namespace in the host cluster: its Lease and member Secrets.
    #[arg(long, alias = "lease-namespace", default_value = "flotilla-system", env = "POD_NAMESPACE")]
    pub namespace: String,
    /// How long a lease stays valid without renewal; a standby takes over after it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration)]
    pub lease_duration: Duration,
    /// How long the leader keeps leading (and writing) without renewing the lease; it
    /// stops before a standby may take over (default: two thirds of --lease-duration).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub lease_renew_deadline: Option<Duration>,
    /// Time between attempts to acquire or renew the lease (default: 2/15 of
    /// --lease-duration, as client-go's 2s of 15s).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub lease_retry_period: Option<Duration>,
    /// Time between autoscaler syncs (FederatedHPA and CronFederatedHPA).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration)]
    pub autoscale_interval: Duration,
    /// Multi-cluster Services: a provider member that has not answered its probe (every
    /// 2 s) for this long has its endpoints withdrawn from the consumers' slices.
    #[arg(long, value_name = "DURATION", default_value = "6s", value_parser = duration)]
    pub endpoint_withdraw_after: Duration,
    /// Where autoscaler decisions go: a commit to the branch, a ConfigMap in the host
    /// cluster that renders read, or nowhere (report only).
    #[arg(long, value_enum, default_value = "git")]
    pub writeback: crate::autoscaler::Writeback,
    /// Author of write-back commits, `Name <email>`.
    #[arg(long, value_name = "IDENTITY", default_value = "flotilla-autoscaler <autoscaler@flotilla.invalid>")]
    pub writeback_author: String,
    /// Seconds a scale-down waits for (without `behavior.scaleDown.stabilizationWindowSeconds`).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub downscale_stabilization: i64,
    #[command(flatten)]
    pub previews: PreviewArgs,
    #[command(flatten)]
    pub failover: super::FailoverArgs,
}

/// Pull-request plans and preview environments (`--previews`).
#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// Follow the pull requests of the repository on a forge: a plan comment and
    /// statuses on every new head, and preview environments for labelled ones.
    #[arg(long, requires_all = ["forge", "forge_api", "forge_repo", "forge_token_file"])]
    pub previews: bool,
    /// Which forge the repository is on.
    #[arg(long, value_enum)]
    pub forge: Option<crate::forge::Kind>,
    /// The forge's API root: `https://api.github.com`, `https://gitlab.example/api/v4`,
    /// `https://gitea.example/api/v1`.
    #[arg(long, value_name = "URL")]
    pub forge_api: Option<String>,
    /// The repository on the forge: `owner/name` (GitLab: the project's path or id).
    #[arg(long, value_name = "OWNER/NAME")]
    pub forge_repo: Option<String>,
    /// File holding the forge token (comments and statuses; read access to the repository).
    #[arg(long, value_name = "FILE")]
    pub forge_token_file: Option<PathBuf>,
    /// The label that asks for a preview environment.
    #[arg(long, default_value = "preview")]
    pub preview_label: String,
    /// A preview without a push for this long is removed.
    #[arg(long, value_name = "DURATION", default_value = "168h", value_parser = duration)]
    pub preview_ttl: Duration,
    /// Previews running at once; more wait for a free slot (their plans are posted).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_previews: usize,
    /// Plan draft pull requests too.
    #[arg(long)]
    pub preview_drafts: bool,
    /// Time between polls of the forge (webhooks make changes arrive at once).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub preview_poll_interval: Duration,
}

/// Credentials for a remote repository, read from files (mount a Secret there). https
/// remotes are verified against the system's CAs; point `SSL_CERT_FILE` at a PEM bundle
/// to trust a private CA (OpenSSL's own variable).
#[derive(Debug, Args)]
pub struct GitArgs {
    /// User name for https remotes (default: from the URL, else `git`).
    #[arg(long, value_name = "NAME", env = "FLOTILLA_GIT_USERNAME")]
    pub git_username: Option<String>,
    /// File holding the password or access token for https remotes.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_GIT_PASSWORD_FILE")]
    pub git_password_file: Option<PathBuf>,
    /// Private key for ssh remotes (no passphrase).
    #[arg(long, value_name = "FILE", env = "FLOTILLA_GIT_SSH_KEY_FILE")]
    pub git_ssh_key_file: Option<PathBuf>,
    /// known_hosts listing the ssh server's key; required for ssh remotes.
    #[arg(long, value_name = "FILE", env = "FLOTILLA_GIT_KNOWN_HOSTS_FILE")]
    pub git_known_hosts_file: Option<PathBuf>,
}
