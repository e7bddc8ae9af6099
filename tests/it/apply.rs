//! `flotilla apply` against real member clusters.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::members::{Dedicated, Members, members};
use crate::support::{repo, run, write};

pub fn apply(members: &Members, repo: &Path, instance: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "apply",
        repo.to_str().unwrap(),
        "--kubeconfig",
        members.kubeconfig().to_str().unwrap(),
        "--instance",
        instance,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

async fn deployments(members: &Members, cluster: &str, ns: &str) -> Vec<String> {
    let api: Api<Deployment> = Api::namespaced(members.client(cluster).await, ns);
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels("flotilla.dev/managed=true"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    names.sort();
    names
}

async fn config_maps(members: &Members, cluster: &str, ns: &str) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(members.client(cluster).await, ns);
    let mut names: Vec<String> =
        api.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    names.retain(|n| n != "kube-root-ca.crt");
    names.sort();
    names
}

/// A repo of three members and, in namespace `ns`, ConfigMaps placed by name.
pub fn fleet(ns: &str, placements: &[(&str, &[&str])]) -> String {
    let mut docs = vec![format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")];
    for m in 1..=3 {
        docs.push(format!("apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member{m}}}\nspec: {{syncMode: Push}}\n"));
    }
    for (name, clusters) in placements {
        docs.push(format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{k: v}}\n"
        ));
        docs.push(format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: {name}}}]\n  placement: {{clusterAffinity: {{clusterNames: [{}]}}}}\n",
            clusters.join(", ")
        ));
    }
    docs.join("---\n")
}

