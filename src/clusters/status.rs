//! `flotilla status`: for every object the plan places, its health in each cluster and
//! its workload status summed across clusters, as Karmada aggregates it.

use std::collections::BTreeMap;

use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::status::{self, Health};
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
        let health = if unserved.iter().any(|(k, _)| k == &key) {
            Health::Missing
        } else {
            status::interpreted(&plan.loaded.interpreter, &key, object)
        };
        out.insert(key, (health, object.and_then(|o| o.get("status").cloned())));
    }
    Ok(out)
}

/// One object in one cluster: cluster name, health, status.
type InCluster<'a> = (&'a str, &'a Health, Option<&'a Value>);

/// One row per object: KIND, NAMESPACE, NAME, CLUSTERS, READY (summed), STATUS (the
/// worst cluster, named). Returns the table and whether everything is healthy.
pub fn table(observed: &[(String, Observed)]) -> (String, bool) {
    let mut objects: BTreeMap<&ObjectKey, Vec<InCluster<'_>>> = BTreeMap::new();
    for (cluster, items) in observed {
        for (key, (health, status)) in items {
            objects.entry(key).or_default().push((cluster, health, status.as_ref()));
        }
    }
    let mut rows = vec![["KIND", "NAMESPACE", "NAME", "CLUSTERS", "READY", "STATUS"].map(String::from).to_vec()];
    let mut all_healthy = true;
    for (key, per_cluster) in objects {
        let clusters: Vec<&str> = per_cluster.iter().map(|(c, _, _)| *c).collect();
        let summed = status::aggregate(key, per_cluster.iter().filter_map(|(_, _, s)| *s));
        let ready = summed.map_or("-".to_owned(), |s| {
            let ready = s.get("readyReplicas").or_else(|| s.get("numberReady")).and_then(Value::as_i64).unwrap_or(0);
            let want =
                s.get("replicas").or_else(|| s.get("desiredNumberScheduled")).and_then(Value::as_i64).unwrap_or(0);
            format!("{ready}/{want}")
        });
        let unhealthy: Vec<String> = per_cluster
            .iter()
            .filter(|(_, h, _)| **h != Health::Healthy)
            .map(|(c, h, _)| format!("{c}: {h}"))
            .collect();
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
