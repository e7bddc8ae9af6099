//! `flotilla status`: for every object the plan places, its health in each cluster and
//! its workload status summed across clusters, as Karmada aggregates it.

use std::collections::BTreeMap;

use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::status::{self, Health, InMember};
use kube::Client;
use serde_json::Value;

use super::apply::{Kinds, observe};

/// One object's state in one cluster.
pub type Observed = BTreeMap<ObjectKey, (Health, Option<Value>)>;

/// Observes every object the plan wants in `cluster`.
pub async fn observe_cluster(client: &Client, plan: &Plan, cluster: &str) -> Result<Observed, String> {
    let keys: Vec<ObjectKey> = plan
        .clusters
        .get(cluster)
        .into_iter()
        .flatten()
        .map(|r| plan.loaded.templates[r.template].key.clone())
        .collect();
    let mut kinds = Kinds::new(client, client);
    let (live, unserved) =
        observe(client, &mut kinds, &keys).await.map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
    let mut out = Observed::new();
    for key in keys {
        let object = live.get(&key);
        let interpreter = &plan.loaded.interpreter;
        let mut health = if unserved.iter().any(|(k, _)| k == &key) {
            Health::Missing
        } else {
            status::interpreted(interpreter, &key, object)
        };
        let reported = match object.map(|o| status::reflected(interpreter, &key, o)) {
            Some(Ok(reported)) => reported,
            Some(Err(e)) => {
                health = Health::Degraded(e.to_string());
                None
            }
            None => None,
        };
        out.insert(key, (health, reported));
    }
    Ok(out)
}

/// One row per object: KIND, NAMESPACE, NAME, CLUSTERS, READY (the members' status
/// aggregated as the kind's interpreter says), STATUS (the worst cluster, named). Returns
/// the table and whether everything is healthy.
pub fn table(plan: &Plan, observed: &[(String, Observed)]) -> (String, bool) {
    let mut objects: BTreeMap<&ObjectKey, Vec<InMember<'_>>> = BTreeMap::new();
    for (cluster, items) in observed {
        for (key, (health, status)) in items {
            objects.entry(key).or_default().push(InMember { cluster, health, status: status.as_ref() });
        }
    }
    let mut rows = vec![["KIND", "NAMESPACE", "NAME", "CLUSTERS", "READY", "STATUS"].map(String::from).to_vec()];
    let mut all_healthy = true;
    for (key, per_cluster) in objects {
        let clusters: Vec<&str> = per_cluster.iter().map(|m| m.cluster).collect();
        let template = || plan.loaded.template(key).map_or(Value::Null, |t| t.object());
        let mut unhealthy: Vec<String> = Vec::new();
        let ready = match status::aggregated(&plan.loaded.interpreter, key, template, &per_cluster) {
            Some(Ok(summed)) => ready(&summed),
            Some(Err(e)) => {
                unhealthy.push(e.to_string());
                "-".to_owned()
            }
            None => "-".to_owned(),
        };
        unhealthy.extend(
            per_cluster.iter().filter(|m| *m.health != Health::Healthy).map(|m| format!("{}: {}", m.cluster, m.health)),
        );
        all_healthy &= unhealthy.is_empty();
        let state = if unhealthy.is_empty() { "Healthy".to_owned() } else { unhealthy.join("; ") };
        rows.push(vec![
            key.kind.clone(),
            key.namespace.clone().unwrap_or_else(|| "-".into()),
            key.name.clone(),
            clusters.join(","),
            ready,
            state,
        ]);
    }
    let widths: Vec<usize> = (0..6).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let text = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
                .collect::<Vec<_>>()
                .join("   ")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n");
    (text + "\n", all_healthy)
}

/// READY of an aggregated status: ready of desired replicas (a DaemonSet's ready of
/// scheduled), `-` when it holds neither.
fn ready(summed: &Value) -> String {
    let field = |names: [&str; 2]| names.iter().find_map(|n| summed.get(*n).and_then(Value::as_i64));
    match (field(["readyReplicas", "numberReady"]), field(["replicas", "desiredNumberScheduled"])) {
        (None, None) => "-".to_owned(),
        (ready, want) => format!("{}/{}", ready.unwrap_or(0), want.unwrap_or(0)),
    }
}
