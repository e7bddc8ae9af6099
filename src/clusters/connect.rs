//! Member-cluster clients from a kubeconfig: one context per Cluster, named after it.
//! Credentials are crown jewels: exec and auth-provider plugins (which run programs) and
//! skipped TLS verification are refused unless explicitly allowed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::apply::Served;

/// What a kubeconfig may use.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trust {
    /// Allow `exec` and `auth-provider` credential plugins.
    pub exec_plugins: bool,
    /// Allow `insecure-skip-tls-verify`.
    pub insecure_tls: bool,
    /// Allow `http://` API servers (credentials and manifests in clear).
    pub insecure_http: bool,
}

/// Why a cluster could not be connected. Messages name the cluster and context only.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read.
    #[error("cannot read kubeconfig {0}")]
    Read(String, #[source] kube::config::KubeconfigError),
    /// No context named after the cluster.
    #[error("cluster {0}: no kubeconfig context named {0}")]
    NoContext(String),
    /// A credential plugin that runs a program.
    #[error("cluster {0}: the kubeconfig user runs a credential plugin; pass --allow-exec-plugins to trust it")]
    ExecPlugin(String),
    /// TLS verification is switched off.
    #[error("cluster {0}: the kubeconfig skips TLS verification; pass --allow-insecure-tls to trust it")]
    InsecureTls(String),
    /// The API server is reached over plain HTTP.
    #[error(
        "cluster {0}: the API server is http://, which sends credentials in clear; pass --insecure-allow-http to trust it"
    )]
    PlainHttp(String),
    /// The context did not make a client.
    #[error("cluster {0}: invalid kubeconfig context")]
    Invalid(String, #[source] kube::config::KubeconfigError),
    /// The client could not be built.
    #[error("cluster {0}: cannot build a client")]
    Client(String, #[source] kube::Error),
}

/// Reads a kubeconfig file.
pub fn read(path: &Path) -> Result<Kubeconfig, ConnectError> {
    Kubeconfig::read_from(path).map_err(|e| ConnectError::Read(path.display().to_string(), e))
}

/// Member clients kept from one use to the next: one per cluster, rebuilt only when
/// that cluster's kubeconfig entry (its context, server and user) or the trust and
/// timeouts change. Reusing a client reuses its connections and TLS sessions; a
/// long-running controller that built fresh clients every cycle left the old clients'
/// connection tasks and buffers behind, and its memory crept up.
///
/// Beside each member's own client the pool keeps what that member serves
/// ([`Served`]), so a run resolves kinds without discovery requests; a rebuilt client
/// (a changed entry) starts with nothing kept.
#[derive(Default)]
pub struct Pool {
    made: Mutex<HashMap<String, Made>>,
    /// Held while a client is built, so loops that ask for the same member at once
    /// (the reconcile loop and the failover probe, at start) build it once.
    building: tokio::sync::Mutex<()>,
    /// Clients built; the controller exports it as `flotilla_member_clients_built_total`.
    built: prometheus_client::metrics::counter::Counter,
}

/// A kept client: the digest of its entry, the client, and what its member serves.
type Made = ([u8; 32], Client, Arc<Served>);

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("clients", &self.len()).finish()
    }
}

impl Pool {
    /// A client for `cluster`: the kept one when its entry is unchanged, else a new one
    /// (kept in its place). Failures are not kept: the next call tries again.
    pub async fn client(
        &self,
        kubeconfig: &Kubeconfig,
        cluster: &str,
        trust: Trust,
        timeout: Duration,
        acting_as: Option<&str>,
    ) -> Result<Client, ConnectError> {
        let entry = entry(kubeconfig, cluster, trust, timeout);
        let slot = match acting_as {
            Some(user) => format!("{cluster} as {user}"),
            None => cluster.to_owned(),
        };
        let kept = || {
            let made = self.made.lock().expect("client pool lock");
            made.get(&slot).filter(|(seen, ..)| *seen == entry).map(|(_, client, _)| client.clone())
        };
        if let Some(client) = kept() {
            return Ok(client);
        }
        let _building = self.building.lock().await;
        if let Some(client) = kept() {
            return Ok(client);
        }
        let made = client(kubeconfig, cluster, trust, timeout, acting_as).await?;
        self.built.inc();
        self.made.lock().expect("client pool lock").insert(slot, (entry, made.clone(), Arc::default()));
        Ok(made)
    }

