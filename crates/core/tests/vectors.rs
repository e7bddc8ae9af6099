//! Karmada's own test vectors (`data/karmada-vectors.yaml`, transcribed from Karmada's Go
//! tests; see its header for the commit), one named test per vector. The pipeline
//! stages are called directly with the vector's inputs; nothing here does I/O beyond
//! reading the vector file.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use flotilla_core::autoscale;
use flotilla_core::matching::{self, Candidate};
use flotilla_core::model::cluster::{Cluster, ClusterSpec};
use flotilla_core::model::policy::{
    CommandArgsOverrider, FieldOverrider, ImageOverrider, MapOverrider, ResourceSelector, SpreadConstraint,
    StaticClusterWeight,
};
use flotilla_core::model::{ObjectKey, Origin, RepoFiles};
use flotilla_core::overrides::{self, PatchOp, image};
use flotilla_core::render;
use flotilla_core::schedule::divide::{self, Dynamic, DynamicInput, TieBreak};
use flotilla_core::schedule::filter::cluster_matches;
use flotilla_core::schedule::spread;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn vectors() -> &'static BTreeMap<String, Value> {
    static VECTORS: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let text = include_str!("data/karmada-vectors.yaml");
        let doc: Value = serde_saphyr::from_str(text).expect("vector file parses");
        doc["vectors"].as_array().unwrap().iter().map(|v| (v["id"].as_str().unwrap().to_owned(), v.clone())).collect()
    })
}

fn vector(id: &str) -> (&'static Value, &'static Value) {
    let v = vectors().get(id).unwrap_or_else(|| panic!("no vector {id}"));
    (&v["input"], &v["expected"])
}

fn from<T: DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn counts(v: &Value) -> BTreeMap<String, i64> {
    from(v)
}

fn key_of(resource: &Value) -> (ObjectKey, BTreeMap<String, String>) {
    let key = ObjectKey {
        api_version: from(&resource["apiVersion"]),
        kind: from(&resource["kind"]),
        namespace: resource.get("namespace").map(from),
        name: from(&resource["name"]),
    };
    (key, resource.get("labels").map(from).unwrap_or_default())
}

fn cluster(name: &str, v: &Value) -> Cluster {
    let mut spec = json!({"syncMode": "Push"});
    for field in ["zones", "region", "provider"] {
        if let Some(x) = v.get(field) {
            spec[field] = x.clone();
        }
    }
    let spec: ClusterSpec = from(&spec);
    let labels = v.get("labels").map(from).unwrap_or_default();
    Cluster { name: name.into(), labels, spec, origin: Origin { file: "test".into(), document: 1, line: 1 } }
}

fn named(name: &str) -> Cluster {
    cluster(name, &json!({}))
}

// ---------------------------------------------------------------- matching

