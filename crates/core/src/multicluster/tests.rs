use super::*;
use crate::model::{ClusterState, Limits, RepoFiles};

const CLUSTERS: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member2}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member3}\nspec: {syncMode: Push}\n";

/// The nginx seed's services: the Service in member1 and member2 (member2 with port
/// 8080 when `override_port`), exported from both, imported into member1.
fn seed(service_port: i64, override_port: bool) -> String {
    let mut docs = vec![
        CLUSTERS.to_owned(),
        format!("apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: shop}}\nspec:\n  selector: {{app: web}}\n  ports: [{{name: http, port: {service_port}, targetPort: 8080}}]\n"),
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\nmetadata: {name: web, namespace: shop}\n".into(),
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ports: [{port: 80, protocol: TCP}]}\n".into(),
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: web, namespace: shop}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: Service, name: web}, {apiVersion: multicluster.x-k8s.io/v1alpha1, kind: ServiceExport, name: web}]\n  placement: {clusterAffinity: {clusterNames: [member1, member2]}}\n".into(),
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: import, namespace: shop}\nspec:\n  resourceSelectors: [{apiVersion: multicluster.x-k8s.io/v1alpha1, kind: ServiceImport, name: web}]\n  placement: {clusterAffinity: {clusterNames: [member1]}}\n".into(),
    ];
    if override_port {
        docs.push("apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: port, namespace: shop}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: Service, name: web}]\n  overrideRules:\n  - targetCluster: {clusterNames: [member2]}\n    overriders:\n      plaintext: [{path: /spec/ports/0/port, operator: replace, value: 8080}]\n".into());
    }
    docs.join("---\n")
}

fn plan(text: &str) -> Plan {
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), text.as_bytes().to_vec());
    crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap()
}

fn http(port: i64) -> Vec<Port> {
    vec![Port { name: "http".into(), protocol: "TCP".into(), port }]
}

#[test]
fn an_export_provides_where_it_is_placed_and_an_import_consumes_where_it_is() {
    let services = services(&plan(&seed(80, false)));
    let expected = Exported {
        namespace: "shop".into(),
        name: "web".into(),
        via: Via::ServiceImport,
        providers: [("member1".into(), Some(http(80))), ("member2".into(), Some(http(80)))].into(),
        consumers: ["member1".to_owned()].into(),
    };
    assert_eq!(services, vec![expected]);
    assert_eq!(services[0].target(), "derived-web");
    assert!(services[0].imports("member1", "member1"), "a ServiceImport takes its own cluster's endpoints too");
}

#[test]
fn the_derived_service_follows_the_exported_services_ports() {
    // The ServiceImport says 80; the exported Service says 8443, and wins.
    let plan = plan(&seed(8443, false));
    let derived = plan.clusters["member1"]
        .iter()
        .find(|i| plan.loaded.templates[i.template].key.name == "derived-web")
        .map(|i| plan.manifest(i).unwrap())
        .expect("the derived Service is placed with its ServiceImport");
    assert_eq!(derived["spec"]["ports"], serde_json::json!([{"name": "http", "port": 8443}]));
    assert!(plan.clusters["member2"].iter().all(|i| plan.loaded.templates[i.template].key.name != "derived-web"));
}

#[test]
fn a_multi_cluster_service_places_its_service_on_providers_and_consumers() {
    let text = [
        CLUSTERS,
        "apiVersion: v1\nkind: Service\nmetadata: {name: api}\nspec: {selector: {app: api}, ports: [{port: 80}]}\n",
        "apiVersion: networking.karmada.io/v1alpha1\nkind: MultiClusterService\nmetadata: {name: api}\nspec:\n  types: [CrossCluster]\n  providerClusters: [{name: member2}]\n  consumerClusters: [{name: member1}]\n",
        // A policy that would put the Service elsewhere: the MultiClusterService wins.
        "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: everything}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: Service}]\n  placement: {clusterAffinity: {clusterNames: [member3]}}\n",
    ]
    .join("---\n");
    let plan = plan(&text);
    let placed: Vec<&str> = plan
        .clusters
        .iter()
        .filter(|(_, items)| items.iter().any(|i| plan.loaded.templates[i.template].key.name == "api"))
        .map(|(c, _)| c.as_str())
        .collect();
    assert_eq!(placed, ["member1", "member2"]);
    let service = plan.manifests("member1").map(Result::unwrap).find(|m| m["kind"] == "Service").unwrap();
    assert_eq!(service["metadata"]["annotations"]["flotilla.dev/policy"], "MultiClusterService default/api");
    let services = services(&plan);
    assert_eq!(services.len(), 1);
    let api = &services[0];
    assert_eq!((api.via, api.target()), (Via::MultiClusterService, "api".to_owned()));
    assert_eq!(api.providers.keys().collect::<Vec<_>>(), ["member2"]);
    assert_eq!(api.consumers, ["member1".to_owned()].into());
    assert!(!api.imports("member2", "member2"), "a provider's own slices already serve it");
    assert_eq!(api.slice_name("member2", "api-x7k2p"), "member2-api-x7k2p");
}

