//! The host cluster: where the controller runs, keeps its Lease, may read member
//! credentials from Secrets, and (with `--writeback=state`) keeps the autoscaler's replica
//! counts in a ConfigMap that renders read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use flotilla_core::model::ObjectKey;
use flotilla_core::render::POLICY_ANNOTATION;
use k8s_openapi::api::core::v1::ConfigMap;

/// How to reach the host cluster: made on first use and kept (in-cluster, kube re-reads
/// the rotated token itself).
pub struct Host {
    kubeconfig: Option<(PathBuf, Option<String>)>,
    client: tokio::sync::OnceCell<kube::Client>,
}

impl Host {
    /// `kubeconfig` (file and context), or in-cluster configuration when `None`.
    pub fn new(kubeconfig: Option<(PathBuf, Option<String>)>) -> Self {
        Self { kubeconfig, client: Default::default() }
    }

    /// The client.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.client.get_or_try_init(|| connect(self.kubeconfig.as_ref())).await.cloned()
    }

    /// The JSON document under `key` of ConfigMap `name` in `namespace` (`None` when
    /// either is missing); one that does not parse is an error naming both.
    pub async fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        namespace: &str,
        (name, key): (&str, &str),
    ) -> anyhow::Result<Option<T>> {
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(self.client().await?, namespace);
        let found = api.get_opt(name).await.with_context(|| format!("reading ConfigMap {name}"))?;
        let Some(text) = found.and_then(|cm| cm.data).and_then(|mut d| d.remove(key)) else { return Ok(None) };
        let value = serde_json::from_str(&text).with_context(|| format!("ConfigMap {name}: {key} does not parse"))?;
        Ok(Some(value))
    }

    /// Writes `value` as the JSON document under `key` of ConfigMap `name`, by
    /// server-side apply as field manager `manager` (taking the field over).
    pub async fn write_json<T: serde::Serialize>(
        &self,
        namespace: &str,
        (name, key): (&str, &str),
        value: &T,
        manager: &str,
    ) -> anyhow::Result<()> {
        let text = serde_json::to_string(value).with_context(|| format!("serialising ConfigMap {name}: {key}"))?;
        let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: text}});
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(self.client().await?, namespace);
        let params = kube::api::PatchParams::apply(manager).force();
        api.patch(name, &params, &kube::api::Patch::Apply(config_map))
            .await
            .with_context(|| format!("writing ConfigMap {name}"))?;
        Ok(())
    }
}

async fn connect(kubeconfig: Option<&(PathBuf, Option<String>)>) -> anyhow::Result<kube::Client> {
    let mut config = match kubeconfig {
        Some((path, context)) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).context("reading the host kubeconfig")?;
            let options = kube::config::KubeConfigOptions { context: context.clone(), ..Default::default() };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.context("host kubeconfig")?
        }
        None => kube::Config::incluster().context("in-cluster configuration for the host cluster")?,
    };
    // No hidden retries past the lease (see `clusters::connect::client`).
    config.default_retry = false;
    crate::identity::set_user_agent(&mut config);
    kube::Client::try_from(config).context("host cluster client")
}

/// The replica counts an autoscaler keeps in the host cluster (`--writeback=state`):
/// one ConfigMap per instance, read by every render.
pub struct ReplicaState<'h> {
    /// The host cluster.
    pub host: &'h Host,
    /// The controller's namespace.
    pub namespace: &'h str,
    /// The instance name.
    pub instance: &'h str,
}

impl ReplicaState<'_> {
    /// The ConfigMap's name.
    pub fn name(&self) -> String {
        format!("flotilla-replicas-{}", self.instance)
    }

    async fn api(&self) -> anyhow::Result<kube::Api<ConfigMap>> {
        Ok(kube::Api::namespaced(self.host.client().await?, self.namespace))
    }

    /// Replicas by key, spelled (`ObjectKey::spelled`).
    pub async fn read(&self) -> anyhow::Result<BTreeMap<String, i64>> {
        let name = self.name();
        let found = self.api().await?.get_opt(&name).await.with_context(|| format!("reading ConfigMap {name}"))?;
        let data = found.and_then(|cm| cm.data).unwrap_or_default();
        Ok(data.into_iter().filter_map(|(k, v)| Some((from_data_key(&k), v.trim().parse().ok()?))).collect())
    }

    /// Writes replica counts for templates (merged with what is there).
    pub async fn write(&self, replicas: &[(ObjectKey, i64)]) -> anyhow::Result<()> {
        let data: BTreeMap<String, String> = replicas.iter().map(|(k, v)| (data_key(k), v.to_string())).collect();
        let name = self.name();
        let patch = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {POLICY_ANNOTATION: "autoscaler"}}, "data": data});
        let params = kube::api::PatchParams::apply("flotilla-autoscaler");
        self.api()
            .await?
            .patch(&name, &params, &kube::api::Patch::Apply(patch))
            .await
            .with_context(|| format!("writing ConfigMap {name}"))?;
        Ok(())
    }
}

/// ConfigMap keys allow `[-._a-zA-Z0-9]`; spelled keys have `/`. `/` is written as `.`
/// and a literal `.` as `_`, which no group, version, kind, namespace or name contains.
/// (Before, a literal `.` was written as `~`, which the API server refuses in a key: no
/// such key was ever stored, so keys without a dot read as they always did.)
fn data_key(key: &ObjectKey) -> String {
    key.spelled().replace('.', "_").replace('/', ".")
}

fn from_data_key(key: &str) -> String {
    key.replace('.', "/").replace('_', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_survive_the_configmap_key_alphabet() {
        let key = ObjectKey {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("web".into()),
            name: "nginx.v2".into(),
        };
        let written = data_key(&key);
        assert!(written.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)), "{written}");
        assert_eq!(from_data_key(&written), key.spelled());
    }
}