fn policy_matching(id: &str) {
    let (input, expected) = vector(id);
    let (key, labels) = key_of(&input["resource"]);
    let policies: Vec<(String, Option<i32>, Vec<ResourceSelector>)> = input["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (from(&p["name"]), from(&p["priority"].clone()), from(&p["selectors"])))
        .collect();
    let candidates =
        policies.iter().map(|(name, priority, selectors)| Candidate { name, priority: *priority, selectors });
    let winner = matching::best_policy(candidates, &key, &labels).map(|i| policies[i].0.clone());
    assert_eq!(winner, from::<Option<String>>(&expected["winner"]));
}

fn selector_priority(id: &str) {
    let (input, expected) = vector(id);
    let (key, labels) = key_of(&input["resource"]);
    let got: Vec<i64> = input["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| matching::selector_level(&from(&c["selector"]), &key, &labels) as i64)
        .collect();
    assert_eq!(got, from::<Vec<i64>>(&expected["priorities"]));
}

fn cluster_affinity(id: &str) {
    let (input, expected) = vector(id);
    let c = cluster(input["cluster"]["name"].as_str().unwrap(), &input["cluster"]);
    let got: Vec<bool> =
        input["cases"].as_array().unwrap().iter().map(|case| cluster_matches(&from(&case["affinity"]), &c)).collect();
    let names: Vec<&str> = input["cases"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    let want: Vec<bool> = from(&expected["matches"]);
    for ((name, got), want) in names.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "case {name}");
    }
    assert_eq!(got.len(), want.len());
}

// ---------------------------------------------------------------- division

fn webster(id: &str) {
    let (input, expected) = vector(id);
    let tie = match input.get("tie_breaker").and_then(Value::as_str) {
        Some("name-descending") => TieBreak::NameDescending,
        _ => TieBreak::NameAscending,
    };
    let got = divide::webster(from(&input["seats"]), &counts(&input["votes"]), &counts(&input["initial"]), tie);
    match expected.get("seats") {
        Some(seats) => assert_eq!(got, Some(counts(seats))),
        None => assert_eq!(got, None),
    }
}

fn dispenser(id: &str) {
    let (input, expected) = vector(id);
    let tie = TieBreak::from_uid(input["tie_breaker_uid"].as_str().unwrap_or(""));
    let got = match input.get("new_replicas") {
        Some(new) => divide::allocate_by_weight(from(new), &counts(&input["weights"]), &counts(&input["initial"]), tie),
        None => divide::allocate_by_weight(from(&input["sum"]), &counts(&input["weights"]), &BTreeMap::new(), tie),
    };
    assert_eq!(got, counts(expected));
}

fn static_weight(id: &str) {
    let (input, expected) = vector(id);
    let weights = match input.get("weights") {
        Some(w) => counts(w),
        None => {
            let rules: Vec<StaticClusterWeight> = from(&input["staticWeightList"]);
            let names: Vec<String> = from(&input["candidates"]);
            names
                .iter()
                .map(|n| {
                    let c = named(n);
                    let w = rules.iter().filter(|r| cluster_matches(&r.target_cluster, &c)).map(|r| r.weight).max();
                    (n.clone(), w.unwrap_or(0))
                })
                .collect()
        }
    };
    let got = divide::static_weights(from(&input["replicas"]), &weights, TieBreak::NameAscending);
    assert_eq!(got, counts(expected));
}

fn duplicated(id: &str) {
    let (input, expected) = vector(id);
    let names: Vec<String> = from(&input["candidates"]);
    assert_eq!(divide::duplicated(names.iter().map(String::as_str), from(&input["replicas"])), counts(expected));
}

fn strategy(input: &Value) -> Dynamic {
    if input["strategy"] == "Aggregated" { Dynamic::Aggregated } else { Dynamic::Weight }
}

/// Runs dynamic division with the vector's strategy and name-ascending ties.
fn run_dynamic(
    input: &Value,
    replicas: &Value,
    candidates: &[(String, i64)],
    previous: &BTreeMap<String, i64>,
) -> Result<BTreeMap<String, i64>, divide::Insufficient> {
    let kind = strategy(input);
    divide::dynamic(DynamicInput { kind, replicas: from(replicas), candidates, previous, tie: TieBreak::NameAscending })
}

fn dynamic_divide(id: &str) {
    let (input, expected) = vector(id);
    let candidates: Vec<(String, i64)> = from(&input["available"]);
    let got = run_dynamic(input, &input["target_replicas"], &candidates, &BTreeMap::new());
    assert_eq!(got.unwrap(), counts(expected));
}

/// Candidates ordered as the scheduler orders them: clusters already used first
/// (locality score), then by available replicas, then name.
fn dynamic_scale(id: &str) {
    let (input, expected) = vector(id);
    let allocatable = counts(&input["allocatable"]);
    let previous = counts(&input["previous"]);
    let clusters: Vec<Cluster> = allocatable.keys().map(|n| named(n)).collect();
    let mut ordered: Vec<spread::Candidate<'_>> = clusters
        .iter()
        .map(|c| {
            let a = allocatable[&c.name];
            let prev = previous.get(&c.name).copied();
            spread::Candidate {
                cluster: c,
                tier: 0,
                score: if prev.is_some() { 100 } else { 0 },
                available: a + prev.unwrap_or(0),
                allocatable: a,
            }
        })
        .collect();
    spread::order(&mut ordered);
    let candidates: Vec<(String, i64)> = ordered.iter().map(|c| (c.cluster.name.clone(), c.allocatable)).collect();
    let got = run_dynamic(input, &input["replicas"], &candidates, &previous);
    match expected.get("error") {
        Some(_) => assert!(got.is_err(), "expected unschedulable, got {got:?}"),
        None => assert_eq!(got.unwrap(), counts(expected)),
    }
}

fn spread_select(id: &str) {
    let (input, expected) = vector(id);
    let rows: Vec<(String, i64, i64)> = from(&input["candidates"]);
    let clusters: Vec<Cluster> = rows.iter().map(|(n, _, _)| named(n)).collect();
    let mut candidates: Vec<spread::Candidate<'_>> = rows
        .iter()
        .zip(&clusters)
        .map(|((_, score, available), c)| spread::Candidate {
            cluster: c,
            tier: 0,
            score: *score,
            available: *available,
            allocatable: *available,
        })
        .collect();
    spread::order(&mut candidates);
    let mut constraints: Vec<SpreadConstraint> = from(&input["spreadConstraints"]);
    for c in &mut constraints {
        c.min_groups = c.min_groups.max(1);
    }
    let divided = !input["replicaScheduling"].is_null();
    let got = spread::select(candidates, &constraints, divided, from(&input["need_replicas"])).unwrap();
    let names: Vec<String> = got.iter().map(|c| c.cluster.name.clone()).collect();
    assert_eq!(names, from::<Vec<String>>(&expected["selected"]));
}

// ---------------------------------------------------------------- overrides

/// The objects Karmada's overrider tests use, by the short names the vectors give them.
fn fixture(name: &str) -> (String, Value) {
    let deployment = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test", "namespace": "default"},
               "spec": {"template": {"spec": {"containers": containers}}}})
    };
    let object = match name {
        "D" => deployment(json!([{"name": "nginx", "image": "fictional.registry.example/imagename:v1.0.0"}])),
        "D2" => deployment(json!([
            {"name": "nginx", "image": "fictional.registry.example/imagename:v1.0.0"},
            {"name": "busybox", "image": "registry.k8s.io/busybox:0.8"}
        ])),
        "DC" => deployment(json!([{"name": "nginx", "image": "nginx", "command": ["nginx", "-v", "-t"]}])),
        "DA" => deployment(json!([{"name": "nginx", "image": "nginx", "args": ["nginx", "-v", "-t"]}])),
        "J" => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
                      "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34.0"}]}}}}),
        _ => json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "test"},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "command": ["nginx", "-v", "-t"]}]}}),
    };
    (object["kind"].as_str().unwrap().to_owned(), object)
}