fn in_namespace(ns: &'static str, instance: &'static str) -> impl Fn(&Value) -> bool {
    move |e| {
        let r = &e["objectRef"];
        r["namespace"] == ns
            || (r["namespace"] == "flotilla-system" && r["name"] == format!("flotilla-inventory-{instance}"))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_tutorials_land_where_they_say_and_a_second_run_writes_nothing() {
    let members = members();
    // member3 is a Pull cluster, as in Karmada's quick start: a push leaves it alone.
    let (code, stdout, stderr) = apply(members, Path::new("examples/repo"), "seeds", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.lines().any(|l| l.starts_with("member3: skipped (syncMode Pull")), "{stdout}");
    assert_eq!(
        deployments(members, "member1", "default").await,
        ["nginx", "productpage-v1", "reviews-v1", "reviews-v2", "reviews-v3"]
    );
    assert_eq!(
        deployments(members, "member2", "default").await,
        ["details-v1", "ratings-v1", "reviews-v1", "reviews-v2", "reviews-v3"]
    );
    assert!(deployments(members, "member3", "default").await.is_empty(), "nothing pushed to a Pull member");
    // Named explicitly, it is applied from here (what its agent would do).
    let (code, stdout, stderr) = apply(members, Path::new("examples/repo"), "seeds", &["--cluster", "member3"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(deployments(members, "member3", "default").await, ["ratings-v1"]);
    let (code, table, stderr) = run(&["get", "deployments", "--kubeconfig", members.kubeconfig().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CLUSTER", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    let rows: std::collections::BTreeSet<(String, String)> = table
        .lines()
        .skip(1)
        .map(|l| {
            let mut cells = l.split_whitespace();
            (cells.next().unwrap().to_owned(), cells.next().unwrap().to_owned())
        })
        .collect();
    for (name, cluster) in
        [("nginx", "member1"), ("productpage-v1", "member1"), ("details-v1", "member2"), ("ratings-v1", "member3")]
    {
        assert!(rows.contains(&(name.to_owned(), cluster.to_owned())), "{name} in {cluster}:\n{table}");
    }
    assert!(!rows.contains(&("ratings-v1".to_owned(), "member1".to_owned())));
    let status = || run(&["status", "examples/repo", "--kubeconfig", members.kubeconfig().to_str().unwrap()]);
    let mut healthy = status();
    for _ in 0..100 {
        if healthy.0 == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        healthy = status();
    }
    assert_eq!(healthy.0, 0, "everything becomes healthy:\n{}", healthy.1);
    let ratings = healthy.1.lines().find(|l| l.contains(" ratings-v1 ")).unwrap();
    assert_eq!(
        ratings.split_whitespace().collect::<Vec<_>>(),
        ["Deployment", "default", "ratings-v1", "member2,member3", "2/2", "Healthy"]
    );
    let seeds = |e: &Value| {
        let r = &e["objectRef"];
        r["namespace"] == "default"
            || r["resource"] == "customresourcedefinitions"
            || r["name"] == "flotilla-inventory-seeds"
    };
    let before = members.writes(seeds);
    let (code, stdout, _) = apply(members, Path::new("examples/repo"), "seeds", &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("member1: 0 applied, 21 unchanged"), "{stdout}");
    assert_eq!(members.writes(seeds), before, "a no-op run sends no write request");
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_or_moving_a_template_prunes_exactly_where_it_was() {
    let members = members();
    let dir = repo(&[]);
    let file = "fleet.yaml";
    write(dir.path(), file, fleet("e2e-prune", &[("a", &["member1", "member2"]), ("b", &["member2"])]).as_bytes());
    assert_eq!(apply(members, dir.path(), "prune", &[]).0, 0);
    assert_eq!(config_maps(members, "member1", "e2e-prune").await, ["a"]);
    assert_eq!(config_maps(members, "member2", "e2e-prune").await, ["a", "b"]);
    // A hand-made object in the same namespace is never flotilla's to delete.
    let handmade: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "handmade"}})).unwrap();
    Api::<ConfigMap>::namespaced(members.client("member2").await, "e2e-prune")
        .create(&Default::default(), &handmade)
        .await
        .unwrap();

    write(dir.path(), file, fleet("e2e-prune", &[("b", &["member2"])]).as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "prune", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(config_maps(members, "member1", "e2e-prune").await, Vec::<String>::new());
    assert_eq!(config_maps(members, "member2", "e2e-prune").await, ["b", "handmade"]);

    write(dir.path(), file, fleet("e2e-prune", &[("b", &["member3"])]).as_bytes());
    assert_eq!(apply(members, dir.path(), "prune", &[]).0, 0);
    assert_eq!(config_maps(members, "member2", "e2e-prune").await, ["handmade"]);
    assert_eq!(config_maps(members, "member3", "e2e-prune").await, ["b"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_that_opt_out_of_prune_stay_when_they_leave_git() {
    let members = members();
    let (dir, ns) = (repo(&[]), "e2e-keep");
    let names = ["ours", "flux", "argo", "plain"];
    let all: Vec<(&str, &[&str])> = names.iter().map(|n| (*n, &["member1"][..])).collect();
    write(dir.path(), "fleet.yaml", fleet(ns, &all).as_bytes());
    assert_eq!(apply(members, dir.path(), "keep", &[]).0, 0);
    // Annotated in the cluster, as someone would with kubectl, in three tools' spellings.
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    for (name, key, value) in [
        ("ours", "flotilla.dev/prune", "disabled"),
        ("flux", "kustomize.toolkit.fluxcd.io/prune", "disabled"),
        ("argo", "argocd.argoproj.io/sync-options", "Prune=false"),
    ] {
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        cms.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    }
    write(dir.path(), "fleet.yaml", fleet(ns, &[("other", &["member1"])]).as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "keep", &["--force-prune"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(config_maps(members, "member1", ns).await, ["argo", "flux", "other", "ours"]);
}

/// Two installs that render the same object: the second reports a conflict, never
/// re-stamps it (not even with conflictResolution Overwrite) and never prunes it.
#[tokio::test(flavor = "multi_thread")]
async fn another_instances_objects_are_conflicts_never_taken_over_or_pruned() {
    let members = members();
    let ns = "e2e-owners";
    let (a, b) = (repo(&[]), repo(&[]));
    write(a.path(), "fleet.yaml", fleet(ns, &[("shared", &["member1"])]).as_bytes());
    assert_eq!(apply(members, a.path(), "team-a", &[]).0, 0);
    let overwrite = fleet(ns, &[("shared", &["member1"]), ("b-only", &["member1"])]).replace(
        "metadata: {name: shared, namespace: e2e-owners}\ndata: {k: v}",
        "metadata: {name: shared, namespace: e2e-owners, annotations: {work.karmada.io/conflict-resolution: overwrite}}\ndata: {k: from-b}",
    );
    assert!(overwrite.contains("from-b"));
    write(b.path(), "fleet.yaml", overwrite.as_bytes());
    let (code, stdout, stderr) = apply(members, b.path(), "team-b", &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("managed by flotilla instance \"team-a\""), "{stderr}");
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    let shared = cms.get("shared").await.unwrap();
    assert_eq!(shared.metadata.annotations.unwrap()["flotilla.dev/instance"], "team-a");
    assert_eq!(shared.data.unwrap()["k"], "v", "not re-stamped");
    // team-b drops it from its repository and prunes: team-a's object stays.
    write(b.path(), "fleet.yaml", fleet(ns, &[("b-only", &["member1"])]).as_bytes());
    let (code, stdout, stderr) = apply(members, b.path(), "team-b", &["--force-prune"]);
    assert!(code <= 1, "{stdout}\n{stderr}");
    assert_eq!(config_maps(members, "member1", ns).await, ["b-only", "shared"]);
}

/// A kind whose discovery fails for another reason than "not served" (here an
/// aggregated API whose backend is missing answers 503) keeps its objects in the
/// inventory: they may exist, and dropping them would orphan them for good.
#[tokio::test(flavor = "multi_thread")]
async fn a_discovery_failure_never_drops_an_object_from_the_inventory() {
    let cluster = Dedicated::start(1);
    let members = &cluster.0;
    let dir = repo(&[]);
    let ns = "e2e-discovery";
    let member1 = fleet(ns, &[("cm", &["member1"])]).replace("member2", "member1").replace("member3", "member1");
    let docs: Vec<&str> = member1.split("---\n").collect();
    let repo_text = [docs[0], docs[1], docs[4], docs[5]].join("---\n");
    write(dir.path(), "fleet.yaml", repo_text.as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "disc", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let client = members.client("member1").await;
    let apiservice = serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.broken.example.com"},
        "spec": {"group": "broken.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                 "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "nowhere", "port": 443}}
    });
    let gvk = kube::api::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "apiservices");
    let apiservices: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    apiservices.create(&Default::default(), &serde_json::from_value(apiservice).unwrap()).await.unwrap();
    // The inventory says an object of that kind was applied before.
    let inventories: Api<ConfigMap> = Api::namespaced(client.clone(), "flotilla-system");
    let mut inventory = inventories.get("flotilla-inventory-disc").await.unwrap();
    let objects = inventory.data.as_mut().unwrap().get_mut("objects").unwrap();
    let mut entries: Vec<Value> = serde_json::from_str(objects).unwrap();
    entries.push(serde_json::json!(["broken.example.com/v1", "Gadget", ns, "g1"]));
    *objects = serde_json::to_string(&entries).unwrap();
    inventories.replace("flotilla-inventory-disc", &Default::default(), &inventory).await.unwrap();

    let (code, stdout, stderr) = apply(members, dir.path(), "disc", &["--force-prune", "--cluster-timeout", "40"]);
    assert_eq!(code, 1, "the object that could not be checked is a failure: {stdout}\n{stderr}");
    assert!(stderr.contains("Gadget") && stderr.contains("discovery"), "{stderr}");
    let kept = inventories.get("flotilla-inventory-disc").await.unwrap().data.unwrap()["objects"].clone();
    assert!(
        kept.contains(r#"["broken.example.com/v1","Gadget","e2e-discovery","g1"]"#),
        "still in the inventory: {kept}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_commit_or_an_empty_render_changes_nothing() {
    let members = members();
    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet("e2e-broken", &[("cm-x", &["member1"]), ("cm-y", &["member1"])]).as_bytes());
    assert_eq!(apply(members, dir.path(), "broken", &[]).0, 0);
    let writes = || members.writes(in_namespace("e2e-broken", "broken"));
    let before = writes();

    write(dir.path(), "oops.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z\n");
    let (code, _, stderr) = apply(members, dir.path(), "broken", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("oops.yaml"), "{stderr}");
    assert_eq!(writes(), before, "a repo that does not load touches no cluster");

    std::fs::remove_file(dir.path().join("oops.yaml")).unwrap();
    let clusters_only: String = fleet("e2e-broken", &[]).split("---\n").skip(1).collect::<Vec<_>>().join("---\n");
    write(dir.path(), "fleet.yaml", clusters_only.as_bytes());
    let (code, _, stderr) = apply(members, dir.path(), "broken", &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("empty"), "{stderr}");
    assert_eq!(config_maps(members, "member1", "e2e-broken").await, ["cm-x", "cm-y"], "an empty render prunes nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_one_member_frozen_the_others_converge_and_it_catches_up_later() {
    let cluster = Dedicated::start(3);
    let members = &cluster.0;
    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet("e2e-down", &[("c", &["member1", "member2", "member3"])]).as_bytes());
    members.freeze("member2", true);
    let (code, stdout, stderr) =
        apply(members, dir.path(), "down", &["--request-timeout", "2", "--cluster-timeout", "8"]);
    members.freeze("member2", false);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("member2"), "the dead cluster is named: {stderr}");
    assert_eq!(config_maps(members, "member1", "e2e-down").await, ["c"]);
    assert_eq!(config_maps(members, "member3", "e2e-down").await, ["c"]);
    let (code, stdout, stderr) = apply(members, dir.path(), "down", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(config_maps(members, "member2", "e2e-down").await, ["c"]);
}

/// Killing `flotilla apply` with SIGKILL at varied points, then running it again on the
/// next commit, converges with no orphaned and no missing objects: the inventory lists
/// everything before it is created and keeps it until it is gone.
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_at_any_point_then_rerun_converges() {
    let members = members();
    let ns = "e2e-kill";
    let state = |version: usize| -> Vec<(String, Vec<String>)> {
        let member = |i: usize| format!("member{}", i % 3 + 1);
        match version % 2 {
            0 => (0..60).map(|n| (format!("k{n}"), vec![member(n)])).collect(),
            _ => (20..80).map(|n| (format!("k{n}"), vec![member(n + 1), member(n + 2)])).collect(),
        }
    };
    let dir = repo(&[]);
    let write_state = |version: usize| {
        let s = state(version);
        let placements: Vec<(&str, Vec<&str>)> =
            s.iter().map(|(n, c)| (n.as_str(), c.iter().map(String::as_str).collect())).collect();
        let refs: Vec<(&str, &[&str])> = placements.iter().map(|(n, c)| (*n, c.as_slice())).collect();
        write(dir.path(), "fleet.yaml", fleet(ns, &refs).as_bytes());
    };
    let args = |dir: &Path| {
        vec![
            "apply".to_owned(),
            dir.to_str().unwrap().to_owned(),
            "--kubeconfig".into(),
            members.kubeconfig().to_str().unwrap().into(),
            "--instance".into(),
            "sigkill".into(),
            "--force-prune".into(),
        ]
    };
    // Kill points spread over the length of one full run, measured first.
    write_state(0);
    let clock = std::time::Instant::now();
    assert_eq!(run(&args(dir.path()).iter().map(String::as_str).collect::<Vec<_>>()).0, 0);
    let full_run = clock.elapsed();
    let mut seed: u64 = 7;
    let mut interrupted = 0;
    for trial in 0..12 {
        // The killed run moves the cluster from state 2t to 2t + 1 (they differ); the
        // next commit is state 2t + 2.
        write_state(2 * trial + 1);
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let delay = full_run.mul_f64(0.05 + 0.9 * ((seed >> 33) % 1000) as f64 / 1000.0);
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(args(dir.path()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(delay).await;
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        let _ = child.kill(); // SIGKILL; it may already have finished
        let _ = child.wait();
        // The next commit arrives: whatever the killed run created must still be found.
        write_state(2 * trial + 2);
        let (code, stdout, stderr) = run(&args(dir.path()).iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(code, 0, "trial {trial}: {stdout}\n{stderr}");
        for m in 1..=3 {
            let cluster = format!("member{m}");
            let mut want: Vec<String> =
                state(2 * trial + 2).into_iter().filter(|(_, c)| c.contains(&cluster)).map(|(n, _)| n).collect();
            want.sort();
            assert_eq!(
                config_maps(members, &cluster, ns).await,
                want,
                "trial {trial} (killed after {delay:?}), {cluster}"
            );
        }
    }
    assert!(interrupted >= 10, "only {interrupted} of 12 kills hit a running apply");
}

/// A HorizontalPodAutoscaler in a member owns its target's replicas: flotilla leaves
/// them alone (Karmada's retain-replicas), and then writes nothing on later runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_hpa_keeps_its_replicas() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use kube::api::{Patch, PatchParams, PostParams};

    let members = members();
    let ns = "e2e-hpa";
    let dir = repo(&[]);
    let deployment = format!(
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: scaled, namespace: {ns}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: s}}}}\n  template:\n    metadata: {{labels: {{app: s}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: scaled, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: scaled}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    );
    write(dir.path(), "fleet.yaml", (fleet(ns, &[]) + &deployment).as_bytes());
    assert_eq!(apply(members, dir.path(), "hpa", &[]).0, 0);
    let client = members.client("member1").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    assert_eq!(deployments.get("scaled").await.unwrap().spec.unwrap().replicas, Some(2));

    let hpa: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "scaled"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"}, "minReplicas": 1, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}
    }))
    .unwrap();
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns).create(&PostParams::default(), &hpa).await.unwrap();
    // What the HPA controller does: write the scale subresource as its own manager.
    let scale = serde_json::json!({"spec": {"replicas": 5}});
    deployments
        .patch_scale(
            "scaled",
            &PatchParams { field_manager: Some("hpa-sim".into()), ..Default::default() },
            &Patch::Merge(&scale),
        )
        .await
        .unwrap();

    let (code, stdout, stderr) = apply(members, dir.path(), "hpa", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(deployments.get("scaled").await.unwrap().spec.unwrap().replicas, Some(5), "the HPA's count stands");
    let before = members.writes(in_namespace(ns, "hpa"));
    let (code, stdout, _) = apply(members, dir.path(), "hpa", &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("member1: 0 applied"), "{stdout}");
    assert_eq!(members.writes(in_namespace(ns, "hpa")), before, "no fight over replicas");
}

/// An object that exists but was not created by flotilla is left alone under Karmada's
/// default conflict resolution (Abort) and taken over only with Overwrite.
#[tokio::test(flavor = "multi_thread")]
async fn existing_objects_are_taken_over_only_with_overwrite() {
    use kube::api::PostParams;

    let members = members();
    let ns = "e2e-conflict";
    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet(ns, &[]).as_bytes());
    assert_eq!(apply(members, dir.path(), "conflict", &[]).0, 0);
    let api: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    let mine: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "taken"}, "data": {"k": "mine"}})).unwrap();
    api.create(&PostParams::default(), &mine).await.unwrap();

    write(dir.path(), "fleet.yaml", fleet(ns, &[("taken", &["member1"])]).as_bytes());
    let (code, _, stderr) = apply(members, dir.path(), "conflict", &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("not created by flotilla"), "{stderr}");
    assert_eq!(api.get("taken").await.unwrap().data.unwrap()["k"], "mine");

    let overwrite = fleet(ns, &[("taken", &["member1"])]).replace(
        "resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: taken}]",
        "conflictResolution: Overwrite\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: taken}]",
    );
    write(dir.path(), "fleet.yaml", overwrite.as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "conflict", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(api.get("taken").await.unwrap().data.unwrap()["k"], "v");
}

