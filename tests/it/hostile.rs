//! Hostile repositories: each must fail fast with exit 2 and an error naming the file,
//! never panic, hang or leak content.

use std::time::{Duration, Instant};

use crate::support::{cluster, commit_all, repo, run};

/// Runs `render` on a repo and checks for a clean, quick, named failure.
fn rejects(dir: &std::path::Path, extra: &[&str], names: &str) -> String {
    rejects_within(dir, extra, names, Duration::from_secs(20))
}

/// [`rejects`] for inputs that take `limit` to reach their budget in a debug build.
fn rejects_within(dir: &std::path::Path, extra: &[&str], names: &str, limit: Duration) -> String {
    let start = Instant::now();
    let mut args = vec!["render", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run(&args);
    assert!(start.elapsed() < limit, "took {:?}", start.elapsed());
    assert_eq!(code, 2, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.is_empty(), "nothing is rendered: {stdout}");
    assert!(stderr.contains(names), "error should name {names}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn yaml_alias_bomb() {
    // The ConfigMap of kubernetes/kubernetes#83253 (CVE-2019-11253).
    let bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    let dir = repo(&[("bomb.yaml", bomb.as_bytes())]);
    let err = rejects(dir.path(), &[], "bomb.yaml: document 1");
    assert!(err.contains("limit exceeded"), "{err}");
}

#[test]
fn a_fifty_megabyte_document() {
    let mut big = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  blob: \"".to_vec();
    big.resize(50 << 20, b'x');
    big.extend_from_slice(b"\"\n");
    let dir = repo(&[("big.yaml", &big)]);
    rejects(dir.path(), &[], "big.yaml");
}

#[test]
fn a_document_over_the_api_server_object_limit() {
    let mut doc = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  blob: \"".to_vec();
    doc.resize(4 << 20, b'x');
    doc.extend_from_slice(b"\"\n");
    let dir = repo(&[("doc.yaml", &doc)]);
    let err = rejects(dir.path(), &[], "doc.yaml: document 1 (line 1)");
    assert!(err.contains("limit"), "{err}");
}

#[test]
fn ten_thousand_deep_nesting() {
    let block: String = (0..10_000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
    let flow = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let dir = repo(&[("block.yaml", block.as_bytes())]);
    rejects(dir.path(), &[], "block.yaml");
    let dir = repo(&[("flow.yaml", flow.as_bytes())]);
    rejects(dir.path(), &[], "flow.yaml");
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_file_outside_the_repo_refuses_the_repo() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(&secret, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leaked-marker-8c1f}\n").unwrap();
    let dir = repo(&[("clusters.yaml", cluster("a").as_bytes())]);
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("apps/leak.yaml")).unwrap();
    let err = rejects(dir.path(), &[], "apps/leak.yaml");
    assert!(err.contains("outside"), "{err}");
    assert!(!err.contains("leaked-marker-8c1f"));
    // Even a link no manifest uses, and a dangling one.
    std::fs::remove_file(dir.path().join("apps/leak.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("apps/etc")).unwrap();
    rejects(dir.path(), &[], "apps/etc");
    std::fs::remove_file(dir.path().join("apps/etc")).unwrap();
    std::os::unix::fs::symlink("missing.yaml", dir.path().join("apps/dangling.yaml")).unwrap();
    rejects(dir.path(), &[], "apps/dangling.yaml");
}

#[cfg(unix)]
#[test]
fn dot_dot_symlinks_in_a_git_revision_refuse_the_repo() {
    let dir = repo(&[("clusters.yaml", cluster("a").as_bytes())]);
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    std::os::unix::fs::symlink("../../../../etc/passwd", dir.path().join("apps/passwd.yaml")).unwrap();
    commit_all(dir.path(), "escape");
    let err = rejects(dir.path(), &["--ref", "HEAD"], "apps/passwd.yaml");
    assert!(err.contains("outside"), "{err}");
}

#[cfg(unix)]
#[test]
fn in_repo_symlinks_are_read_under_their_own_name() {
    let dir = repo(&[
        ("clusters.yaml", cluster("a").as_bytes()),
        ("shared/cm.yml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\n"),
    ]);
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    std::os::unix::fs::symlink("../shared/cm.yml", dir.path().join("apps/link.yaml")).unwrap();
    // The same object twice (the file and the link) is a duplicate naming both.
    let err = rejects(dir.path(), &[], "apps/link.yaml");
    assert!(err.contains("shared/cm.yml"), "{err}");
}

#[test]
fn invalid_policy_fields_name_file_document_and_line() {
    let cases: [(&str, &str); 5] = [
        (
            "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placment: {}\n",
            "unknown field `placment`",
        ),
        (
            "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    replicaScheduling: {replicaSchedulingType: Split}\n",
            "Split",
        ),
        (
            "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    spreadConstraints: [{spreadByField: cluster, minGroups: 3, maxGroups: 1}]\n",
            "maxGroups (1) is less than minGroups (3)",
        ),
        ("spec:\n  resourceSelectors: []\n", "at least one selector"),
        (
            "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    clusterAffinities:\n    - affinityName: a\n      clusterNames: [x]\n      overflowAffinities: [{affinityName: b, clusterNames: [y]}]\n",
            "needs dynamic-weight or Aggregated",
        ),
    ];
    for (spec, message) in cases {
        let policy = format!(
            "{}---\n# a comment\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p}}\n{spec}",
            cluster("a")
        );
        let dir = repo(&[("policies/p.yaml", policy.as_bytes())]);
        let err = rejects(dir.path(), &[], "policies/p.yaml: document 2");
        assert!(err.contains(message), "{message}: {err}");
        assert!(err.contains("line"), "{err}");
    }
}

#[test]
fn unknown_fields_point_at_their_line() {
    let policy = format!(
        "{}---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  placment: {{}}\n",
        cluster("a")
    );
    let dir = repo(&[("p.yaml", policy.as_bytes())]);
    // The Cluster takes lines 1-4; the typo is on line 11.
    rejects(dir.path(), &[], "line 11");
}

#[test]
fn the_same_object_in_two_files_names_both() {
    let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice, namespace: ns}\n";
    let dir = repo(&[("a/one.yaml", cm), ("b/two.yaml", cm)]);
    let err = rejects(dir.path(), &[], "a/one.yaml");
    assert!(err.contains("b/two.yaml") && err.contains("ConfigMap ns/twice"), "{err}");
}

#[test]
fn non_utf8_bytes() {
    let dir = repo(&[("latin1.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n")]);
    let err = rejects(dir.path(), &[], "latin1.yaml");
    assert!(err.contains("UTF-8"), "{err}");
}

#[test]
fn secret_values_never_reach_error_text() {
    let secret = b"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: hunter2-marker-77\n  broken: [unclosed, hunter2-marker-77\n";
    let dir = repo(&[("secret.yaml", secret)]);
    let err = rejects(dir.path(), &[], "secret.yaml");
    assert!(!err.contains("hunter2-marker-77"), "{err}");
}

#[test]
fn path_traversal_in_namespaces_is_refused() {
    let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ../../etc}\n";
    let dir = repo(&[("clusters.yaml", cluster("a").as_bytes()), ("cm.yaml", cm)]);
    rejects(dir.path(), &["--out-dir", "/tmp/flotilla-never-written"], "cm.yaml");
    assert!(!std::path::Path::new("/tmp/flotilla-never-written").exists());
}

#[test]
fn missing_fields_are_named() {
    let dir = repo(&[("x.yaml", b"kind: ConfigMap\nmetadata: {name: x}\n")]);
    let err = rejects(dir.path(), &[], "x.yaml: document 1 (line 1)");
    assert!(err.contains("apiVersion"), "{err}");
    let dir = repo(&[("y.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n")]);
    let err = rejects(dir.path(), &[], "y.yaml");
    assert!(err.contains("generateName"), "{err}");
}

/// Autoscalers that cannot be honoured fail the load, naming the file, document, line
/// and field, so the controller never writes from them.
#[test]
fn invalid_autoscalers() {
    let hpa = |spec: &str| {
        format!(
            "---\napiVersion: autoscaling.karmada.io/v1alpha1\nkind: FederatedHPA\nmetadata: {{name: web}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n{spec}"
        )
    };
    for (spec, message) in [
        ("  minReplicas: 5\n  maxReplicas: 2\n", "spec.maxReplicas: 2 is less than minReplicas 5"),
        (
            "  maxReplicas: 3\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Value, value: 1}}\n",
            "spec.metrics[0].resource.target.type: \"Value\" is not valid for a resource metric",
        ),
        (
            "  maxReplicas: 3\n  behavior:\n    scaleUp: {selectPolicy: Sometimes}\n",
            "spec.behavior.scaleUp.selectPolicy: must be Max, Min or Disabled",
        ),
    ] {
        let doc = format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: first}}\n{}", hpa(spec));
        let dir = repo(&[("hpa.yaml", doc.as_bytes())]);
        let err = rejects(dir.path(), &[], "hpa.yaml: document 2 (line 5)");
        assert!(err.contains(message), "{err}");
    }
    let cron = "apiVersion: autoscaling.karmada.io/v1alpha1\nkind: CronFederatedHPA\nmetadata: {name: nightly}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  rules:\n  - {name: night, schedule: \"0 22 * * *\", timeZone: Mars/Olympus, targetReplicas: 1}\n";
    let dir = repo(&[("cron.yaml", cron.as_bytes())]);
    let err = rejects(dir.path(), &[], "cron.yaml: document 1 (line 1)");
    assert!(err.contains("spec.rules[0]: unknown time zone \"Mars/Olympus\""), "{err}");
}