fn override_image(id: &str) {
    let (input, expected) = vector(id);
    let (kind, object) = fixture(input["object"].as_str().unwrap());
    let overrider: ImageOverrider = from(&input["overrider"]);
    assert_eq!(image::patches(&object, &kind, &overrider), from::<Vec<PatchOp>>(&expected["patches"]));
}

fn override_command_args(id: &str, field: &str) {
    let (input, expected) = vector(id);
    let (kind, object) = fixture(input["object"].as_str().unwrap());
    let overrider: CommandArgsOverrider = from(&input["overrider"]);
    let got = overrides::command_args_patches(&object, &kind, &overrider, field);
    assert_eq!(got, from::<Vec<PatchOp>>(&expected["patches"]));
}

fn override_map(id: &str, field: &str) {
    let (input, expected) = vector(id);
    let mut object = json!({"metadata": {field: input[field].clone()}});
    for o in from::<Vec<MapOverrider>>(&input["overriders"]) {
        overrides::edit_map(&mut object, field, &o);
    }
    assert_eq!(object["metadata"][field], expected[field]);
}

fn override_field(id: &str) {
    let (input, expected) = vector(id);
    let mut object = input["object"].clone();
    overrides::field(&mut object, &from::<FieldOverrider>(&input["overrider"])).unwrap();
    assert_eq!(object["data"], expected["data"]);
}