    /// What `cluster` serves, as its kept client last read it (none before a client
    /// for it was made).
    pub fn served(&self, cluster: &str) -> Option<Arc<Served>> {
        self.made.lock().expect("client pool lock").get(cluster).map(|(.., served)| served.clone())
    }

    /// Drops the clients of clusters the kubeconfig no longer names.
    pub fn retain(&self, kubeconfig: &Kubeconfig) {
        self.made.lock().expect("client pool lock").retain(|slot, _| {
            let name = slot.split_once(" as ").map_or(slot.as_str(), |(name, _)| name);
            kubeconfig.contexts.iter().any(|c| c.name == name)
        });
    }

    fn len(&self) -> usize {
        self.made.lock().expect("client pool lock").len()
    }

    /// An empty pool that counts the clients it builds in `built` (a metric).
    pub fn counting(built: prometheus_client::metrics::counter::Counter) -> Self {
        Pool { made: Mutex::default(), building: tokio::sync::Mutex::default(), built }
    }

    /// Clients built so far.
    #[cfg(test)]
    fn built(&self) -> u64 {
        self.built.get()
    }
}

/// A digest of everything a client for `cluster` is built from: its context, the
/// cluster and user that context names, the trust and the timeout. A digest, so the
/// pool keeps no second copy of the credentials.
fn entry(kubeconfig: &Kubeconfig, cluster: &str, trust: Trust, timeout: Duration) -> [u8; 32] {
    use sha2::Digest;
    let context = kubeconfig.contexts.iter().find(|c| c.name == cluster).and_then(|c| c.context.as_ref());
    let server = context.and_then(|x| kubeconfig.clusters.iter().find(|c| c.name == x.cluster));
    let user = context.and_then(|x| x.user.as_deref()).and_then(|u| kubeconfig.auth_infos.iter().find(|a| a.name == u));
    let described = serde_json::json!({
        "context": context,
        "cluster": server,
        "user": user,
        "trust": [trust.exec_plugins, trust.insecure_tls],
        "timeout": timeout.as_millis() as u64,
    });
    sha2::Sha256::digest(described.to_string().as_bytes()).into()
}

/// A client for `cluster` through the context of the same name, after the trust checks;
/// with `acting_as`, every request impersonates that user (`Impersonate-User`), so the
/// member's own RBAC for that user bounds what the client can do.
pub async fn client(
    kubeconfig: &Kubeconfig,
    cluster: &str,
    trust: Trust,
    timeout: Duration,
    acting_as: Option<&str>,
) -> Result<Client, ConnectError> {
    let name = || cluster.to_owned();
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| ConnectError::NoContext(name()))?;
    let user = context
        .user
        .as_deref()
        .and_then(|u| kubeconfig.auth_infos.iter().find(|a| a.name == u))
        .and_then(|a| a.auth_info.as_ref());
    if !trust.exec_plugins && user.is_some_and(|u| u.exec.is_some() || u.auth_provider.is_some()) {
        return Err(ConnectError::ExecPlugin(name()));
    }
    let server = kubeconfig.clusters.iter().find(|c| c.name == context.cluster).and_then(|c| c.cluster.as_ref());
    if !trust.insecure_tls && server.is_some_and(|s| s.insecure_skip_tls_verify == Some(true)) {
        return Err(ConnectError::InsecureTls(name()));
    }
    let plain = server.and_then(|s| s.server.as_deref()).is_some_and(|url| url.starts_with("http://"));
    if !trust.insecure_http && plain {
        return Err(ConnectError::PlainHttp(name()));
    }
    let options = KubeConfigOptions { context: Some(cluster.to_owned()), ..Default::default() };
    let mut config = Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
        .await
        .map_err(|e| ConnectError::Invalid(name(), e))?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    // kube's default layer retries 429/503/504 up to 15 times with delays growing to
    // 1000 s: one request could hold a reconcile for minutes past its timeouts, and
    // re-send a write after the lease that allowed it has lapsed. flotilla retries whole
    // reconciles itself, bounded by --cluster-timeout and checked by the fence.
    config.default_retry = false;
    if let Some(user) = acting_as {
        config.auth_info.impersonate = Some(user.to_owned());
    }
    crate::identity::set_user_agent(&mut config);
    Client::try_from(config).map_err(|e| ConnectError::Client(name(), e))
}