/// Names, namespaces, kinds and apiVersions the API server would refuse are refused on
/// load with the rule they break, before they can reach a file name, a URL or the
/// inventory.
#[test]
fn names_and_types_follow_the_api_servers_grammar() {
    let cases = [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a b}\n",
            "metadata.name: \"a b\" is not a DNS-1123 subdomain",
        ),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Web}\n", "DNS-1123 subdomain"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: 9web}\n", "DNS-1035 label"),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n", "DNS-1123 label"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: Kube_System}\n", "metadata.namespace"),
        ("apiVersion: v1\nkind: ../../../escaped\nmetadata: {name: x}\n", "kind: \"../../../escaped\" is not a kind"),
        ("apiVersion: apps/v1/x\nkind: Deployment\nmetadata: {name: x}\n", "apiVersion: \"apps/v1/x\""),
        (
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: a b}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n",
            "metadata.namespace",
        ),
    ];
    for (doc, message) in cases {
        let text = format!("{}---\n{doc}", cluster("a"));
        let dir = repo(&[("bad.yaml", text.as_bytes())]);
        let err = rejects(dir.path(), &[], "bad.yaml: document 2 (line 5)");
        assert!(err.contains(message), "{message}: {err}");
    }
    // RBAC kinds take path segments, as the API server allows.
    let role =
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"system:flotilla:view\"}\n";
    let text = format!("{}---\n{role}", cluster("a"));
    let dir = repo(&[("ok.yaml", text.as_bytes())]);
    let (code, _, stderr) = run(&["render", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
}

/// `render --out-dir` writes only under its directory, whatever the repository says.
#[test]
fn out_dir_cannot_be_escaped_through_a_kind() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("inner");
    let doc = "apiVersion: v1\nkind: ../../../escaped\nmetadata: {name: x}\n";
    let text = format!("{}---\n{doc}", cluster("a"));
    let dir = repo(&[("cm.yaml", text.as_bytes())]);
    rejects(dir.path(), &["--out-dir", target.to_str().unwrap()], "cm.yaml");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing is written anywhere");
}