/// Loads a small repo through the real loader and plans it.
fn plan_repo(files: &[(&str, &str)]) -> flotilla_core::model::Plan {
    let files = RepoFiles {
        revision: "test".into(),
        files: files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec())).collect(),
        ..Default::default()
    };
    flotilla_core::plan(&files, &Default::default(), &Default::default()).expect("fixture repo loads")
}

const CLUSTERS: &str = "
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: cluster1}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: cluster2}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: test1}
spec: {syncMode: Push}
";

fn override_policy_labels(id: &str) {
    let (input, expected) = vector(id);
    let object = &input["object"];
    let template = json!({"apiVersion": object["apiVersion"], "kind": object["kind"],
        "metadata": {"name": object["name"], "namespace": object["namespace"], "labels": object["labels"], "annotations": object["annotations"]},
        "spec": {"replicas": 1}});
    let mut docs = vec![serde_json::to_string(&template).unwrap()];
    for p in input["overridePolicies"].as_array().unwrap() {
        let spec = json!({"resourceSelectors": p["resourceSelectors"], "overrideRules": p["overrideRules"]});
        docs.push(
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
                   "metadata": {"name": p["name"], "namespace": p["namespace"]}, "spec": spec})
            .to_string(),
        );
    }
    docs.push(
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "all"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}})
        .to_string(),
    );
    let plan = plan_repo(&[("clusters.yaml", CLUSTERS), ("app.yaml", &docs.join("\n---\n"))]);
    let cluster = input["cluster"].as_str().unwrap();
    let rendered = &plan.clusters[cluster][0];
    let manifest = plan.manifest(rendered).unwrap();
    let without_ours = |m: &Value| -> BTreeMap<String, String> {
        from::<BTreeMap<String, String>>(m)
            .into_iter()
            .filter(|(k, _)| !k.starts_with("flotilla.dev/") && !k.starts_with("work.karmada.io/"))
            .collect()
    };
    assert_eq!(without_ours(&manifest["metadata"]["labels"]), from::<BTreeMap<String, String>>(&expected["labels"]));
    assert_eq!(
        without_ours(&manifest["metadata"]["annotations"]),
        from::<BTreeMap<String, String>>(&expected["annotations"])
    );
    let applied: Vec<String> = overrides::applied_policies(&plan.loaded, &rendered.overrides).into_keys().collect();
    let want: Vec<String> =
        expected["appliedOverrides"].as_array().unwrap().iter().map(|p| from(&p["policyName"])).collect();
    assert_eq!(applied, want);
}

/// The policies of Karmada's `TestGetMatchingOverridePolicies`: overridePolicy1 selects
/// the Deployment by name (rule 0 for cluster1+cluster2, rule 1 for cluster2),
/// overridePolicy2 has no selectors, overridePolicy3 an empty selector list.
const ORDER_POLICIES: &str = "
apiVersion: apps/v1
kind: Deployment
metadata: {name: test, namespace: default}
spec: {replicas: 1}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: all, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: test}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: overridePolicy1, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: test}]
  overrideRules:
  - targetCluster: {clusterNames: [cluster1, cluster2]}
    overriders: {plaintext: [{path: /metadata/annotations/foo, operator: add, value: bar}]}
  - targetCluster: {clusterNames: [cluster2]}
    overriders: {plaintext: [{path: /metadata/annotations/aaa, operator: add, value: bbb}]}
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: overridePolicy2, namespace: default}
spec:
  overrideRules:
  - targetCluster: {clusterNames: [cluster1, cluster2]}
    overriders: {plaintext: [{path: /metadata/annotations/hello, operator: add, value: world}]}
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: overridePolicy3, namespace: default}
spec:
  resourceSelectors: []
  overrideRules:
  - targetCluster: {clusterNames: [cluster1, cluster2]}
    overriders: {plaintext: [{path: /metadata/annotations/hello, operator: add, value: world}]}
