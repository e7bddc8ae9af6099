use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::model::{ClusterState, Limits, Plan, RepoFiles};

const CLUSTERS: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member2}\nspec: {syncMode: Push}\n";

/// `apiVersion`/`kind` named `name` in `shop`, divided 2:1 over member1 and member2.
fn divided(api_version: &str, kind: &str, name: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  resourceSelectors: [{{apiVersion: {api_version}, kind: {kind}, name: {name}}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2]}}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n        - {{targetCluster: {{clusterNames: [member1]}}, weight: 2}}\n        - {{targetCluster: {{clusterNames: [member2]}}, weight: 1}}\n"
    )
}

const ROLLOUT: &str = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 6\n  selector: {matchLabels: {app: web}}\n  strategy: {canary: {steps: [{setWeight: 20}, {pause: {}}]}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx, resources: {requests: {cpu: 250m, memory: 64Mi}}, envFrom: [{configMapRef: {name: web-config}}]}]\n";

fn plan(docs: &[&str]) -> Result<Plan, crate::LoadError> {
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), docs.join("\n---\n").into_bytes());
    crate::plan(&files, &ClusterState::default(), &Limits::default())
}

/// `field` of the object named `name` in `cluster`.
fn field(plan: &Plan, cluster: &str, name: &str, pointer: &str) -> Option<Value> {
    plan.manifests(cluster)
        .map(|m| m.unwrap())
        .find(|m| m.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        .and_then(|m| m.pointer(pointer).cloned())
}

#[test]
fn an_argo_rollout_is_divided_by_the_shipped_customization() {
    let plan = plan(&[CLUSTERS, ROLLOUT, &divided("argoproj.io/v1alpha1", "Rollout", "web")]).unwrap();
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(field(&plan, "member1", "web", "/spec/replicas"), Some(json!(4)));
    assert_eq!(field(&plan, "member2", "web", "/spec/replicas"), Some(json!(2)));
    // The requests came from kube.accuratePodRequirements.
    let template = plan.loaded.templates.iter().find(|t| t.key.kind == "Rollout").unwrap();
    assert_eq!(template.facts.workload.replicas, 6);
    assert_eq!(template.facts.workload.requests.get("cpu"), Some(&250));
}

#[test]
fn the_shipped_rollout_health_follows_its_phase() {
    let interpreter = Interpreter::new(Vec::new());
    let key = ObjectKey {
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Rollout".into(),
        namespace: Some("shop".into()),
        name: "web".into(),
    };
    let observed = |status: Value| json!({"spec": {"replicas": 3}, "status": status});
    let healthy = |status| interpreter.healthy(&key, &observed(status)).unwrap().unwrap();
    assert!(healthy(json!({"phase": "Healthy"})));
    assert!(healthy(json!({"phase": "Paused"})));
    assert!(!healthy(json!({"phase": "Degraded"})));
    assert!(!healthy(json!({"phase": "Progressing", "availableReplicas": 2, "updatedReplicas": 3})));
    assert!(healthy(json!({"phase": "Progressing", "availableReplicas": 3, "updatedReplicas": 3})));
    assert!(!interpreter.healthy(&key, &json!({"spec": {}})).unwrap().unwrap());
}

/// A user's own kind: replicas at `spec.size`, revised there.
const CUSTOMIZATION: &str = "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {name: cache}\nspec:\n  target: {apiVersion: example.com/v1, kind: Cache}\n  customizations:\n    replicaResource:\n      luaScript: |\n        function GetReplicas(obj)\n          return obj.spec.size, {resourceRequest = {cpu = '1'}}\n        end\n    replicaRevision:\n      luaScript: |\n        function ReviseReplica(obj, desired)\n          obj.spec.size = desired\n          return obj\n        end\n    dependencyInterpretation:\n      luaScript: |\n        function GetDependencies(obj)\n          return {{apiVersion = 'v1', kind = 'Secret', name = obj.spec.secret}}\n        end\n";

const CACHE: &str = "apiVersion: example.com/v1\nkind: Cache\nmetadata: {name: hot, namespace: shop}\nspec: {size: 9, secret: hot-auth}\n";

#[test]
fn a_repository_customization_divides_a_users_own_kind() {
    let plan = plan(&[CLUSTERS, CUSTOMIZATION, CACHE, &divided("example.com/v1", "Cache", "hot")]).unwrap();
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(field(&plan, "member1", "hot", "/spec/size"), Some(json!(6)));
    assert_eq!(field(&plan, "member2", "hot", "/spec/size"), Some(json!(3)));
    let template = plan.loaded.templates.iter().find(|t| t.key.kind == "Cache").unwrap();
    assert_eq!(template.facts.interpreted.len(), 1);
    assert_eq!(template.facts.interpreted[0].to_string(), "v1 Secret shop/hot-auth");
    // Without the customization the kind is copied whole.
    let plain = plan_without_customization();
    assert_eq!(field(&plain, "member1", "hot", "/spec/size"), Some(json!(9)));
}

fn plan_without_customization() -> Plan {
    plan(&[CLUSTERS, CACHE, &divided("example.com/v1", "Cache", "hot")]).unwrap()
}

#[test]
fn a_repository_customization_wins_over_the_shipped_one() {
    let own = "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {name: my-rollout}\nspec:\n  target: {apiVersion: argoproj.io/v1alpha1, kind: Rollout}\n  customizations:\n    replicaResource:\n      luaScript: |\n        function GetReplicas(obj)\n          return 3, nil\n        end\n";
    let plan = plan(&[CLUSTERS, own, ROLLOUT, &divided("argoproj.io/v1alpha1", "Rollout", "web")]).unwrap();
    // GetReplicas from the repository (3, split 2:1); ReviseReplica still shipped.
    assert_eq!(field(&plan, "member1", "web", "/spec/replicas"), Some(json!(2)));
    assert_eq!(field(&plan, "member2", "web", "/spec/replicas"), Some(json!(1)));
}

/// A customization of the Cache kind whose GetReplicas body is `body`.
fn replicas_script(body: &str) -> String {
    let body: String = body.lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {{name: hostile}}\nspec:\n  target: {{apiVersion: example.com/v1, kind: Cache}}\n  customizations:\n    replicaResource:\n      luaScript: |\n        function GetReplicas(obj)\n{body}        end\n"
    )
}

