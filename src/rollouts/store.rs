//! Where rollouts are kept in the host cluster: the loop's state in ConfigMap
//! `flotilla-rollouts-<instance>` (`state.json`, written only by the leader, read by
//! Pull agents too), the commands people give in `flotilla-rollout-commands-<instance>`
//! (`commands.json`, written by `flotilla rollout pause|resume|abort`, read by the
//! leader), and what each Pull agent sees of its member in
//! `flotilla-rollout-seen-<instance>-<cluster>` (`seen.json`, written by that agent,
//! read by the leader). One writer per object, so none races another; who may command a
//! rollout is whoever Kubernetes RBAC lets update the commands ConfigMap.

use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::step::{Command, Stored};
use crate::host::Host;
use flotilla_core::rollout::PolicyId;

const STATE: &str = "state.json";
const SEEN: &str = "seen.json";
const COMMANDS: &str = "commands.json";
/// Commands kept in the ConfigMap (the oldest go first).
const KEPT: usize = 100;

/// One command, as `flotilla rollout` records it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// Numbered from 1, one more than the newest before it.
    pub id: u64,
    /// The policy.
    pub policy: PolicyId,
    /// What to do.
    pub command: Command,
    /// When it was given (RFC 3339), for people reading the ConfigMap.
    pub at: String,
}

/// What a Pull agent saw of its member for each rollout that watches it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// One more at every write: a leader that sees it stop moving stops trusting it.
    pub sequence: u64,
    /// Per rollout watching the member.
    pub policies: Vec<SeenPolicy>,
}

/// What a Pull agent saw for one rollout.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenPolicy {
    /// The policy.
    pub policy: PolicyId,
    /// The revision it rolls out.
    pub revision: String,
    /// Every governed object at that revision.
    pub at: bool,
    /// Every governed object healthy.
    pub healthy: bool,
}

/// The host cluster's ConfigMaps of one instance.
#[derive(Clone)]
pub struct Store {
    /// The host cluster.
    pub host: Arc<Host>,
    /// The controller's namespace.
    pub namespace: String,
    /// The instance.
    pub instance: String,
}

impl Store {
    fn names(&self) -> (String, String) {
        (format!("flotilla-rollouts-{}", self.instance), format!("flotilla-rollout-commands-{}", self.instance))
    }

    async fn api(&self) -> anyhow::Result<Api<ConfigMap>> {
        Ok(Api::namespaced(self.host.client().await?, &self.namespace))
    }

    /// The stored state (`None`: none stored yet); an unreadable one is an error.
    pub async fn load(&self) -> anyhow::Result<Option<Stored>> {
        self.host.read_json(&self.namespace, (&self.names().0, STATE)).await
    }

    /// Stores `stored`, checking `fence` right before the write.
    pub async fn save(&self, stored: &Stored, fence: &crate::leader::Fence) -> anyhow::Result<()> {
        // Connect first, so the fence is checked right before the write itself.
        self.host.client().await?;
        anyhow::ensure!(fence.holds(), "no longer leading");
        self.host.write_json(&self.namespace, (&self.names().0, STATE), stored, "flotilla-rollouts").await
    }

    fn seen_name(&self, cluster: &str) -> String {
        format!("flotilla-rollout-seen-{}-{cluster}", self.instance)
    }

    /// What the agent of `cluster` last wrote it saw (`None`: nothing yet).
    pub async fn seen(&self, cluster: &str) -> anyhow::Result<Option<Seen>> {
        self.host.read_json(&self.namespace, (&self.seen_name(cluster), SEEN)).await
    }

    /// Writes what this agent saw of `cluster`.
    pub async fn save_seen(&self, cluster: &str, seen: &Seen) -> anyhow::Result<()> {
        self.host.write_json(&self.namespace, (&self.seen_name(cluster), SEEN), seen, "flotilla-rollouts-agent").await
    }

    /// The commands recorded, oldest first (none when the ConfigMap is missing).
    pub async fn commands(&self) -> anyhow::Result<Vec<Recorded>> {
        let name = self.names().1;
        let found = self.api().await?.get_opt(&name).await.with_context(|| format!("reading ConfigMap {name}"))?;
        Ok(found.map(|cm| parse_commands(&cm)).transpose()?.unwrap_or_default())
    }

    /// Records `command` for `policy` (`flotilla rollout`), numbered after the newest
    /// recorded; a concurrent writer makes it try again. Returns its number.
    pub async fn record(&self, policy: &PolicyId, command: Command) -> anyhow::Result<u64> {
        let (api, name) = (self.api().await?, self.names().1);
        for _ in 0..5 {
            let found = api.get_opt(&name).await.with_context(|| format!("reading ConfigMap {name}"))?;
            let mut recorded = found.as_ref().map(parse_commands).transpose()?.unwrap_or_default();
            let id = recorded.iter().map(|r| r.id).max().unwrap_or(0) + 1;
            let at = k8s_openapi::jiff::Timestamp::now().to_string();
            recorded.push(Recorded { id, policy: policy.clone(), command, at });
            let skip = recorded.len().saturating_sub(KEPT);
            let text = serde_json::to_string(&recorded[skip..]).context("serialising the commands")?;
            let written = match found {
                Some(mut cm) => {
                    cm.data.get_or_insert_default().insert(COMMANDS.into(), text);
                    // Replace carries the resourceVersion read: a concurrent write fails it.
                    api.replace(&name, &PostParams::default(), &cm).await
                }
                None => {
                    let cm: ConfigMap = serde_json::from_value(
                        json!({"metadata": {"name": name, "namespace": self.namespace}, "data": {COMMANDS: text}}),
                    )?;
                    api.create(&PostParams::default(), &cm).await
                }
            };
            match written {
                Ok(_) => return Ok(id),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e).with_context(|| format!("writing ConfigMap {name}")),
            }
        }
        anyhow::bail!("ConfigMap {name} kept changing under five attempts; try again")
    }
}

fn parse_commands(cm: &ConfigMap) -> anyhow::Result<Vec<Recorded>> {
    let name = cm.metadata.name.as_deref().unwrap_or_default();
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(COMMANDS)) else { return Ok(Vec::new()) };
    serde_json::from_str(text).with_context(|| format!("ConfigMap {name}: {COMMANDS} does not parse"))
}