#[test]
fn empty_cluster_lists_mean_every_cluster_and_load_balancer_alone_claims_nothing() {
    let text = [
        CLUSTERS,
        "apiVersion: v1\nkind: Service\nmetadata: {name: api}\nspec: {ports: [{port: 80}]}\n",
        "apiVersion: networking.karmada.io/v1alpha1\nkind: MultiClusterService\nmetadata: {name: api}\nspec: {types: [CrossCluster]}\n",
        "apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec: {ports: [{port: 80}]}\n",
        "apiVersion: networking.karmada.io/v1alpha1\nkind: MultiClusterService\nmetadata: {name: lb}\nspec: {types: [LoadBalancer], ports: [{port: 80}]}\n",
    ]
    .join("---\n");
    let plan = plan(&text);
    let services = services(&plan);
    assert_eq!(services.len(), 1, "{services:?}");
    assert_eq!(services[0].providers.len(), 3);
    assert_eq!(services[0].consumers.len(), 3);
    assert!(plan.unclaimed.iter().any(|k| k.name == "lb"), "a LoadBalancer-only service is left to its policies");
}

#[test]
fn a_bad_multi_cluster_service_is_a_load_error_naming_its_line() {
    let text = format!(
        "{CLUSTERS}---\napiVersion: networking.karmada.io/v1alpha1\nkind: MultiClusterService\nmetadata: {{name: api}}\nspec: {{types: []}}\n"
    );
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("mcs.yaml".into(), text.into_bytes());
    let err = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap_err().to_string();
    assert!(err.contains("mcs.yaml") && err.contains("line 15") && err.contains("spec.types"), "{err}");
}

fn source_slice() -> Value {
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-abcde", "namespace": "shop", "labels": {
            "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.101.0.4"], "conditions": {"ready": true, "serving": true, "terminating": false},
             "nodeName": "member1-node1", "zone": "z1", "targetRef": {"kind": "Pod", "name": "web-1"}},
            {"addresses": ["10.101.0.5"], "conditions": {"ready": false}},
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    })
}

#[test]
fn an_imported_slice_keeps_addresses_ports_and_conditions_under_the_derived_service() {
    let slice = Slice::read(&source_slice()).unwrap();
    assert_eq!((slice.service.as_str(), slice.ready()), ("web", 1));
    let exported = services(&plan(&seed(80, false))).remove(0);
    let object = imported(&exported, "member1", &slice, "flotilla");
    assert_eq!(object["metadata"]["name"], "imported-member1-web-abcde");
    assert_eq!(
        object["metadata"]["labels"],
        serde_json::json!({
            "kubernetes.io/service-name": "derived-web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.flotilla.dev",
            "multicluster.kubernetes.io/service-name": "web",
            "multicluster.kubernetes.io/source-cluster": "member1",
            "flotilla.dev/instance": "flotilla",
        })
    );
    assert_eq!(
        object["endpoints"][0],
        serde_json::json!({"addresses": ["10.101.0.4"], "conditions": {"ready": true, "serving": true, "terminating": false}, "zone": "z1"})
    );
    assert_eq!(object["ports"], source_slice()["ports"]);
    // What flotilla wrote is never read back as a source, and its digest is stable.
    assert_eq!(Slice::read(&object), None);
    let digest = written_digest(&object).unwrap().to_owned();
    assert_eq!(written_digest(&imported(&exported, "member1", &slice, "flotilla")), Some(digest.as_str()));
    let mut moved = slice.clone();
    moved.endpoints[1]["conditions"]["ready"] = Value::Bool(true);
    assert_ne!(written_digest(&imported(&exported, "member1", &moved, "flotilla")), Some(digest.as_str()));
}

#[test]
fn long_slice_names_are_cut_and_stay_apart() {
    let exported = services(&plan(&seed(80, false))).remove(0);
    let (a, b) = (exported.slice_name("member1", &"a".repeat(250)), exported.slice_name("member2", &"a".repeat(250)));
    assert!(a.len() <= 253 && b.len() <= 253 && a != b, "{a} {b}");
}

#[test]
fn exports_with_different_ports_conflict_and_the_oldest_wins() {
    let exported = services(&plan(&seed(80, true))).remove(0);
    assert_eq!(exported.providers["member2"], Some(http(8080)));
    let created: BTreeMap<String, String> =
        [("member1".into(), "2026-12-02T10:00:05Z".into()), ("member2".into(), "2026-12-02T10:00:01Z".into())].into();
    let conflict = conflict(&exported, &created).unwrap();
    assert_eq!(conflict.winner, "member2");
    assert_eq!(conflict.losers, ["member1".to_owned()].into());
    assert_eq!(
        conflict.message,
        "ports differ: member2 (the oldest export) wins with http:8080/TCP; member1 has http:80/TCP"
    );
    // Without creation times, the first by name wins; agreeing exports do not conflict.
    assert_eq!(super::conflict(&exported, &BTreeMap::new()).unwrap().winner, "member1");
    assert_eq!(super::conflict(&services(&plan(&seed(80, false))).remove(0), &created), None);
}