/// A label selector Kubernetes would refuse is a load error naming the field, not a
/// policy that silently matches nothing.
#[test]
fn label_selectors_with_unknown_operators_are_load_errors() {
    let cases = [
        (
            "  resourceSelectors:\n  - apiVersion: v1\n    kind: ConfigMap\n    labelSelector:\n      matchExpressions: [{key: app, operator: Sometimes, values: [web]}]\n",
            "spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator: \"Sometimes\"",
        ),
        (
            "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    clusterAffinity:\n      labelSelector:\n        matchExpressions: [{key: env, operator: In, values: []}]\n",
            "spec.placement.clusterAffinity.labelSelector.matchExpressions[0].values: must be non-empty",
        ),
        (
            "  resourceSelectors:\n  - apiVersion: v1\n    kind: ConfigMap\n    labelSelector: {matchLabels: {\"bad key\": x}}\n",
            "matchLabels: key \"bad key\"",
        ),
    ];
    for (spec, message) in cases {
        let policy = format!(
            "{}---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p}}\nspec:\n{spec}",
            cluster("a")
        );
        let dir = repo(&[("policy.yaml", policy.as_bytes())]);
        let err = rejects(dir.path(), &[], "policy.yaml: document 2 (line 5)");
        assert!(err.contains(message), "{message}: {err}");
    }
}

