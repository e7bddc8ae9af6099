//! The CLI contract others script against.

use serde_json::Value;

use crate::support::{cluster, commit_all, repo, run, write};

#[test]
fn json_output_has_exactly_the_contract_keys_and_every_cluster() {
    let (code, stdout, _) = run(&["render", "examples/repo", "-o", "json"]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let keys: Vec<&String> = plan.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["clusters", "problems", "revision"]);
    let clusters: Vec<&String> = plan["clusters"].as_object().unwrap().keys().collect();
    assert_eq!(clusters, ["member1", "member2", "member3"]);
    assert!(plan["revision"].as_str().unwrap().starts_with("dir-"));
    assert_eq!(plan["problems"], Value::Array(vec![]));
}

#[test]
fn manifests_are_sorted_by_api_version_kind_namespace_name() {
    let (_, stdout, _) = run(&["render", "examples/repo", "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    for (cluster, manifests) in plan["clusters"].as_object().unwrap() {
        let keys: Vec<(String, String, String, String)> = manifests
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
                (s(&m["apiVersion"]), s(&m["kind"]), s(&m["metadata"]["namespace"]), s(&m["metadata"]["name"]))
            })
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{cluster}");
    }
}

#[test]
fn a_cluster_receiving_nothing_is_listed_empty() {
    let dir = repo(&[("c.yaml", format!("{}---\n{}", cluster("a"), cluster("b")).as_bytes())]);
    let (code, stdout, _) = run(&["render", dir.path().to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["clusters"], serde_json::json!({"a": [], "b": []}));
}

#[test]
fn cluster_filter_limits_output_and_unknown_clusters_are_usage_errors() {
    let (code, stdout, _) = run(&["render", "examples/repo", "-o", "json", "--cluster", "member3"]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["clusters"].as_object().unwrap().keys().collect::<Vec<_>>(), ["member3"]);
    let (code, _, stderr) = run(&["render", "examples/repo", "--cluster", "member9"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("member9"), "{stderr}");
}

#[test]
fn unschedulable_workloads_exit_1_and_say_why_while_the_rest_renders() {
    let dir = repo(&[
        ("clusters.yaml", cluster("a").as_bytes()),
        (
            "app.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-y}\n---\n\
apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: px}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: cm-x}]\n  placement: {clusterAffinity: {clusterNames: [zzz]}}\n---\n\
apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: py}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: cm-y}]\n",
        ),
    ]);
    let (code, stdout, stderr) = run(&["render", dir.path().to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 1, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["clusters"]["a"][0]["metadata"]["name"], "cm-y");
    assert_eq!(plan["problems"][0]["reason"], "Unschedulable");
    assert_eq!(plan["problems"][0]["message"], "0/1 clusters fit: 1 (a) did not match the cluster affinity");
    assert!(stderr.contains("ConfigMap default/cm-x"), "{stderr}");
}

#[test]
fn yaml_1_1_booleans_in_names_get_a_hint() {
    let dir = repo(&[("cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n")]);
    let (code, _, stderr) = run(&["render", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("quote the name"), "{stderr}");
}

#[test]
fn a_duplicate_key_names_file_document_line_and_key_and_exits_2() {
    let dir = repo(&[("fleet.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n")]);
    let (code, stdout, stderr) = run(&["render", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("fleet.yaml: document 1 (line 5): the key `name` appears twice in one mapping"),
        "{stderr}"
    );
    assert!(!stderr.contains("DuplicateKeyPolicy"), "{stderr}");
}

#[test]
fn completion_scripts_cover_every_subcommand_and_unknown_shells_are_usage_errors() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, stdout, stderr) = run(&["completion", shell]);
        assert_eq!(code, 0, "{shell}: {stderr}");
        for command in ["render", "validate", "diff", "apply", "get", "status", "run", "rollout", "completion"] {
            assert!(stdout.contains(command), "{shell} completion lacks {command}");
        }
    }
    let (code, _, stderr) = run(&["completion", "tcsh"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("possible values"), "{stderr}");
}

#[test]
fn installed_as_kubectl_flotilla_it_is_a_kubectl_plugin_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-flotilla");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_flotilla"), &plugin).unwrap();
    let out = std::process::Command::new(&plugin).args(["render", "--help"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: kubectl flotilla render"));
    let out = std::process::Command::new(&plugin).args(["render", "examples/repo", "-o", "json"]).output().unwrap();
    assert!(out.status.success());
    let (_, plain, _) = run(&["render", "examples/repo", "-o", "json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), plain);
}

#[test]
fn validate_accepts_the_example_repo() {
    let (code, _, stderr) = run(&["validate", "examples/repo"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn out_dir_writes_one_file_per_object() {
    let out = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(&["render", "examples/repo", "--out-dir", out.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let file = out.path().join("member3/default/deployment-ratings-v1.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("registry-eu-central-1.ack.aliyuncs.com"), "{text}");
    assert!(
        out.path().join("member1/_cluster/customresourcedefinition-serviceexports.multicluster.x-k8s.io.yaml").exists()
    );
    // A second render replaces each cluster's directory.
    write(out.path(), "member3/default/stale.yaml", b"stale");
    run(&["render", "examples/repo", "--out-dir", out.path().to_str().unwrap()]);
    assert!(!out.path().join("member3/default/stale.yaml").exists());
}

#[test]
fn ref_reads_a_revision_from_the_object_database_not_the_working_tree() {
    let dir = repo(&[
        ("clusters.yaml", cluster("a").as_bytes()),
        ("cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n"),
    ]);
    let first = commit_all(dir.path(), "first");
    write(dir.path(), "cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second}\n");
    commit_all(dir.path(), "second");
    write(dir.path(), "cm.yaml", b"this is not: [valid yaml");
    let path = dir.path().to_str().unwrap();
    let (code, stdout, stderr) = run(&["validate", path, "--ref", &first]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty());
    let (code, stdout, _) = run(&["render", path, "--ref", "HEAD", "-o", "json"]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["revision"].as_str().unwrap().len(), 40);
    let (code, _, stderr) = run(&["render", path]);
    assert_eq!(code, 2, "the dirty working tree is invalid");
    assert!(stderr.contains("cm.yaml"), "{stderr}");
    let (code, _, stderr) = run(&["render", path, "--ref", "no-such-branch"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no-such-branch"), "{stderr}");
}

#[test]
fn ref_with_a_subdirectory_reads_only_that_subtree() {
    let dir = repo(&[("deploy/clusters.yaml", cluster("a").as_bytes()), ("other/broken.yaml", b"{{{")]);
    commit_all(dir.path(), "init");
    let sub = dir.path().join("deploy");
    let (code, _, stderr) = run(&["validate", sub.to_str().unwrap(), "--ref", "HEAD"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn cluster_state_feeds_dynamic_division() {
    let dir = repo(&[
        ("clusters.yaml", format!("{}---\n{}", cluster("a"), cluster("b")).as_bytes()),
        (
            "app.yaml",
            b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec: {replicas: 6}\n---\n\
apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: w}\nspec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  placement:\n    replicaScheduling: {replicaSchedulingType: Divided, weightPreference: {dynamicWeight: AvailableReplicas}}\n",
        ),
    ]);
    let state = dir.path().join("state.json");
    std::fs::write(&state, br#"{"clusters": {"a": {"availableReplicas": 10}, "b": {"availableReplicas": 2}}}"#)
        .unwrap();
    let (code, stdout, stderr) =
        run(&["render", dir.path().to_str().unwrap(), "-o", "json", "--cluster-state", state.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["clusters"]["a"][0]["spec"]["replicas"], 5);
    assert_eq!(plan["clusters"]["b"][0]["spec"]["replicas"], 1);
}

#[test]
fn apply_refuses_credential_plugins_and_skipped_tls_verification_unless_allowed() {
    let dir = repo(&[("c.yaml", format!("{}---\n{}", cluster("a"), cluster("b")).as_bytes())]);
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://127.0.0.1:1'}\n- name: b\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: plugin\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/touch, args: [/tmp/flotilla-exec-ran]}\n- name: plain\n  user: {token: t}\ncontexts:\n- name: a\n  context: {cluster: a, user: plugin}\n- name: b\n  context: {cluster: b, user: plain}\n";
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let (code, _, stderr) =
        run(&["apply", dir.path().to_str().unwrap(), "--kubeconfig", path.to_str().unwrap(), "--cluster-timeout", "3"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("a: cluster a: the kubeconfig user runs a credential plugin; pass --allow-exec-plugins"),
        "{stderr}"
    );
    assert!(
        stderr.contains("b: cluster b: the kubeconfig skips TLS verification; pass --allow-insecure-tls"),
        "{stderr}"
    );
    assert!(!std::path::Path::new("/tmp/flotilla-exec-ran").exists(), "the plugin never ran");
}

/// `run` refuses remotes that would carry credentials or manifests in clear, and
/// credentials in the URL, before it starts; the message says what to do.
#[test]
fn run_refuses_plain_text_remotes_and_credentials_in_urls() {
    for (repo, says) in [
        ("git://git.example.invalid/fleet.git", "--insecure-allow-http"),
        ("http://git.example.invalid/fleet.git", "--insecure-allow-http"),
        ("https://bot:s3cret-marker@git.example.invalid/fleet.git", "--git-password-file"),
    ] {
        let (code, _, stderr) = run(&["run", "--repo", repo, "--kubeconfig", "/dev/null"]);
        assert_ne!(code, 0, "{repo}");
        assert!(stderr.contains(says), "{repo}: {stderr}");
        assert!(!stderr.contains("s3cret-marker"), "{stderr}");
    }
}

/// Flags whose state lives in the host cluster are refused at start (exit 2, naming
/// `--host-kubeconfig`) when there is none, rather than doing nothing while `/status`
/// looks well.
#[test]
fn run_refuses_host_cluster_flags_without_a_host_cluster() {
    let repo = crate::support::repo(&[("cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")]);
    let path = repo.path().to_str().unwrap();
    for (flag, says) in [
        ("--enable-no-execute-taint-eviction", "--enable-no-execute-taint-eviction (its taints and evictions)"),
        ("--leader-elect", "--leader-elect (its Lease)"),
        ("--writeback=state", "--writeback=state"),
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["run", "--repo", path, "--kubeconfig", "/dev/null", "--listen", "127.0.0.1:0", flag])
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A controller that starts anyway would run for ever: 10 s is plenty to refuse.
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                panic!("{flag}: the controller started without a host cluster");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(says) && stderr.contains("--host-kubeconfig"), "{flag}: {stderr}");
    }
}

/// The scope shipped in deploy/ parses, and renders the seed repository with the
/// problems it should have: the seeds write to `default`, which it does not allow.
#[test]
fn the_shipped_scope_example_bounds_the_seeds() {
    let example = std::fs::read_to_string("deploy/scope.example.yaml").unwrap();
    let config_map: serde_json::Value = serde_saphyr::from_str(&example).unwrap();
    let scope = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(scope.path(), config_map["data"]["scope.yaml"].as_str().unwrap()).unwrap();
    let (code, stdout, stderr) =
        run(&["render", "examples/repo", "-o", "json", "--scope", scope.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let problems = plan["problems"].as_array().unwrap();
    assert!(!problems.is_empty());
    assert!(problems.iter().all(|p| p["reason"] == "OutOfScope"), "{problems:?}");
    assert!(
        problems.iter().any(|p| p["message"].as_str().unwrap().contains("namespace default in cluster member1")),
        "{problems:?}"
    );
    assert!(plan["clusters"]["member1"].as_array().unwrap().is_empty(), "nothing of the seeds is in scope");
}

#[test]
fn out_dir_never_removes_a_directory_it_did_not_write() {
    // A Cluster named `apps` beside the repository's own `apps/` folder.
    let dir = repo(&[
        ("clusters.yaml", cluster("apps").as_bytes()),
        ("apps/cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"),
        ("apps/NOTES.txt", b"not tracked, not ours"),
    ]);
    let path = dir.path().to_str().unwrap();
    let (code, _, stderr) = run(&["render", path, "--out-dir", path]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("was not written by flotilla render"), "{stderr}");
    assert_eq!(std::fs::read(dir.path().join("apps/NOTES.txt")).unwrap(), b"not tracked, not ours");
    assert!(dir.path().join("apps/cm.yaml").exists());
    // A directory of its own, or an empty one, is still replaced.
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir(out.path().join("apps")).unwrap();
    let (code, _, stderr) = run(&["render", path, "--out-dir", out.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&["render", path, "--out-dir", out.path().to_str().unwrap()]);
    assert_eq!(code, 0, "a second render replaces its own output: {stderr}");
}

#[test]
fn diff_refuses_a_cluster_no_revision_declares() {
    let dir = repo(&[
        ("clusters.yaml", cluster("member1").as_bytes()),
        ("cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n"),
    ]);
    let first = commit_all(dir.path(), "first");
    write(dir.path(), "cm.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second}\n");
    commit_all(dir.path(), "second");
    let path = dir.path().to_str().unwrap();
    let typo = ["diff", path, "--from", &first, "--to", "HEAD", "--cluster", "memberl", "--exit-code"];
    let (code, stdout, stderr) = run(&typo);
    assert_eq!(code, 2, "a typo must not pass a CI gate: {stdout} {stderr}");
    assert!(stderr.contains("cluster memberl is not declared"), "{stderr}");
    let (code, _, stderr) = run(&["diff", path, "--from", &first, "--to", "HEAD", "--cluster", "member1"]);
    assert_eq!(code, 0, "{stderr}");
}

/// A repository holding a Karmada kind flotilla does not act on still renders: a warning
/// names the object and what is not done; a kind Karmada does not have is still an error.
#[test]
fn karmada_kinds_flotilla_does_not_act_on_are_accepted_with_a_warning() {
    let kinds = [
        ("apps.karmada.io/v1alpha1", "WorkloadRebalancer", "no earlier decision to rebalance"),
        ("config.karmada.io/v1alpha1", "ResourceInterpreterWebhookConfiguration", "copied whole"),
        ("config.karmada.io/v1alpha2", "ResourceInterpreterCustomization", "only config.karmada.io/v1alpha1"),
        ("search.karmada.io/v1alpha1", "ResourceRegistry", "no searchable cache"),
        ("policy.karmada.io/v1alpha2", "FederatedResourceQuota", "only policy.karmada.io/v1alpha1"),
        ("networking.karmada.io/v1alpha1", "MultiClusterIngress", "no ingress"),
        ("remedy.karmada.io/v1alpha1", "Remedy", "do not trigger remedies"),
    ];
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n");
    for (api_version, kind, _) in kinds {
        text += &format!(
            "---\napiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: mine}}\nspec: {{anything: [1]}}\n"
        );
    }
    let repo = crate::support::repo(&[("karmada.yaml", text.as_bytes())]);
    let (code, _, stderr) = run(&["render", repo.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    for (api_version, kind, why) in kinds {
        let line = stderr.lines().find(|l| l.contains(&format!("{api_version} {kind} mine"))).unwrap_or_default();
        assert!(
            line.starts_with("warning:") && line.contains("karmada.yaml:") && line.contains(why),
            "{kind}: {stderr}"
        );
    }
    let typo = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicyy\nmetadata: {name: p}\nspec: {}\n";
    let repo = crate::support::repo(&[("typo.yaml", typo.as_bytes())]);
    let (code, _, stderr) = run(&["render", repo.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("PropagationPolicyy is not a Karmada kind flotilla knows"), "{stderr}");
    // The customization flotilla does read is read strictly: a missing target is an
    // error naming its file, document and line.
    let read = "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nmetadata: {name: r}\nspec: {customizations: {}}\n";
    let repo = crate::support::repo(&[("ric.yaml", read.as_bytes())]);
    let (code, _, stderr) = run(&["render", repo.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ric.yaml: document 1") && stderr.contains("target"), "{stderr}");
}

/// An object its policy suspends is rendered with a comment saying apply leaves it alone,
/// on the clusters the suspension names only.
#[test]
fn suspended_objects_are_marked_in_the_render() {
    let clusters: String = ["m1", "m2"]
        .iter()
        .map(|m| format!("apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {m}}}\nspec: {{syncMode: Push}}\n---\n"))
        .collect();
    let text = format!(
        "{clusters}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: default}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: held}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  placement: {{clusterAffinity: {{clusterNames: [m1, m2]}}}}\n  suspension: {{dispatchingOnClusters: {{clusterNames: [m2]}}}}\n"
    );
    let repo = crate::support::repo(&[("fleet.yaml", text.as_bytes())]);
    let (code, stdout, stderr) = run(&["render", repo.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("# cluster: m2\n# suspended: its policy suspends dispatching here"), "{stdout}");
    assert!(!stdout.contains("# cluster: m1\n# suspended"), "{stdout}");
}

#[test]
fn why_explains_the_seed_nginx_split_and_refuses_what_is_not_declared() {
    let (code, text, stderr) = run(&["why", "examples/repo", "deploy/default/nginx"]);
    assert_eq!(code, 0, "{stderr}");
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    insta::with_settings!({snapshot_path => golden, prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("why-seed-nginx", text);
    });
    let (code, json, _) =
        run(&["why", "examples/repo", "Deployment/default/nginx", "-o", "json", "--cluster", "member2"]);
    assert_eq!(code, 0);
    let e: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(e["claim"], "PropagationPolicy default/nginx-propagation");
    assert_eq!(e["strategy"], "Divided by static weight");
    let members: Vec<&String> = e["members"].as_object().unwrap().keys().collect();
    assert_eq!(members, ["member2"], "--cluster narrows the members");
    // At 10 replicas (the FederatedHPA's count in the cluster state) the split is 5 and 5.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    std::fs::write(&state, r#"{"replicas": {"apps/v1/Deployment/default/nginx": 10}}"#).unwrap();
    let args = [
        "why",
        "examples/repo",
        "deployments.apps/default/nginx",
        "--cluster-state",
        state.to_str().unwrap(),
        "-o",
        "json",
    ];
    let e: Value = serde_json::from_str(&run(&args).1).unwrap();
    assert_eq!(
        (&e["members"]["member1"]["replicas"], &e["members"]["member2"]["replicas"]),
        (&Value::from(5), &Value::from(5))
    );
    for (object, message) in [
        ("deploy/default/nope", "the repository declares no such object"),
        ("nginx", "name the object as KIND/NAMESPACE/NAME"),
    ] {
        let (code, stdout, stderr) = run(&["why", "examples/repo", object]);
        assert_eq!(code, 2, "{object}");
        assert!(stdout.is_empty() && stderr.contains(message), "{object}: {stderr}");
    }
    let (code, _, stderr) = run(&["why", "examples/repo", "deploy/default/nginx", "--cluster", "member9"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cluster member9 is not declared"), "{stderr}");
}
