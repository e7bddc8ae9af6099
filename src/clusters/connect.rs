//! Member-cluster clients from a kubeconfig: one context per Cluster, named after it.
//! Credentials are crown jewels: exec and auth-provider plugins (which run programs) and
//! skipped TLS verification are refused unless explicitly allowed.

use std::path::Path;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// What a kubeconfig may use.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trust {
    /// Allow `exec` and `auth-provider` credential plugins.
    pub exec_plugins: bool,
    /// Allow `insecure-skip-tls-verify`.
    pub insecure_tls: bool,
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

/// A client for `cluster` through the context of the same name, after the trust checks.
pub async fn client(
    kubeconfig: &Kubeconfig,
    cluster: &str,
    trust: Trust,
    timeout: Duration,
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
    let options = KubeConfigOptions { context: Some(cluster.to_owned()), ..Default::default() };
    let mut config = Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
        .await
        .map_err(|e| ConnectError::Invalid(name(), e))?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    Client::try_from(config).map_err(|e| ConnectError::Client(name(), e))
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