/// A Git tree of 10,000 nested directories (cheap to make, no path limit as on disk) is
/// refused by name, without overflowing a stack.
#[test]
fn ten_thousand_nested_directories_in_a_git_revision() {
    let dir = repo(&[("clusters.yaml", cluster("a").as_bytes())]);
    commit_all(dir.path(), "base");
    let git = git2::Repository::open(dir.path()).unwrap();
    let blob = git.blob(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\n").unwrap();
    let mut builder = git.treebuilder(None).unwrap();
    builder.insert("deep.yaml", blob, 0o100644).unwrap();
    let mut tree = builder.write().unwrap();
    for _ in 0..10_000 {
        let mut builder = git.treebuilder(None).unwrap();
        builder.insert("d", tree, 0o040000).unwrap();
        tree = builder.write().unwrap();
    }
    let head = git.head().unwrap().peel_to_commit().unwrap();
    let mut root = git.treebuilder(Some(&head.tree().unwrap())).unwrap();
    root.insert("d", tree, 0o040000).unwrap();
    let root = git.find_tree(root.write().unwrap()).unwrap();
    let signature = git2::Signature::now("t", "t@example.invalid").unwrap();
    git.commit(Some("HEAD"), &signature, &signature, "deep", &root, &[&head]).unwrap();
    let err = rejects(dir.path(), &["--ref", "HEAD"], "d/d/d");
    assert!(err.contains("nest deeper than 128"), "{err}");
}

/// A bomb spread over many documents and files, each under every per-document and
/// per-file budget: 24 million nodes, about 30 bytes of memory each once parsed. The
/// per-revision node budget stops it. Peak memory against this repository is in
/// docs/performance.md.
#[test]
fn a_bomb_spread_over_many_documents() {
    let doc = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: spread}}\nbomb: [{}]\n",
        vec!["0"; 100_000].join(",")
    );
    let file: String = doc.repeat(40);
    let files: Vec<(String, &[u8])> = (0..6).map(|i| (format!("spread-{i}.yaml"), file.as_bytes())).collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(name, bytes)| (name.as_str(), *bytes)).collect();
    let dir = repo(&files);
    // 20 million nodes take a debug build about a minute to parse (a release build, a
    // few seconds).
    let err = rejects_within(dir.path(), &[], "YAML nodes", Duration::from_secs(240));
    assert!(err.contains("more than 20000000"), "{err}");
}

/// YAML embedded in a field that a FieldOverrider edits is parsed with the repository's
/// budgets: an alias bomb there is an override problem, found at once, not a hang.
#[test]
fn an_alias_bomb_inside_a_field_overrider_target() {
    let rows: String = (b'b'..=b'i')
        .map(|c| {
            let (name, prev) = (c as char, (c - 1) as char);
            format!("    {name}: &{name} [{}]\n", vec![format!("*{prev}"); 9].join(","))
        })
        .collect();
    let bomb = format!("    a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n{rows}    level: info\n");
    let repo_text = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg}}\ndata:\n  config.yaml: |\n{bomb}---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: cfg}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: cfg}}]\n  placement: {{clusterAffinity: {{clusterNames: [a]}}}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {{name: cfg}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: cfg}}]\n  overrideRules:\n  - overriders:\n      fieldOverrider:\n      - fieldPath: /data/config.yaml\n        yaml: [{{subPath: /level, operator: replace, value: debug}}]\n",
        cluster("a")
    );
    let dir = repo(&[("bomb.yaml", repo_text.as_bytes())]);
    let start = Instant::now();
    let (code, _, stderr) = run(&["render", dir.path().to_str().unwrap()]);
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    assert_eq!(code, 1, "an override problem: {stderr}");
    assert!(stderr.contains("parse limits") && stderr.contains("bomb.yaml"), "{stderr}");
    assert!(!stderr.contains("lol"), "no content in errors: {stderr}");
}