/// The load error of a repository whose customization runs `body`, and how long it took.
fn refused(body: &str) -> (String, Duration) {
    let started = Instant::now();
    let error = plan(&[CLUSTERS, &replicas_script(body), CACHE, &divided("example.com/v1", "Cache", "hot")])
        .err()
        .unwrap_or_else(|| panic!("{body} was not refused"))
        .to_string();
    (error, started.elapsed())
}

#[test]
fn a_script_that_loops_forever_is_refused_within_a_second() {
    let (error, took) = refused("while true do end");
    assert!(
        error.contains("ResourceInterpreterCustomization hostile: GetReplicas of example.com/v1 Cache shop/hot failed"),
        "{error}"
    );
    assert!(error.contains("budget"), "{error}");
    assert!(error.starts_with("fleet.yaml"), "names the template's file: {error}");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_script_that_allocates_without_end_is_refused_within_a_second() {
    let (error, took) =
        refused("local t = {}\nlocal s = 'xxxxxxxxxxxxxxxx'\nwhile true do s = s .. s; t[#t + 1] = s end");
    assert!(error.contains("memory limit"), "{error}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (error, _) = refused("return #string.rep('x', 1000000000)");
    assert!(error.contains("memory limit"), "{error}");
}

#[test]
fn a_script_cannot_reach_the_world() {
    for (body, says) in [
        ("os.execute('touch /tmp/flotilla-pwned')\nreturn 1", "os"),
        ("io.open('/etc/passwd')\nreturn 1", "io"),
        ("require('os')\nreturn 1", "not available"),
        ("print('hello')\nreturn 1", "print is not allowed"),
        ("loadstring('return 1')()\nreturn 1", "loadstring is not allowed"),
        ("return string.dump(GetReplicas)", "dump"),
        ("return math.random(10)", "random"),
        ("setmetatable({}, {})\nreturn 1", "setmetatable is not allowed"),
        ("debug.getinfo(1)\nreturn 1", "debug"),
        ("string.upper = nil\nreturn 1", "read-only"),
    ] {
        let (error, _) = refused(body);
        assert!(error.contains(says), "{body}: {error}");
    }
    assert!(!std::path::Path::new("/tmp/flotilla-pwned").exists());
}

#[test]
fn one_call_leaves_nothing_behind_for_the_next() {
    let script: Arc<str> = "calls = (calls or 0) + 1\nfunction F() return calls end".into();
    for _ in 0..3 {
        assert_eq!(lua::call(&script, "F", &[]).unwrap(), vec![json!(1)]);
    }
}

#[test]
fn a_script_that_does_not_compile_is_refused_on_load_naming_the_customization() {
    let broken = replicas_script("return (");
    let error = plan(&[CLUSTERS, &broken]).err().unwrap().to_string();
    assert!(error.contains("GetReplicas script does not compile"), "{error}");
    assert!(error.contains("fleet.yaml"), "{error}");
}

#[test]
fn json_comes_back_as_it_went_in() {
    let script: Arc<str> = "function F(obj) return obj end".into();
    let object = json!({"a": [], "b": {}, "c": [1, 2.5, "x", true], "d": {"e": null, "f": 7}});
    let back = lua::call(&script, "F", &[&object]).unwrap();
    // A null field is nil in Lua, so it is left out, as Karmada's conversion does.
    assert_eq!(back, vec![json!({"a": [], "b": {}, "c": [1, 2.5, "x", true], "d": {"f": 7}})]);
}

#[test]
fn every_shipped_customization_parses_and_compiles() {
    assert_eq!(shipped::all().len(), shipped::FILES.len());
    for c in shipped::all() {
        for operation in Operation::ALL {
            if let Some(script) = operation.script(&c.spec.customizations) {
                lua::compile(&script.lua_script).unwrap_or_else(|e| panic!("{} {}: {e}", c.name, operation.function()));
            }
        }
    }
}

/// A customization of the Cache kind whose Retain body is `body`.
fn retention(body: &str) -> String {
    let body: String = body.lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {{name: keeper}}\nspec:\n  target: {{apiVersion: example.com/v1, kind: Cache}}\n  customizations:\n    retention:\n      luaScript: |\n        function Retain(desired, observed)\n{body}        end\n"
    )
}

#[test]
fn retain_keeps_what_the_member_owns_and_the_rendered_digest() {
    use crate::finish::{Context, finish};
    let keep_mode = "if observed.spec ~= nil and observed.spec.mode ~= nil then\n  desired.spec.mode = observed.spec.mode\nend\nreturn desired";
    // The repository says fifo; the member's users switch it to lru, and it is theirs.
    let cache = CACHE.replace("size: 9", "size: 9, mode: fifo");
    let plan = plan(&[CLUSTERS, &retention(keep_mode), &cache, &divided("example.com/v1", "Cache", "hot")]).unwrap();
    let none = std::collections::BTreeSet::new();
    let share = finish(&plan, "member1", Context { instance: "prod", autoscaled: &none });
    let pending = &share.objects[0];
    let finished = pending.finish().unwrap();
    let digest = finished.manifest["metadata"]["annotations"][crate::diff::APPLIED_DIGEST].clone();
    let mut live = finished.manifest.clone();
    live["spec"]["mode"] = json!("lru");
    live["metadata"]["annotations"] = json!({});
    let retained = pending.retained(finished.clone(), &live).unwrap();
    assert_eq!(retained.manifest["spec"]["mode"], "lru");
    assert_eq!(retained.manifest["spec"]["size"], finished.manifest["spec"]["size"]);
    // flotilla's annotations survive a script that drops them, the digest unchanged.
    assert_eq!(retained.manifest["metadata"]["annotations"][crate::diff::APPLIED_DIGEST], digest);
    assert_eq!(retained.manifest["metadata"]["annotations"][crate::finish::INSTANCE_ANNOTATION], "prod");
    // So the member's own field is not a change to apply.
    let mut settled = retained.manifest.clone();
    settled["status"] = json!({"ready": true});
    assert_eq!(crate::diff::change(&retained.manifest, Some(&settled)), None);
    assert!(crate::diff::change(&finished.manifest, Some(&settled)).is_some());
    // Without the customization the manifest is left as rendered.
    let plain = plan_without_customization();
    let share = finish(&plain, "member1", Context { instance: "prod", autoscaled: &none });
    let finished = share.objects[0].finish().unwrap();
    assert_eq!(share.objects[0].retained(finished.clone(), &live).unwrap(), finished);
}

#[test]
fn a_retain_that_renames_or_fails_is_an_error_naming_the_customization() {
    use crate::finish::{Context, finish};
    let none = std::collections::BTreeSet::new();
    for (body, expected) in [
        ("desired.metadata.name = 'other'\nreturn desired", "another apiVersion, kind, name or namespace"),
        ("return 7", "returned no object"),
        ("error('no')", "no"),
    ] {
        let plan = plan(&[CLUSTERS, &retention(body), CACHE, &divided("example.com/v1", "Cache", "hot")]).unwrap();
        let share = finish(&plan, "member1", Context { instance: "prod", autoscaled: &none });
        let finished = share.objects[0].finish().unwrap();
        let error = share.objects[0].retained(finished.clone(), &finished.manifest).unwrap_err();
        assert_eq!(error.customization, "keeper", "{body}");
        assert_eq!(error.operation, Operation::Retain);
        assert!(error.to_string().contains(expected), "{body}: {error}");
        assert!(error.to_string().contains("shop/hot"), "{error}");
    }
}

#[test]
fn aggregate_status_runs_the_kinds_script_and_falls_back_to_karmadas_sums() {
    use crate::status::{Health, InMember, aggregated, reflected};
    let interpreter = Interpreter::new(Vec::new());
    let cloneset = ObjectKey::new("apps.kruise.io/v1alpha1", "CloneSet", Some("shop"), "web");
    let template = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "generation": 1}, "spec": {"replicas": 5}});
    let member = |ready: i64, replicas: i64| {
        json!({"replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas,
            "availableReplicas": ready, "observedGeneration": 1})
    };
    let (one, two) = (member(3, 3), member(1, 2));
    let progressing = Health::Progressing("1/2".into());
    let members = [
        InMember { cluster: "member1", health: &Health::Healthy, status: Some(&one) },
        InMember { cluster: "member2", health: &progressing, status: Some(&two) },
    ];
    let status = aggregated(&interpreter, &cloneset, || template.clone(), &members).unwrap().unwrap();
    assert_eq!(status["replicas"], 5, "{status}");
    assert_eq!(status["readyReplicas"], 4, "{status}");
    // A native kind: Karmada's sums, no script.
    let deployment = ObjectKey::new("apps/v1", "Deployment", Some("shop"), "web");
    let status = aggregated(&interpreter, &deployment, || template.clone(), &members).unwrap().unwrap();
    assert_eq!((status["replicas"].as_i64(), status["readyReplicas"].as_i64()), (Some(5), Some(4)));
    // A kind neither knows: no aggregate.
    let config = ObjectKey::new("v1", "ConfigMap", Some("shop"), "web");
    assert!(aggregated(&interpreter, &config, || template.clone(), &members).is_none());
    // Without ReflectStatus a member's status is its own.
    let live = json!({"status": {"replicas": 1}});
    assert_eq!(reflected(&interpreter, &deployment, &live).unwrap(), Some(json!({"replicas": 1})));
}