/// With `--scope`, what the repository may touch is bounded from outside it: a
/// ClusterRoleBinding to cluster-admin and a ConfigMap in kube-system are problems
/// naming their file and rule, never applied; an object that falls out of scope is
/// never pruned either.
#[tokio::test(flavor = "multi_thread")]
async fn a_scope_bounds_what_the_repository_may_touch() {
    let members = members();
    let (ns, other) = ("e2e-scope-in", "e2e-scope-out");
    let dir = repo(&[]);
    let scope = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        scope.path(),
        "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: team}\nspec:\n  destinations: [{name: 'member*', namespace: 'e2e-scope-in'}]\n  clusterResourceWhitelist: [{group: '', kind: Namespace}]\n",
    )
    .unwrap();
    let scoped = ["--scope", scope.path().to_str().unwrap()];
    // Before the scope: an object in another namespace, applied by the same instance.
    let base = fleet(ns, &[("fine", &["member1"])]);
    let outside = fleet(other, &[("outside", &["member1"])]);
    let outside_docs: Vec<&str> = outside.split("---\n").collect();
    let with_outside = format!("{base}---\n{}---\n{}---\n{}", outside_docs[0], outside_docs[4], outside_docs[5]);
    write(dir.path(), "fleet.yaml", with_outside.as_bytes());
    assert_eq!(apply(members, dir.path(), "scoped", &[]).0, 0);

    let attack = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: e2e-scope-admin}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: e2e-scope-in}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: e2e-scope-planted, namespace: kube-system}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: e2e-scope-everything}\nspec:\n  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding}, {apiVersion: v1, kind: ConfigMap, namespace: kube-system}]\n  placement: {clusterAffinity: {clusterNames: [member1]}}\n";
    write(dir.path(), "attack.yaml", attack.as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "scoped", &scoped);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("attack.yaml:1")
            && stderr.contains("ClusterRoleBinding.rbac.authorization.k8s.io is not in clusterResourceWhitelist"),
        "{stderr}"
    );
    assert!(stderr.contains("namespace kube-system in cluster member1 is not among the destinations"), "{stderr}");
    assert!(stderr.contains("namespace e2e-scope-out in cluster member1"), "{stderr}");
    let client = members.client("member1").await;
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
    assert!(bindings.get_opt("e2e-scope-admin").await.unwrap().is_none(), "never applied");
    let kube_system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert!(kube_system.get_opt("e2e-scope-planted").await.unwrap().is_none(), "never applied");
    assert_eq!(config_maps(members, "member1", ns).await, ["fine"]);

    // Removed from Git, the out-of-scope object is still not this scope's to prune.
    std::fs::remove_file(dir.path().join("attack.yaml")).unwrap();
    write(dir.path(), "fleet.yaml", base.as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "scoped", &[&scoped[..], &["--force-prune"]].concat());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(config_maps(members, "member1", other).await, ["outside"], "outside the scope: never pruned");
}