";

fn override_order(id: &str) {
    let (input, expected) = vector(id);
    let wanted: Vec<&str> = input["policies"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    let docs: Vec<&str> = ORDER_POLICIES
        .split("\n---\n")
        .filter(|d| !d.contains("kind: OverridePolicy") || wanted.iter().any(|w| d.contains(&format!("name: {w},"))))
        .collect();
    let plan = plan_repo(&[("clusters.yaml", CLUSTERS), ("app.yaml", &docs.join("\n---\n"))]);
    let cluster = plan.loaded.clusters.iter().find(|c| c.name == input["cluster"]).unwrap();
    let rules = overrides::matching(&plan.loaded, &plan.loaded.templates[0], cluster);
    let got: Vec<(String, String)> = rules
        .iter()
        .map(|r| (plan.loaded.override_policies[r.policy].name.clone(), format!("rule{}", r.rule)))
        .collect();
    // The vector names overriders (overriders1..3); map them to (policy, rule) positions.
    let want: Vec<(String, String)> = from::<Vec<(String, String)>>(&expected["apply_sequence"])
        .into_iter()
        .map(|(policy, overriders)| {
            let rule = if policy == "overridePolicy1" && overriders == "overriders2" { "rule1" } else { "rule0" };
            (policy, rule.to_owned())
        })
        .collect();
    assert_eq!(got, want);
}

// ---------------------------------------------------------------- rendering

fn naming(id: &str) {
    let (input, expected) = vector(id);
    let got: Vec<String> = input["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| render::binding_name(c["kind"].as_str().unwrap(), c["name"].as_str().unwrap()))
        .collect();
    assert_eq!(got, from::<Vec<String>>(&expected["names"]));
}

fn revise_replicas(id: &str) {
    let (input, expected) = vector(id);
    let want: Vec<i64> = from(&expected["after"]);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(want) {
        let kind = case["kind"].as_str().unwrap();
        let (api_version, field) = if kind == "Job" { ("batch/v1", "parallelism") } else { ("apps/v1", "replicas") };
        let key = ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: "x".into(),
        };
        let mut object = json!({"spec": {field: case["before"]}});
        render::revise_replicas(&mut object, &key, Some(from(&case["assigned"])), None);
        assert_eq!(object["spec"][field], want, "{kind}");
    }
}

fn aggregate_status(id: &str) {
    let (input, expected) = vector(id);
    let key = ObjectKey {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some("d".into()),
        name: "x".into(),
    };
    let members: BTreeMap<String, Value> = from(&input["members"]);
    let got = flotilla_core::status::aggregate(&key, members.values()).unwrap();
    assert_eq!(got, expected["status"]);
}

fn conflict_resolution(id: &str) {
    let (input, expected) = vector(id);
    let want: Vec<String> = from(&expected["work_annotation"]);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(want) {
        let got = render::conflict_resolution(case["template_annotation"].as_str(), case["policy"] == "Overwrite");
        assert_eq!(got, want, "{case}");
    }
}

/// A running, ready pod started long ago, with `request` milli-CPU and, if given, a
/// sample of `usage` milli-CPU.
fn cpu_pod(name: &str, request: i64, usage: Option<i64>) -> autoscale::Pod {
    autoscale::Pod {
        name: name.into(),
        phase: autoscale::PodPhase::Running,
        deleted: false,
        ready: Some(autoscale::Ready { status: true, last_transition: 0 }),
        start_time: Some(0),
        requests: [("c".to_owned(), [("cpu".to_owned(), request)].into())].into(),
        usage: usage.map(|u| autoscale::Usage {
            timestamp: 1_000,
            window: 30,
            containers: [("c".to_owned(), [("cpu".to_owned(), u)].into())].into(),
        }),
    }
}

fn fhpa_resource(id: &str) {
    let (input, expected) = vector(id);
    let requests: BTreeMap<String, i64> = from(&input["pods"]);
    let usage: BTreeMap<String, i64> = from(&input["metrics"]);
    let pods: Vec<_> = requests.iter().map(|(name, r)| cpu_pod(name, *r, usage.get(name).copied())).collect();
    let got = autoscale::replicas::resource_utilization(
        from(&input["currentReplicas"]),
        from(&input["targetUtilization"]),
        "cpu",
        None,
        &autoscale::replicas::Measured {
            pods: &pods,
            calibration: from(&input["calibration"]),
            timing: &autoscale::Timing::default(),
            now: 10_000,
        },
    )
    .unwrap();
    assert_eq!(got.replicas, from::<i64>(&expected["replicas"]));
    assert_eq!(got.utilization, Some(from(&expected["utilization"])));
    assert_eq!(got.average, from::<i64>(&expected["rawUtilization"]));
}

fn fhpa_plain(id: &str) {
    let (input, expected) = vector(id);
    let target: i64 = from(&input["targetUsage"]);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(expected["results"].as_array().unwrap()) {
        let metrics: BTreeMap<String, i64> = from(&case["metrics"]);
        let (mut unready, mut missing, mut ready) = (BTreeSet::new(), BTreeSet::new(), 0);
        for pod in case["pods"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()) {
            let name = pod.split_whitespace().next().unwrap().to_owned();
            if pod.contains("unready") {
                unready.insert(name);
            } else if !metrics.contains_key(&name) {
                missing.insert(name);
            } else {
                ready += 1;
            }
        }
        let got = autoscale::replicas::plain_metric(
            from(&case["currentReplicas"]),
            target,
            metrics,
            ready,
            &unready,
            &missing,
            from(&case["calibration"]),
            autoscale::Timing::default().tolerance,
        );
        assert_eq!(got, (from(&want["replicas"]), from(&want["usage"])), "{}", case["name"]);
    }
}

fn fhpa_usage_ratio(id: &str) {
    let (input, expected) = vector(id);
    let want: Vec<i64> = from(&expected["replicas"]);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(want) {
        let got = autoscale::replicas::usage_ratio_replicas(
            from(&case["currentReplicas"]),
            from(&case["usageRatio"]),
            from(&case["readyPods"]),
            from(&case["calibration"]),
            autoscale::Timing::default().tolerance,
        );
        assert_eq!(got, want, "{}", case["name"]);
    }
}

fn fhpa_convert_rules(id: &str) {
    let (input, expected) = vector(id);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(expected["results"].as_array().unwrap()) {
        let (replicas, reason, _) = autoscale::normalize::clamp_without_behavior(
            from(&case["current"]),
            from(&case["desired"]),
            from(&case["min"]),
            from(&case["max"]),
        );
        assert_eq!((replicas, reason), (from(&want["replicas"]), want["condition"].as_str().unwrap()), "{case}");
    }
}

fn fhpa_scale_up_limit(id: &str) {
    let (input, expected) = vector(id);
    let now = 10_000;
    let events = |v: &Value| -> Vec<autoscale::Stamped> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| autoscale::Stamped {
                at: now - e["age"].as_str().unwrap().trim_end_matches('s').parse::<i64>().unwrap(),
                value: from(&e["change"]),
            })
            .collect()
    };
    let want: Vec<i64> = from(&expected["limit"]);
    for (case, want) in input["cases"].as_array().unwrap().iter().zip(want) {
        let rules: flotilla_core::model::autoscale::ScalingRules = from(&case["rules"]);
        let behavior = flotilla_core::model::autoscale::Behavior { scale_up: Some(rules), scale_down: None };
        let (up, _) = autoscale::normalize::defaults(&behavior, 300);
        let got = autoscale::normalize::scale_up_limit(
            from(&case["current"]),
            &events(&case["upEvents"]),
            &events(&case["downEvents"]),
            &up,
            now,
        );
        assert_eq!(got, want, "{}", case["name"]);
    }
}