/// Where Kubernetes mounts a Pod's ServiceAccount credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A kubeconfig for the cluster this Pod runs in, with one context named `name`: the
/// API server from `KUBERNETES_SERVICE_HOST`/`_PORT` (passed in), the mounted CA, and
/// the mounted token by path, so kube re-reads it as the kubelet rotates it. It goes
/// through the same trust checks and client pool as any member's kubeconfig.
pub fn in_cluster(name: &str, host: &str, port: &str) -> Kubeconfig {
    use kube::config::{AuthInfo, Cluster, Context, NamedAuthInfo, NamedCluster, NamedContext};
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_owned() };
    let cluster = Cluster {
        server: Some(format!("https://{host}:{port}")),
        certificate_authority: Some(format!("{SERVICE_ACCOUNT_DIR}/ca.crt")),
        ..Default::default()
    };
    let user = AuthInfo { token_file: Some(format!("{SERVICE_ACCOUNT_DIR}/token")), ..Default::default() };
    let context = Context { cluster: name.to_owned(), user: Some(name.to_owned()), ..Default::default() };
    Kubeconfig {
        clusters: vec![NamedCluster { name: name.to_owned(), cluster: Some(cluster), other: Default::default() }],
        auth_infos: vec![NamedAuthInfo { name: name.to_owned(), auth_info: Some(user), other: Default::default() }],
        contexts: vec![NamedContext { name: name.to_owned(), context: Some(context), other: Default::default() }],
        current_context: Some(name.to_owned()),
        ..Default::default()
    }
}

/// Label naming the member cluster a credentials Secret is for.
pub const CLUSTER_LABEL: &str = "flotilla.dev/cluster";

/// Builds one kubeconfig from the Secrets in `namespace` labelled [`CLUSTER_LABEL`]:
/// each holds a kubeconfig under `kubeconfig`, whose current (or only) context becomes
/// the context named after the cluster. A Secret that does not parse is skipped with a
/// warning naming it (its cluster then reports a missing context); its content is
/// never logged.
pub async fn from_secrets(host: &kube::Client, namespace: &str) -> Result<Kubeconfig, kube::Error> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, ListParams};
    use kube::config::{Context, NamedAuthInfo, NamedCluster, NamedContext};

    let secrets: Api<Secret> = Api::namespaced(host.clone(), namespace);
    let list = secrets.list(&ListParams::default().labels(CLUSTER_LABEL)).await?;
    let mut merged = Kubeconfig::default();
    for secret in list {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let Some(cluster) = secret.metadata.labels.as_ref().and_then(|l| l.get(CLUSTER_LABEL)).cloned() else {
            continue;
        };
        let parsed = secret
            .data
            .as_ref()
            .and_then(|d| d.get("kubeconfig"))
            .and_then(|bytes| std::str::from_utf8(&bytes.0).ok())
            .and_then(|text| Kubeconfig::from_yaml(text).ok());
        let Some(kc) = parsed else {
            tracing::warn!(secret = %format!("{namespace}/{name}"), "no readable kubeconfig under key `kubeconfig`; skipped");
            continue;
        };
        if let Some(field) = names_a_file(&kc) {
            tracing::warn!(
                secret = %format!("{namespace}/{name}"),
                field,
                "the kubeconfig names a file on the controller's machine; only inline credentials are read from Secrets; skipped"
            );
            continue;
        }
        let context_name = kc.current_context.clone().or_else(|| kc.contexts.first().map(|c| c.name.clone()));
        let context =
            kc.contexts.iter().find(|c| Some(&c.name) == context_name.as_ref()).and_then(|c| c.context.clone());
        let Some(context) = context else {
            tracing::warn!(secret = %format!("{namespace}/{name}"), "the kubeconfig has no context; skipped");
            continue;
        };
        let server = kc.clusters.iter().find(|c| c.name == context.cluster).and_then(|c| c.cluster.clone());
        let user = context
            .user
            .as_ref()
            .and_then(|u| kc.auth_infos.iter().find(|a| &a.name == u))
            .and_then(|a| a.auth_info.clone());
        merged.clusters.push(NamedCluster { name: cluster.clone(), cluster: server, other: Default::default() });
        merged.auth_infos.push(NamedAuthInfo { name: cluster.clone(), auth_info: user, other: Default::default() });
        merged.contexts.push(NamedContext {
            name: cluster.clone(),
            context: Some(Context { cluster: cluster.clone(), user: Some(cluster), ..context }),
            other: Default::default(),
        });
    }
    Ok(merged)
}

