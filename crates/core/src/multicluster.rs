//! Multi-cluster Services, the pure part. Which clusters provide and which consume each
//! exported Service at one revision ([`services`]): a ServiceExport's clusters provide and
//! a ServiceImport's consume `derived-<name>` (Karmada's ServiceExport flow), or a
//! CrossCluster MultiClusterService names both and consumers call the Service by its
//! own name (Karmada's endpointslice-dispatch). And what a consumer gets for one
//! EndpointSlice of a provider ([`imported`]), and which provider wins when exports
//! disagree on ports ([`conflict`]). The controller's endpoints loop watches and
//! writes; what it writes is decided here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value, json};

use crate::model::service::MultiClusterServiceSpec;
use crate::model::{Cluster, ObjectKey, Plan};

/// The label that names an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label that names an EndpointSlice's writer.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// flotilla's value of [`MANAGED_BY_LABEL`]: slices it writes, and never reads as a source.
pub const CONTROLLER: &str = "endpointslice-controller.flotilla.dev";
/// The MCS API's label naming the exported Service of an imported slice.
pub const MCS_SERVICE_LABEL: &str = "multicluster.kubernetes.io/service-name";
/// The MCS API's label naming the cluster an imported slice comes from.
pub const SOURCE_CLUSTER_LABEL: &str = "multicluster.kubernetes.io/source-cluster";
/// The flotilla instance that wrote a slice (instances never touch each other's).
pub const INSTANCE_LABEL: &str = "flotilla.dev/instance";
/// A digest of what flotilla wrote, so an unchanged slice is never written again.
pub const DIGEST_ANNOTATION: &str = "flotilla.dev/endpoints-digest";

/// The longest object name (a DNS-1123 subdomain).
const MAX_NAME: usize = 253;

/// How consumers reach an exported Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    /// ServiceExport / ServiceImport: consumers call `derived-<name>`.
    ServiceImport,
    /// A CrossCluster MultiClusterService: consumers call the Service's own name.
    MultiClusterService,
}

/// One Service port as exports compare them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Port {
    /// `name`, empty when unnamed.
    pub name: String,
    /// `protocol` (TCP when unset).
    pub protocol: String,
    /// `port`.
    pub port: i64,
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name.as_str() {
            "" => write!(f, "{}/{}", self.port, self.protocol),
            name => write!(f, "{name}:{}/{}", self.port, self.protocol),
        }
    }
}

/// One exported Service at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Its namespace.
    pub namespace: String,
    /// The exported Service's name.
    pub name: String,
    /// How consumers reach it.
    pub via: Via,
    /// Providing clusters, each with the Service's ports as rendered there (`None`: the
    /// Service itself is not placed there, so its endpoints are whatever slices exist).
    pub providers: BTreeMap<String, Option<Vec<Port>>>,
    /// Consuming clusters.
    pub consumers: BTreeSet<String>,
}

impl Exported {
    /// `namespace/name`, how status and logs name it.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Service consumers call, which the imported slices belong to.
    pub fn target(&self) -> String {
        match self.via {
            Via::ServiceImport => format!("derived-{}", self.name),
            Via::MultiClusterService => self.name.clone(),
        }
    }

    /// Whether `consumer` gets `provider`'s slices. A MultiClusterService consumer that
    /// also provides has its own slices under the same Service already.
    pub fn imports(&self, consumer: &str, provider: &str) -> bool {
        self.via == Via::ServiceImport || consumer != provider
    }

    /// The name of the slice a consumer gets for `slice` of `provider`: Karmada's
    /// `imported-<cluster>-<slice>` (ServiceImport) or `<cluster>-<slice>`
    /// (MultiClusterService), cut with a hash past 253 characters.
    pub fn slice_name(&self, provider: &str, slice: &str) -> String {
        let full = match self.via {
            Via::ServiceImport => format!("imported-{provider}-{slice}"),
            Via::MultiClusterService => format!("{provider}-{slice}"),
        };
        crate::model::names::fit(full, MAX_NAME)
    }
}

