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

/// One object the plan places, as `status` reports it (`-o json|yaml` prints these).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// Its key: apiVersion, kind, namespace, name.
    #[serde(flatten)]
    pub key: ObjectKey,
    /// Each member it is in: its health there and the status it reports.
    pub clusters: BTreeMap<String, InCluster>,
    /// The members' statuses aggregated as the kind's interpreter says (Karmada's
    /// AggregateStatus), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregated: Option<Value>,
    /// Ready of desired replicas, from `aggregated` (`3/4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// Whether it is healthy in every member and aggregates cleanly.
    pub healthy: bool,
    /// What is wrong, each naming its member.
    pub problems: Vec<String>,
}

/// An object in one member.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InCluster {
    /// `Healthy`, `Progressing (why)`, `Degraded (why)` or `Missing`.
    pub health: String,
    /// Its ready of desired replicas there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// The status it reports (the interpreter's reflection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// Every object observed, in key order, with its health per member and its status
/// aggregated across them.
pub fn objects(plan: &Plan, observed: &[(String, Observed)]) -> Vec<ObjectStatus> {
    let mut objects: BTreeMap<&ObjectKey, Vec<InMember<'_>>> = BTreeMap::new();
    for (cluster, items) in observed {
        for (key, (health, status)) in items {
            objects.entry(key).or_default().push(InMember { cluster, health, status: status.as_ref() });
        }
    }
    let mut out = Vec::with_capacity(objects.len());
    for (key, per_cluster) in objects {
        let template = || plan.loaded.template(key).map_or(Value::Null, |t| t.object());
        let mut problems: Vec<String> = Vec::new();
        let aggregated = match status::aggregated(&plan.loaded.interpreter, key, template, &per_cluster) {
            Some(Ok(summed)) => Some(summed),
            Some(Err(e)) => {
                problems.push(e.to_string());
                None
            }
            None => None,
        };
        problems.extend(
            per_cluster.iter().filter(|m| *m.health != Health::Healthy).map(|m| format!("{}: {}", m.cluster, m.health)),
        );
        let clusters = per_cluster
            .iter()
            .map(|m| {
                let status = m.status.cloned();
                let ready = status.as_ref().and_then(ready);
                (m.cluster.to_owned(), InCluster { health: m.health.to_string(), ready, status })
            })
            .collect();
        out.push(ObjectStatus {
            key: key.clone(),
            clusters,
            ready: aggregated.as_ref().and_then(ready),
            aggregated,
            healthy: problems.is_empty(),
            problems,
        });
    }
    out
}

/// One row per object: KIND, NAMESPACE, NAME, CLUSTERS, READY (the members' status
/// aggregated as the kind's interpreter says), STATUS (the worst cluster, named); `wide`
/// adds API VERSION and each member's health and ready.
pub fn table(objects: &[ObjectStatus], wide: bool) -> String {
    let mut header = vec!["KIND", "NAMESPACE", "NAME", "CLUSTERS", "READY", "STATUS"];
    if wide {
        header.extend(["API VERSION", "IN EACH CLUSTER"]);
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for o in objects {
        let mut row = vec![
            o.key.kind.clone(),
            o.key.namespace.clone().unwrap_or_else(|| "-".into()),
            o.key.name.clone(),
            o.clusters.keys().cloned().collect::<Vec<_>>().join(","),
            o.ready.clone().unwrap_or_else(|| "-".into()),
            if o.healthy { "Healthy".to_owned() } else { o.problems.join("; ") },
        ];
        if wide {
            let each = o.clusters.iter().map(|(c, m)| match &m.ready {
                Some(ready) => format!("{c}={} {ready}", short_health(&m.health)),
                None => format!("{c}={}", short_health(&m.health)),
            });
            row.extend([o.key.api_version.clone(), each.collect::<Vec<_>>().join(",")]);
        }
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> =
        (0..columns).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let lines = rows.iter().map(|r| {
        let cells: Vec<String> = r.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        // Cells quote members' messages: they reach a terminal.
        flotilla_core::escape::visible(cells.join("   ").trim_end()).into_owned()
    });
    lines.collect::<Vec<_>>().join("\n") + "\n"
}

/// A health's first word (`Degraded: why` → `Degraded`), for a cell.
fn short_health(health: &str) -> &str {
    health.split([':', ' ']).next().unwrap_or(health)
}

/// READY of a status: ready of desired replicas (a DaemonSet's ready of scheduled),
/// nothing when it holds neither.
fn ready(summed: &Value) -> Option<String> {
    let field = |names: [&str; 2]| names.iter().find_map(|n| summed.get(*n).and_then(Value::as_i64));
    match (field(["readyReplicas", "numberReady"]), field(["replicas", "desiredNumberScheduled"])) {
        (None, None) => None,
        (ready, want) => Some(format!("{}/{}", ready.unwrap_or(0), want.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, members: &[(&str, &str, Option<&str>)]) -> ObjectStatus {
        let clusters: BTreeMap<String, InCluster> = members
            .iter()
            .map(|(c, h, r)| ((*c).into(), InCluster { health: (*h).into(), ready: r.map(String::from), status: None }))
            .collect();
        let problems: Vec<String> =
            members.iter().filter(|(_, h, _)| *h != "Healthy").map(|(c, h, _)| format!("{c}: {h}")).collect();
        ObjectStatus {
            key: ObjectKey::new("apps/v1", "Deployment", Some("default"), name),
            clusters,
            aggregated: None,
            ready: Some("3/4".into()),
            healthy: problems.is_empty(),
            problems,
        }
    }

    #[test]
    fn wide_adds_the_api_version_and_each_member_and_member_text_is_made_visible() {
        let objects = [
            object(
                "web",
                &[("member1", "Healthy", Some("2/2")), ("member2", "Progressing (1 of 2 updated)", Some("1/2"))],
            ),
            object("evil\u{1b}[2J", &[("member1", "Degraded (\u{7}bell)", None)]),
        ];
        let narrow = table(&objects, false);
        let wide = table(&objects, true);
        assert!(narrow.starts_with("KIND "), "{narrow}");
        assert!(!narrow.contains("API VERSION"));
        let web = wide.lines().find(|l| l.contains(" web ")).unwrap();
        assert!(web.contains("apps/v1"), "{wide}");
        assert!(web.ends_with("member1=Healthy 2/2,member2=Progressing 1/2"), "{wide}");
        assert!(web.contains("member2: Progressing (1 of 2 updated)"), "{wide}");
        assert!(!wide.contains('\u{1b}') && !wide.contains('\u{7}'), "{wide:?}");
    }
}
