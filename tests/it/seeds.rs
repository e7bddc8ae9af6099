//! The seed tutorials, rendered from examples/repo: where every object lands.

use serde_json::Value;

use crate::support::{root, run, write};

fn names(plan: &Value, cluster: &str, kind: &str) -> Vec<String> {
    plan["clusters"][cluster]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == kind)
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn replicas(plan: &Value, cluster: &str, name: &str) -> Option<i64> {
    plan["clusters"][cluster]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "Deployment" && m["metadata"]["name"] == name)
        .map(|m| m["spec"]["replicas"].as_i64().unwrap())
}

fn render(repo: &str) -> Value {
    let (code, stdout, stderr) = run(&["render", repo, "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn bookinfo_lands_where_the_tutorial_says() {
    let plan = render("examples/repo");
    let deployments = |c| names(&plan, c, "Deployment");
    assert_eq!(deployments("member1"), ["nginx", "productpage-v1", "reviews-v1", "reviews-v2", "reviews-v3"]);
    assert_eq!(deployments("member2"), ["details-v1", "ratings-v1", "reviews-v1", "reviews-v2", "reviews-v3"]);
    assert_eq!(deployments("member3"), ["ratings-v1"], "ratings excludes only member1");
    for cluster in ["member1", "member2"] {
        let services = names(&plan, cluster, "Service");
        for svc in ["details", "productpage", "ratings", "reviews", "nginx-service"] {
            assert!(services.contains(&svc.to_owned()), "{svc} missing in {cluster}: {services:?}");
        }
    }
}

#[test]
fn nginx_with_one_replica_runs_only_in_member1() {
    let plan = render("examples/repo");
    assert_eq!(replicas(&plan, "member1", "nginx"), Some(1));
    assert_eq!(replicas(&plan, "member2", "nginx"), None);
    assert_eq!(names(&plan, "member1", "Service").iter().filter(|s| *s == "derived-nginx-service").count(), 1);
    assert!(!names(&plan, "member2", "Service").contains(&"derived-nginx-service".to_owned()));
}

#[test]
fn nginx_at_ten_replicas_splits_five_and_five() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("examples/repo");
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let mut text = std::fs::read_to_string(&entry).unwrap();
        if rel == "nginx/nginx.yaml" {
            text = text.replacen("replicas: 1\n", "replicas: 10\n", 1);
        }
        write(dir.path(), &rel, text.as_bytes());
    }
    let plan = render(dir.path().to_str().unwrap());
    assert_eq!(replicas(&plan, "member1", "nginx"), Some(5));
    assert_eq!(replicas(&plan, "member2", "nginx"), Some(5));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}

/// The PR plan of the nginx seed going from 1 to 10 replicas, offline: member1's nginx
/// changes 1 → 5 and member2 gains it with 5; with `--exit-code` that is exit 1; the
/// same revision twice has no changes; a revision that does not load is exit 2 naming
/// the file and line.
#[test]
fn the_diff_of_scaling_the_nginx_seed_to_ten() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("examples/repo");
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        write(dir.path(), &rel, &std::fs::read(&entry).unwrap());
    }
    crate::support::commit_all(dir.path(), "one replica");
    let nginx = dir.path().join("nginx/nginx.yaml");
    let text = std::fs::read_to_string(&nginx).unwrap().replacen("replicas: 1\n", "replicas: 10\n", 1);
    std::fs::write(&nginx, text).unwrap();
    crate::support::commit_all(dir.path(), "ten replicas");
    let repo = dir.path().to_str().unwrap();

    let (code, stdout, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let diff: Value = serde_json::from_str(&stdout).unwrap();
    let changed = &diff["clusters"]["member1"]["changed"];
    assert_eq!(changed.as_array().unwrap().len(), 1, "{diff}");
    assert_eq!((changed[0]["kind"].as_str(), changed[0]["name"].as_str()), (Some("Deployment"), Some("nginx")));
    assert_eq!(changed[0]["fields"][0], serde_json::json!({"path": "spec.replicas", "from": 1, "to": 5}));
    let added = &diff["clusters"]["member2"]["added"];
    assert_eq!(added.as_array().unwrap().len(), 1, "{diff}");
    assert_eq!((added[0]["name"].as_str(), added[0]["replicas"].as_i64()), (Some("nginx"), Some(5)));
    assert_eq!(added[0]["namespace"], "default");

    let (code, text, _) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "--exit-code"]);
    assert_eq!(code, 1);
    assert!(
        text.contains("spec.replicas: 1 → 5") && text.contains("+ apps/v1 Deployment default/nginx (replicas 5)"),
        "{text}"
    );
    let (code, text, _) = run(&["diff", repo, "--from", "HEAD", "--to", "HEAD", "--exit-code"]);
    assert_eq!((code, text.starts_with("no changes")), (0, true), "{text}");

    write(dir.path(), "nginx/broken.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n");
    crate::support::commit_all(dir.path(), "broken");
    let (code, _, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nginx/broken.yaml") && stderr.contains("line"), "{stderr}");
}