/// Every exported Service of a rendered revision, sorted by namespace and name.
pub fn services(plan: &Plan) -> Vec<Exported> {
    let mut found: BTreeMap<(String, String, Via), Exported> = BTreeMap::new();
    for (cluster, items) in &plan.clusters {
        for item in items {
            let key = &plan.loaded.templates[item.template].key;
            if key.group() != "multicluster.x-k8s.io" {
                continue;
            }
            let via_import = match key.kind.as_str() {
                "ServiceExport" => false,
                "ServiceImport" => true,
                _ => continue,
            };
            let exported = slot(&mut found, key, Via::ServiceImport);
            if via_import {
                exported.consumers.insert(cluster.clone());
            } else {
                exported.providers.insert(cluster.clone(), None);
            }
        }
    }
    for mcs in plan.loaded.multi_cluster_services.iter().filter(|m| m.spec.cross_cluster()) {
        let key = ObjectKey {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: mcs.namespace.clone(),
            name: mcs.name.clone(),
        };
        let (providers, consumers) = clusters_of(&mcs.spec, &plan.loaded.clusters);
        let exported = slot(&mut found, &key, Via::MultiClusterService);
        exported.providers = providers.into_iter().map(|c| (c, None)).collect();
        exported.consumers = consumers;
    }
    let mut out: Vec<Exported> = found.into_values().collect();
    for exported in &mut out {
        for (cluster, ports) in &mut exported.providers {
            *ports = rendered_ports(plan, cluster, &exported.namespace, &exported.name);
        }
    }
    out
}

fn slot<'a>(found: &'a mut BTreeMap<(String, String, Via), Exported>, key: &ObjectKey, via: Via) -> &'a mut Exported {
    let (namespace, name) = (key.namespace.clone().unwrap_or_else(|| "default".into()), key.name.clone());
    found.entry((namespace.clone(), name.clone(), via)).or_insert_with(|| Exported {
        namespace,
        name,
        via,
        providers: BTreeMap::new(),
        consumers: BTreeSet::new(),
    })
}

/// A MultiClusterService's providers and consumers among the declared clusters; an
/// empty list means every cluster, as in Karmada.
fn clusters_of(spec: &MultiClusterServiceSpec, clusters: &[Cluster]) -> (BTreeSet<String>, BTreeSet<String>) {
    let pick = |named: Vec<&str>| -> BTreeSet<String> {
        clusters
            .iter()
            .filter(|c| named.is_empty() || named.contains(&c.name.as_str()))
            .map(|c| c.name.clone())
            .collect()
    };
    (pick(spec.providers()), pick(spec.consumers()))
}

/// Where a MultiClusterService places its Service: its providers and its consumers.
pub fn placement(spec: &MultiClusterServiceSpec, clusters: &[Cluster]) -> crate::model::policy::Placement {
    let (providers, consumers) = clusters_of(spec, clusters);
    let affinity = crate::model::policy::ClusterAffinity {
        cluster_names: providers.union(&consumers).cloned().collect(),
        ..Default::default()
    };
    crate::model::policy::Placement { cluster_affinity: Some(affinity), ..Default::default() }
}

/// The ports of Service `namespace/name` as rendered for `cluster` (overrides applied).
fn rendered_ports(plan: &Plan, cluster: &str, namespace: &str, name: &str) -> Option<Vec<Port>> {
    let item = plan.clusters.get(cluster)?.iter().find(|item| {
        let key = &plan.loaded.templates[item.template].key;
        key.api_version == "v1"
            && key.kind == "Service"
            && key.namespace.as_deref() == Some(namespace)
            && key.name == name
    })?;
    let manifest = plan.manifest(item).ok()?;
    Some(ports(&manifest))
}

/// A Service's ports, sorted.
pub fn ports(service: &Value) -> Vec<Port> {
    let mut out: Vec<Port> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| Port {
            name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            protocol: p.get("protocol").and_then(Value::as_str).unwrap_or("TCP").to_owned(),
            port: p.get("port").and_then(Value::as_i64).unwrap_or_default(),
        })
        .collect();
    out.sort();
    out
}

/// One EndpointSlice of a provider, as much of it as a consumer's copy needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The Service it belongs to (its [`SERVICE_NAME_LABEL`]).
    pub service: String,
    /// `addressType`.
    pub address_type: String,
    /// Endpoints: addresses, conditions, hostname and zone of each.
    pub endpoints: Vec<Value>,
    /// `ports`.
    pub ports: Value,
}