#[test]
fn a_repository_reflect_and_aggregate_see_karmadas_status_items() {
    use crate::status::{Health, InMember, aggregated, reflected};
    let own = "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {name: cache}\nspec:\n  target: {apiVersion: example.com/v1, kind: Cache}\n  customizations:\n    statusReflection:\n      luaScript: |\n        function ReflectStatus(observed)\n          return {ready = observed.status.readyShards}\n        end\n    statusAggregation:\n      luaScript: |\n        function AggregateStatus(desired, items)\n          local ready, seen = 0, ''\n          for i = 1, #items do\n            if items[i].status ~= nil then ready = ready + items[i].status.ready end\n            seen = seen .. items[i].clusterName .. ':' .. items[i].health .. ':' .. tostring(items[i].applied) .. ' '\n          end\n          desired.status = {readyReplicas = ready, replicas = desired.spec.size, seen = seen}\n          return desired\n        end\n";
    let plan = plan(&[CLUSTERS, own, CACHE, &divided("example.com/v1", "Cache", "hot")]).unwrap();
    let interpreter = &plan.loaded.interpreter;
    let key = ObjectKey::new("example.com/v1", "Cache", Some("shop"), "hot");
    let reflected = reflected(interpreter, &key, &json!({"status": {"readyShards": 6, "noise": 1}})).unwrap();
    assert_eq!(reflected, Some(json!({"ready": 6})));
    let members = [
        InMember { cluster: "member1", health: &Health::Healthy, status: reflected.as_ref() },
        InMember { cluster: "member2", health: &Health::Missing, status: None },
    ];
    let template = plan.loaded.template(&key).unwrap().object();
    let status = aggregated(interpreter, &key, || template.clone(), &members).unwrap().unwrap();
    assert_eq!(status["readyReplicas"], 6);
    assert_eq!(status["replicas"], 9);
    assert_eq!(status["seen"], "member1:Healthy:true member2:Unknown:false ");
}