const NGINX_ROLLOUT: &str = r#"apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: nginx, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  waves: [{name: canary, clusterAffinity: {clusterNames: [member1]}}]
  minSuccessTime: 20s
  gates:
  - {name: errors, prometheus: {address: "http://prometheus:9090", query: "sum(rate(nginx_http_errors_total[1m]))"}, max: 1}
  windows: [{kind: deny, schedule: "0 22 * * *", duration: 8h, timeZone: Europe/Berlin}]
  onFailure: Revert
"#;

/// The seed repository with the nginx RolloutPolicy (its last lines replaced by
/// `extra`), at two commits: as it is, then with `edit` applied to nginx.yaml.
fn nginx_with_rollout(extra: &str, edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("examples/repo");
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        write(dir.path(), &rel, &std::fs::read(&entry).unwrap());
    }
    write(dir.path(), "nginx/rollout.yaml", format!("{NGINX_ROLLOUT}{extra}").as_bytes());
    crate::support::commit_all(dir.path(), "before");
    let nginx = dir.path().join("nginx/nginx.yaml");
    std::fs::write(&nginx, edit(&std::fs::read_to_string(&nginx).unwrap())).unwrap();
    crate::support::commit_all(dir.path(), "after");
    dir
}

/// The waves of `flotilla diff -o json` between the two commits: (wave, first cluster).
fn waves(repo: &str) -> (Value, Vec<(String, String)>) {
    let (code, stdout, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let diff: Value = serde_json::from_str(&stdout).unwrap();
    let batches = diff["rollouts"].as_array().into_iter().flatten().flat_map(|r| r["batches"].as_array().unwrap());
    let waves =
        batches.map(|b| (b["wave"].as_str().unwrap().to_owned(), b["clusters"][0].as_str().unwrap().to_owned()));
    (diff.clone(), waves.collect())
}

/// A new nginx image and ten replicas in a pull request, with a RolloutPolicy for its Deployment: the
/// plan shows the waves the change moves in (golden), with no warning. Scaling alone
/// (the autoscaler's write-back, which also places nginx on member2) shows none, unless
/// the policy sends replica changes through the waves too.
#[test]
fn the_plan_of_the_nginx_seed_shows_its_rollout_waves() {
    let image = |text: &str| {
        text.replacen("- image: nginx", "- image: nginx:1.29", 1).replacen("replicas: 1\n", "replicas: 10\n", 1)
    };
    let dir = nginx_with_rollout("", image);
    let repo = dir.path().to_str().unwrap();
    let (diff, found) = waves(repo);
    let expected =
        |pairs: &[(&str, &str)]| pairs.iter().map(|(w, c)| (w.to_string(), c.to_string())).collect::<Vec<_>>();
    assert_eq!(found, expected(&[("canary", "member1"), ("(rest)", "member2")]), "{diff}");
    let (code, markdown, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "-o", "markdown"]);
    assert_eq!(code, 0, "{stderr}");
    let (from, to) = (diff["from"].as_str().unwrap(), diff["to"].as_str().unwrap());
    let markdown =
        markdown.replace(from, "FROM").replace(to, "TO").replace(&from[..12], "FROM").replace(&to[..12], "TO");
    insta::with_settings!({snapshot_path => root().join("tests/snapshots"), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("nginx-waves", markdown);
    });

    let ten = |text: &str| text.replacen("replicas: 1\n", "replicas: 10\n", 1);
    let dir = nginx_with_rollout("", ten);
    assert_eq!(waves(dir.path().to_str().unwrap()).1, expected(&[]), "a replica change goes everywhere at once");
    let dir = nginx_with_rollout("  replicaOnlyChanges: Waves\n", ten);
    let (_, found) = waves(dir.path().to_str().unwrap());
    assert_eq!(found, expected(&[("canary", "member1"), ("(rest)", "member2")]));
}