impl Slice {
    /// Reads a live EndpointSlice; `None` for a slice flotilla wrote (never a source) or
    /// one that names no Service.
    pub fn read(object: &Value) -> Option<Slice> {
        let metadata = object.get("metadata")?;
        let labels = metadata.get("labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        if label(MANAGED_BY_LABEL) == Some(CONTROLLER) {
            return None;
        }
        let endpoints = object.get("endpoints").and_then(Value::as_array).into_iter().flatten();
        Some(Slice {
            namespace: metadata.get("namespace")?.as_str()?.to_owned(),
            name: metadata.get("name")?.as_str()?.to_owned(),
            service: label(SERVICE_NAME_LABEL)?.to_owned(),
            address_type: object.get("addressType").and_then(Value::as_str).unwrap_or("IPv4").to_owned(),
            endpoints: endpoints.map(endpoint).collect(),
            ports: object.get("ports").cloned().unwrap_or(Value::Array(Vec::new())),
        })
    }

    /// Endpoints whose `ready` condition is not false (the EndpointSlice API reads an
    /// unset condition as ready).
    pub fn ready(&self) -> usize {
        self.endpoints.iter().filter(|e| e.pointer("/conditions/ready") != Some(&Value::Bool(false))).count()
    }
}

/// What of an endpoint travels to another cluster: its addresses, conditions, hostname
/// and zone. `nodeName`, `targetRef` and topology `hints` name objects of the provider
/// and would mislead the consumer's proxies, so they stay behind.
fn endpoint(e: &Value) -> Value {
    let mut out = Map::new();
    for field in ["addresses", "conditions", "hostname", "zone"] {
        if let Some(v) = e.get(field) {
            out.insert(field.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// The EndpointSlice consumer clusters get for `slice` of `provider`, complete with
/// its labels and the digest of its content.
pub fn imported(exported: &Exported, provider: &str, slice: &Slice, instance: &str) -> Value {
    let mut object = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": exported.slice_name(provider, &slice.name),
            "namespace": exported.namespace,
            "labels": {
                SERVICE_NAME_LABEL: exported.target(),
                MANAGED_BY_LABEL: CONTROLLER,
                MCS_SERVICE_LABEL: exported.name,
                SOURCE_CLUSTER_LABEL: provider,
                INSTANCE_LABEL: instance,
            },
        },
        "addressType": slice.address_type,
        "endpoints": slice.endpoints,
        "ports": slice.ports,
    });
    let digest = crate::diff::digest(&object);
    object["metadata"]["annotations"] = json!({ DIGEST_ANNOTATION: digest });
    object
}

/// The digest [`imported`] wrote into a live slice.
pub fn written_digest(object: &Value) -> Option<&str> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(DIGEST_ANNOTATION)).and_then(Value::as_str)
}

/// Providers that export the same Service with different ports: the oldest export
/// wins (the MCS API's rule), ties going to the first cluster by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The provider whose ports stand.
    pub winner: String,
    /// Providers whose ports differ from the winner's; their endpoints are left out.
    pub losers: BTreeSet<String>,
    /// The MCS API's `Conflict` condition message: what differs, who won and why.
    pub message: String,
}

/// The conflict among an export's providers, if their rendered ports differ. `created`
/// holds each provider's ServiceExport `creationTimestamp` (RFC 3339, which sorts as
/// time does); a provider not in it counts as newest.
pub fn conflict(exported: &Exported, created: &BTreeMap<String, String>) -> Option<Conflict> {
    let rendered: Vec<(&String, &Vec<Port>)> =
        exported.providers.iter().filter_map(|(c, p)| p.as_ref().map(|p| (c, p))).collect();
    let distinct: BTreeSet<&Vec<Port>> = rendered.iter().map(|(_, p)| *p).collect();
    if distinct.len() < 2 {
        return None;
    }
    let (winner, ports) = rendered
        .iter()
        .min_by_key(|(c, _)| (created.get(*c).map_or((1, ""), |t| (0, t.as_str())), c.as_str()))
        .copied()?;
    let losers: BTreeSet<String> = rendered.iter().filter(|(_, p)| *p != ports).map(|(c, _)| (*c).clone()).collect();
    let spell = |p: &Vec<Port>| p.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let others = losers
        .iter()
        .map(|c| format!("{c} has {}", spell(exported.providers[c].as_ref().expect("rendered"))))
        .collect::<Vec<_>>()
        .join("; ");
    let why = if created.contains_key(winner) { "the oldest export" } else { "first by name" };
    let message = format!("ports differ: {winner} ({why}) wins with {}; {others}", spell(ports));
    Some(Conflict { winner: winner.clone(), losers, message })
}

#[cfg(test)]
mod tests;