/// With `--service-account`, objects are written by impersonating it, so the member's
/// own RBAC bounds the repository: what the account may not create fails with the API
/// server's reason, and nothing else changes.
#[tokio::test(flavor = "multi_thread")]
async fn objects_are_written_as_the_service_account_and_its_rbac_bounds_them() {
    use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    use kube::api::ObjectMeta;

    let members = members();
    let ns = "e2e-imp";
    let client = members.client("member1").await;
    let meta = |name: &str| ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() };
    fn created<T>(r: Result<T, kube::Error>) {
        match r {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(ns.into()), ..Default::default() }, ..Default::default() };
    created(namespaces.create(&Default::default(), &namespace).await);
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    created(
        sas.create(&Default::default(), &ServiceAccount { metadata: meta("deployer"), ..Default::default() }).await,
    );
    let role = Role {
        metadata: meta("deployer"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: ["get", "list", "create", "patch", "update", "delete"].map(String::from).to_vec(),
            ..Default::default()
        }]),
    };
    created(Api::<Role>::namespaced(client.clone(), ns).create(&Default::default(), &role).await);
    let binding = RoleBinding {
        metadata: meta("deployer"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "deployer".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "deployer".into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    created(Api::<RoleBinding>::namespaced(client.clone(), ns).create(&Default::default(), &binding).await);

    let docs = format!(
        "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member1}}\nspec: {{syncMode: Push}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: allowed, namespace: {ns}}}\ndata: {{k: v}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: denied, namespace: {ns}}}\nstringData: {{k: v}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: both, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}, {{apiVersion: v1, kind: Secret}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    );
    let dir = repo(&[("fleet.yaml", docs.as_bytes())]);
    let (code, stdout, stderr) =
        apply(members, dir.path(), "imp", &["--service-account", "e2e-imp/deployer", "--cluster", "member1"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("v1 Secret e2e-imp/denied")
            && stderr.contains("forbidden")
            && stderr.contains("system:serviceaccount:e2e-imp:deployer"),
        "the API server's reason: {stderr}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let allowed = cms.get("allowed").await.unwrap();
    assert_eq!(allowed.data.unwrap()["k"], "v");
    assert!(Api::<Secret>::namespaced(client.clone(), ns).get_opt("denied").await.unwrap().is_none());
    // Written as the account: the audit log shows the impersonated user on the write.
    let as_account = members.writes(|e| {
        e["objectRef"]["namespace"] == ns
            && e["objectRef"]["name"] == "allowed"
            && e["impersonatedUser"]["username"] == "system:serviceaccount:e2e-imp:deployer"
    });
    assert!(as_account >= 1, "the ConfigMap was written as the service account");
}

/// `flotilla diff --live`: what applying a revision would change in the members now,
/// drift included, from server-side apply dry runs, writing nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_plan_shows_drift_creations_prunes_and_refusals_and_writes_nothing() {
    let members = members();
    let ns = "e2e-live";
    let dir = repo(&[("fleet.yaml", fleet(ns, &[("one", &["member1"]), ("two", &["member1"])]).as_bytes())]);
    crate::support::commit_all(dir.path(), "one and two");
    let (code, out, err) = apply(members, dir.path(), "live", &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let repo_dir = dir.path().to_str().unwrap().to_owned();
    let live = |extra: &[&str]| {
        let mut args = vec!["diff", &repo_dir, "--to", "HEAD", "--live", "--kubeconfig", &kubeconfig];
        args.extend_from_slice(&["--instance", "live", "--exit-code"]);
        args.extend_from_slice(extra);
        run(&args)
    };
    let (code, text, err) = live(&[]);
    assert_eq!(code, 0, "nothing to change right after apply: {text}\n{err}");

    // Someone edits `one` in member1; the next revision drops `two`, adds `three`, and a
    // ConfigMap whose data the API server refuses.
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    let patch = serde_json::json!({"data": {"k": "edited"}});
    cms.patch("one", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
    let mut next = fleet(ns, &[("one", &["member1"]), ("three", &["member1"])]);
    next +=
        &format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bad, namespace: {ns}}}\ndata: {{k: [1]}}\n");
    next += &format!(
        "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: bad, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: bad}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    );
    write(dir.path(), "fleet.yaml", next.as_bytes());
    crate::support::commit_all(dir.path(), "three, bad, no two");
    let (code, stdout, err) = live(&["-o", "json"]);
    assert_eq!(code, 1, "{stdout}\n{err}");
    let diff: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diff["from"], "live");
    let member1 = &diff["clusters"]["member1"];
    assert_eq!(member1["changed"][0]["name"], "one", "{diff}");
    assert_eq!(member1["changed"][0]["fields"][0], serde_json::json!({"path": "data.k", "from": "edited", "to": "v"}));
    assert_eq!(member1["added"][0]["name"], "three", "{diff}");
    assert_eq!(member1["removed"][0]["name"], "two", "{diff}");
    assert_eq!(member1["failed"][0]["name"], "bad", "{diff}");
    assert!(member1["failed"][0]["reason"].as_str().unwrap().contains("dry run was refused"), "{diff}");
    assert!(diff["clusters"].get("member2").is_none(), "{diff}");

    // Nothing was written: the drift stays, `three` does not exist, `two` does.
    assert_eq!(cms.get("one").await.unwrap().data.unwrap()["k"], "edited");
    assert!(cms.get_opt("three").await.unwrap().is_none());
    assert!(cms.get_opt("two").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn get_and_status_speak_kubectl_output_formats_with_secrets_masked() {
    let members = members();
    let ns = "e2e-output";
    let mut docs = vec![fleet(ns, &[("settings", &["member1", "member2"])])];
    docs.push(format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: token, namespace: {ns}}}\nstringData: {{password: hunter2-e2e}}\n"
    ));
    docs.push(format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: token, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: Secret, name: token}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    ));
    let dir = repo(&[("fleet.yaml", docs.join("---\n").as_bytes())]);
    let (code, stdout, stderr) = apply(members, dir.path(), "output", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let get = |extra: &[&str]| {
        let mut args = vec!["get", "--kubeconfig", &kubeconfig, "--cluster", "member1", "--cluster", "member2"];
        args.extend_from_slice(extra);
        run(&args)
    };
    // wide: every column the server offers (a Service's SELECTOR), narrow: kubectl's.
    let header =
        |table: &str| table.lines().next().unwrap_or_default().split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(header(&get(&["configmaps", "-n", ns]).1), ["NAME", "CLUSTER", "DATA", "AGE"]);
    let (code, narrow, _) = get(&["services", "-n", "default"]);
    assert_eq!(code, 0);
    let (code, wide, stderr) = get(&["services", "-n", "default", "-o", "wide"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!header(&narrow).contains(&"SELECTOR".to_owned()), "{narrow}");
    assert!(header(&wide).contains(&"SELECTOR".to_owned()), "{wide}");
    // json and yaml: one v1 List, each item typed and annotated with its member.
    let (code, json, stderr) = get(&["configmaps", "-n", ns, "-o", "json", "-l", "flotilla.dev/managed=true"]);
    assert_eq!(code, 0, "{stderr}");
    let list: Value = serde_json::from_str(&json).unwrap();
    assert_eq!((list["apiVersion"].as_str(), list["kind"].as_str()), (Some("v1"), Some("List")));
    let items: Vec<(String, String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let from = i["metadata"]["annotations"]["resource.karmada.io/cached-from-cluster"].as_str().unwrap();
            (
                i["kind"].as_str().unwrap().to_owned(),
                i["metadata"]["name"].as_str().unwrap().to_owned(),
                from.to_owned(),
            )
        })
        .collect();
    assert_eq!(
        items,
        [("ConfigMap", "settings", "member1"), ("ConfigMap", "settings", "member2")].map(|(k, n, c)| (
            k.to_owned(),
            n.to_owned(),
            c.to_owned()
        ))
    );
    let (code, yaml, _) = get(&["secrets", "-n", ns, "-o", "yaml"]);
    assert_eq!(code, 0);
    assert!(yaml.contains("kind: List") && yaml.contains("name: token"), "{yaml}");
    assert!(yaml.contains("password: ++++++++"), "{yaml}");
    assert!(!yaml.contains("aHVudGVyMi1lMmU") && !yaml.contains("hunter2"), "a Secret's value is printed: {yaml}");
    // status: json objects with health per member; wide names each member.
    let status = |extra: &[&str]| {
        let mut args = vec!["status", dir.path().to_str().unwrap(), "--kubeconfig", &kubeconfig];
        args.extend_from_slice(extra);
        run(&args)
    };
    let (code, json, stderr) = status(&["-o", "json"]);
    assert_eq!(code, 0, "{json}\n{stderr}");
    let report: Value = serde_json::from_str(&json).unwrap();
    let settings = report["objects"].as_array().unwrap().iter().find(|o| o["name"] == "settings").unwrap();
    assert_eq!(settings["kind"], "ConfigMap");
    assert_eq!(settings["clusters"]["member2"]["health"], "Healthy");
    assert_eq!(settings["healthy"], true);
    assert!(report["revision"].as_str().unwrap().starts_with("dir-"));
    let (_, wide, _) = status(&["-o", "wide"]);
    let row = wide.lines().find(|l| l.contains(" settings ")).unwrap();
    assert!(row.contains("member1=Healthy,member2=Healthy"), "{wide}");
    let (_, yaml, _) = status(&["-o", "yaml"]);
    assert!(yaml.contains("name: settings") && !yaml.contains("hunter2"), "{yaml}");
}