/// The first field of a kubeconfig that points at a local file. A kubeconfig from a
/// Secret holds its credentials inline: one naming `tokenFile:
/// /var/run/secrets/kubernetes.io/serviceaccount/token` would make the controller send
/// its own token to whatever server the Secret names.
fn names_a_file(kc: &Kubeconfig) -> Option<&'static str> {
    let users = kc.auth_infos.iter().filter_map(|a| a.auth_info.as_ref()).flat_map(|u| {
        [("tokenFile", &u.token_file), ("client-certificate", &u.client_certificate), ("client-key", &u.client_key)]
    });
    let clusters = kc
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref())
        .map(|c| ("certificate-authority", &c.certificate_authority));
    users.chain(clusters).find(|(_, path)| path.is_some()).map(|(field, _)| field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfigs_from_secrets_may_not_name_local_files() {
        let with = |user: &str, cluster: &str| {
            Kubeconfig::from_yaml(&format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://x', {cluster}}}}}]\nusers: [{{name: u, user: {{{user}}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
            ))
            .unwrap()
        };
        assert_eq!(names_a_file(&with("token: abc", "certificate-authority-data: eA==")), None);
        let stolen = with("tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "");
        assert_eq!(names_a_file(&stolen), Some("tokenFile"));
        assert_eq!(names_a_file(&with("client-key: /etc/k", "")), Some("client-key"));
        assert_eq!(names_a_file(&with("token: abc", "certificate-authority: /etc/ca")), Some("certificate-authority"));
    }

    fn kubeconfig(server: &str, token: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- {{name: a, cluster: {{server: '{server}'}}}}\n- {{name: b, cluster: {{server: 'https://127.0.0.1:2'}}}}\n\
             users:\n- {{name: a, user: {{token: {token}}}}}\n- {{name: b, user: {{token: other}}}}\n\
             contexts:\n- {{name: a, context: {{cluster: a, user: a}}}}\n- {{name: b, context: {{cluster: b, user: b}}}}\n"
        ))
        .expect("a valid kubeconfig")
    }

    #[tokio::test]
    async fn plain_http_api_servers_are_refused_unless_allowed() {
        let plain = kubeconfig("http://127.0.0.1:1", "token-marker-9f2");
        let timeout = Duration::from_secs(5);
        let Err(refused) = client(&plain, "a", Trust::default(), timeout, None).await else {
            panic!("an http:// server is refused")
        };
        assert!(matches!(refused, ConnectError::PlainHttp(_)), "{refused}");
        assert!(refused.to_string().contains("--insecure-allow-http") && !refused.to_string().contains("token-marker"));
        let allowed = Trust { insecure_http: true, ..Trust::default() };
        assert!(client(&plain, "a", allowed, timeout, None).await.is_ok());
        assert!(client(&kubeconfig("https://127.0.0.1:1", "t"), "a", Trust::default(), timeout, None).await.is_ok());
    }

    #[tokio::test]
    async fn a_client_is_rebuilt_only_when_its_own_entry_changes() {
        let pool = Pool::default();
        let (trust, timeout) = (Trust::default(), Duration::from_secs(5));
        let first = kubeconfig("https://127.0.0.1:1", "one");
        for _ in 0..3 {
            pool.client(&first, "a", trust, timeout, None).await.expect("a client");
            pool.client(&first, "b", trust, timeout, None).await.expect("a client");
        }
        assert_eq!(pool.built(), 2, "one client per cluster, reused");

        // A re-read with the same content (a new Kubeconfig value) reuses them.
        pool.client(&kubeconfig("https://127.0.0.1:1", "one"), "a", trust, timeout, None).await.expect("a client");
        assert_eq!(pool.built(), 2);

        // A rotated token or a moved server rebuilds that cluster's client only.
        let rotated = kubeconfig("https://127.0.0.1:1", "two");
        pool.client(&rotated, "a", trust, timeout, None).await.expect("a client");
        pool.client(&rotated, "b", trust, timeout, None).await.expect("a client");
        assert_eq!(pool.built(), 3);
        let moved = kubeconfig("https://127.0.0.1:3", "two");
        pool.client(&moved, "a", trust, timeout, None).await.expect("a client");
        assert_eq!(pool.built(), 4);

        // Other trust or timeouts make another client.
        pool.client(&moved, "a", trust, Duration::from_secs(6), None).await.expect("a client");
        assert_eq!(pool.built(), 5);

        // A failure is not kept, and a cluster gone from the kubeconfig is dropped.
        assert!(matches!(pool.client(&moved, "c", trust, timeout, None).await, Err(ConnectError::NoContext(_))));
        let mut only_a = moved.clone();
        only_a.contexts.retain(|c| c.name == "a");
        pool.retain(&only_a);
        assert_eq!(pool.len(), 1);
        pool.client(&moved, "b", trust, timeout, None).await.expect("a client");
        assert_eq!(pool.built(), 6);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn loops_asking_for_the_same_member_at_once_build_one_client() {
        let pool = std::sync::Arc::new(Pool::default());
        let kc = std::sync::Arc::new(kubeconfig("https://127.0.0.1:1", "one"));
        let asks = (0..16).map(|_| {
            let (pool, kc) = (pool.clone(), kc.clone());
            tokio::spawn(
                async move { pool.client(&kc, "a", Trust::default(), Duration::from_secs(5), None).await.is_ok() },
            )
        });
        for ask in asks.collect::<Vec<_>>() {
            assert!(ask.await.unwrap());
        }
        assert_eq!(pool.built(), 1, "sixteen concurrent asks, one client");
    }

    #[test]
    fn an_agent_reaches_its_own_cluster_through_the_mounted_service_account() {
        let kc = in_cluster("member3", "fd00::1", "6443");
        assert_eq!(kc.current_context.as_deref(), Some("member3"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://[fd00::1]:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
        );
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.token_file.as_deref(), Some("/var/run/secrets/kubernetes.io/serviceaccount/token"));
        assert!(user.token.is_none(), "the token is read from its file, so rotation is seen");
        let context = kc.contexts[0].context.as_ref().unwrap();
        assert_eq!((context.cluster.as_str(), context.user.as_deref()), ("member3", Some("member3")));
        let v4 = in_cluster("member3", "10.96.0.1", "443");
        assert_eq!(v4.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://10.96.0.1:443"));
    }
}

/// How the loops that watch members reach them: credentials (re-read on each render),
/// the host cluster they may live in, the shared client pool, and the trust and
/// timeout of every request.
#[derive(Clone)]
pub struct Access {
    /// Member credentials.
    pub credentials: super::credentials::Credentials,
    /// The host cluster.
    pub host: std::sync::Arc<crate::host::Host>,
    /// Member clients, shared by every loop.
    pub pool: std::sync::Arc<Pool>,
    /// Which kubeconfig credentials to trust.
    pub trust: Trust,
    /// Per-request timeout.
    pub request_timeout: Duration,
}

impl Access {
    /// The member credentials as they are now.
    pub async fn kubeconfig(&self) -> anyhow::Result<Kubeconfig> {
        self.credentials.read(&self.host).await
    }

    /// A probe of members every `interval`, with these credentials' trust and timeout.
    pub fn probe(&self, interval: Duration) -> super::probe::Probe {
        super::probe::Probe { trust: self.trust, timeout: self.request_timeout, interval }
    }
}