/// A customization of the Cache kind whose GetDependencies returns `deps` (Lua).
fn dependencies_script(deps: &str) -> String {
    format!(
        "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {{name: deps}}\nspec:\n  target: {{apiVersion: example.com/v1, kind: Cache}}\n  customizations:\n    dependencyInterpretation:\n      luaScript: |\n        function GetDependencies(obj)\n          return {deps}\n        end\n"
    )
}

fn config_map(namespace: &str, name: &str, app: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{app: {app}}}}}\n"
    )
}

#[test]
fn dependencies_by_label_selector_are_the_repositorys_objects_it_selects() {
    let deps = "{{apiVersion = 'v1', kind = 'ConfigMap', labelSelector = {matchLabels = {app = 'hot'}}}, {apiVersion = 'v1', kind = 'ConfigMap', name = 'named', labelSelector = {matchLabels = {app = 'none'}}}}";
    let docs = [
        CLUSTERS.to_owned(),
        dependencies_script(deps),
        CACHE.to_owned(),
        divided("example.com/v1", "Cache", "hot"),
        config_map("shop", "hot-a", "hot"),
        config_map("shop", "hot-b", "hot"),
        config_map("shop", "cold", "cold"),
        config_map("elsewhere", "hot-c", "hot"),
    ];
    let plan = plan(&docs.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
    let template = plan.loaded.templates.iter().find(|t| t.key.kind == "Cache").unwrap();
    let names: Vec<String> = template.facts.interpreted.iter().map(ToString::to_string).collect();
    // The name wins over its selector; the other selector picks two of shop's three.
    assert_eq!(names, ["v1 ConfigMap shop/hot-a", "v1 ConfigMap shop/hot-b", "v1 ConfigMap shop/named"]);
}

#[test]
fn a_dependency_without_a_name_or_a_valid_selector_fails_the_revision() {
    for (deps, expected) in [
        ("{{apiVersion = 'v1', kind = 'ConfigMap'}}", "a name or a labelSelector"),
        ("{{apiVersion = 'v1', kind = 'ConfigMap', labelSelector = {matchLabel = {app = 'x'}}}}", "labelSelector"),
        ("{{kind = 'ConfigMap', name = 'x'}}", "apiVersion and kind"),
    ] {
        let docs = [CLUSTERS, &dependencies_script(deps), CACHE, &divided("example.com/v1", "Cache", "hot")];
        let error = plan(&docs).err().unwrap_or_else(|| panic!("{deps} was accepted")).to_string();
        assert!(error.contains(expected) && error.contains("deps"), "{deps}: {error}");
    }
}