macro_rules! vectors {
    ($($test:ident => $runner:ident($id:literal $(, $extra:literal)*);)*) => {
        $(
            #[test]
            fn $test() {
                $runner($id $(, $extra)*);
            }
        )*

        /// Guards against a vector in the file with no test here.
        #[test]
        fn every_vector_in_scope_has_a_test() {
            let covered = [$($id),*];
            let out_of_scope: [&str; 0] = [];
            for (id, v) in vectors() {
                let category = v["category"].as_str().unwrap();
                if !out_of_scope.contains(&category) {
                    assert!(covered.contains(&id.as_str()), "vector {id} has no test");
                }
            }
        }
    };
}

vectors! {
    fhpa_resource_scale_up => fhpa_resource("fhpa-resource-scale-up");
    fhpa_resource_within_tolerance => fhpa_resource("fhpa-resource-within-tolerance");
    fhpa_resource_calibration => fhpa_resource("fhpa-resource-calibration");
    fhpa_plain_table => fhpa_plain("fhpa-plain-table");
    fhpa_usage_ratio_table => fhpa_usage_ratio("fhpa-usage-ratio-table");
    fhpa_convert_rules_table => fhpa_convert_rules("fhpa-convert-rules-table");
    fhpa_scaleup_limit_behavior_table => fhpa_scale_up_limit("fhpa-scaleup-limit-behavior-table");
    policy_match_empty => policy_matching("policy-match-empty");
    policy_match_implicit_name_beats_label_beats_all => policy_matching("policy-match-implicit-name-beats-label-beats-all");
    policy_match_explicit_1_beats_unset => policy_matching("policy-match-explicit-1-beats-unset");
    policy_match_equal_explicit_name_order => policy_matching("policy-match-equal-explicit-name-order");
    policy_match_negative_priority_loses => policy_matching("policy-match-negative-priority-loses");
    selector_priority_table => selector_priority("selector-priority-table");
    cluster_match_table => cluster_affinity("cluster-match-table");
    webster_example_alpha_beta_gamma => webster("webster-example-alpha-beta-gamma");
    webster_empty_votes => webster("webster-empty-votes");
    webster_tie_fewer_seats => webster("webster-tie-fewer-seats");
    webster_custom_tiebreak_desc => webster("webster-custom-tiebreak-desc");
    webster_old_and_new_compete => webster("webster-old-and-new-compete");
    dispenser_scaleup_6 => dispenser("dispenser-scaleup-6");
    dispenser_scaleup_2 => dispenser("dispenser-scaleup-2");
    dispenser_ha_2to1_2 => dispenser("dispenser-ha-2to1-2");
    dispenser_170_110_60_5 => dispenser("dispenser-170-110-60-5");
    dispenser_uid_odd => dispenser("dispenser-uid-odd");
    spread_empty_clusters => dispenser("spread-empty-clusters");
    spread_111_12 => dispenser("spread-111-12");
    spread_123_13 => dispenser("spread-123-13");
    static_12_321 => static_weight("static-12-321");
    static_13_321 => static_weight("static-13-321");
    static_0_replicas => static_weight("static-0-replicas");
    static_max_of_matching_rules => static_weight("static-max-of-matching-rules");
    distribution_3_111 => static_weight("distribution-3-111");
    distribution_7_2111 => static_weight("distribution-7-2111");
    distribution_9_2111 => static_weight("distribution-9-2111");
    distribution_6_2111 => static_weight("distribution-6-2111");
    distribution_6_111 => static_weight("distribution-6-111");
    legacy_static_14_321_is_superseded_by_webster => legacy_static("legacy-static-14-321");
    dup_two_clusters => duplicated("dup-two-clusters");
    dup_zero_replicas => duplicated("dup-zero-replicas");
    dynamic_divide_18_12_6 => dynamic_divide("dynamic-divide-18-12-6");
    dynamic_divide_6_12_6 => dynamic_divide("dynamic-divide-6-12-6");
    aggregated_divide_6_6_6 => dynamic_divide("aggregated-divide-6-6-6");
    scale_down_dynamic_12_to_6 => dynamic_scale("scale-down-dynamic-12-to-6");
    scale_up_dynamic_insufficient => dynamic_scale("scale-up-dynamic-insufficient");
    scale_down_aggregated_12_to_8 => dynamic_scale("scale-down-aggregated-12-to-8");
    scale_up_aggregated_6_6_20 => dynamic_scale("scale-up-aggregated-6-6-20");
    scale_up_aggregated_cluster_replaced => dynamic_scale("scale-up-aggregated-cluster-replaced");
    scaleup_first_dynamic_8_8_10 => dynamic_scale("scaleup-first-dynamic-8-8-10");
    scaleup_first_aggregated_6_8_10 => dynamic_scale("scaleup-first-aggregated-6-8-10");
    scaleup_first_aggregated_insufficient => dynamic_scale("scaleup-first-aggregated-insufficient");
    select_clusters_by_score_duplicated => spread_select("select-clusters-by-score-duplicated");
    select_clusters_satisfy_available => spread_select("select-clusters-satisfy-available");
    override_image_job_registry_add => override_image("override-image-job-registry-add");
    override_image_registry_add_suffix => override_image("override-image-registry-add-suffix");
    override_image_registry_remove => override_image("override-image-registry-remove");
    override_image_repository_replace => override_image("override-image-repository-replace");
    override_image_tag_add_invalid_ignored => override_image("override-image-tag-add-invalid-ignored");
    override_image_tag_remove => override_image("override-image-tag-remove");
    override_image_two_containers_no_predicate => override_image("override-image-two-containers-no-predicate");
    override_command_add => override_command_args("override-command-add", "command");
    override_command_remove_empty => override_command_args("override-command-remove-empty", "command");
    override_command_pod => override_command_args("override-command-pod", "command");
    override_args_add => override_command_args("override-args-add", "args");
    override_args_absent_field => override_command_args("override-args-absent-field", "args");
    override_labels_add_to_empty => override_map("override-labels-add-to-empty", "labels");
    override_labels_add => override_map("override-labels-add", "labels");
    override_annotations_replace_missing_noop => override_map("override-annotations-replace-missing-noop", "annotations");
    override_labels_annotations_policy => override_policy_labels("override-labels-annotations-policy");
    override_field_yaml => override_field("override-field-yaml");
    override_order_cluster1 => override_order("override-order-cluster1");
    override_order_empty_selector_list => override_order("override-order-empty-selector-list");
    names_binding_table => naming("names-binding-table");
    revise_replica_table => revise_replicas("revise-replica-table");
    conflict_resolution_table => conflict_resolution("conflict-resolution-table");
    aggregate_deployment_sum => aggregate_status("aggregate-deployment-sum");
}

/// Karmada ≤ v1.15 split 14 at 3:2:1 as 8/4/2 (floor, then remainders by weight).
/// flotilla follows v1.16+ (Webster), which gives 7/5/2; the vector documents the old
/// answer, so this test pins that we do not give it.
fn legacy_static(id: &str) {
    let (input, expected) = vector(id);
    let got = divide::static_weights(from(&input["replicas"]), &counts(&input["weights"]), TieBreak::NameAscending);
    assert_ne!(got, counts(expected));
    assert_eq!(got, counts(&json!({"member1": 7, "member2": 5, "member3": 2})));
}
