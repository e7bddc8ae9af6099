//! The FederatedHPA seed tutorial end to end: examples/repo served by a real git
//! daemon, `flotilla run` on dedicated members, CPU load written into the members'
//! metrics.k8s.io (PodMetrics, as metrics-server would serve them). The controller
//! commits `replicas` back to Git; the next render applies it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};

use crate::controller::{Quiet, Running, free_port, git, git_daemon, ready, serve};
use crate::members::{Dedicated, Members};
use crate::services::{addresses, imported_match};
use crate::support::{root, run_from_daemon, wait_for};

fn pod_metrics() -> ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "PodMetrics");
    ApiResource::from_gvk_with_plural(&gvk, "pods")
}

/// Writes a PodMetrics sample of `milli` CPU for every nginx pod in member1 and
/// member2, once a second, at whatever level `load` holds.
fn drive_load(kubeconfig: std::path::PathBuf, load: Arc<AtomicI64>) -> tokio::task::JoinHandle<()> {
    drive_load_of(kubeconfig, load, ("default", "nginx"), &["member1", "member2"])
}

/// Writes a PodMetrics sample for every pod labelled `app=APP` in `ns` in `members`
/// (its container named APP), once a second, at whatever level `load` holds.
pub fn drive_load_of(
    kubeconfig: std::path::PathBuf,
    load: Arc<AtomicI64>,
    (ns, app): (&'static str, &'static str),
    members: &'static [&'static str],
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            for &member in members {
                let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
                let options = kube::config::KubeConfigOptions { context: Some(member.into()), ..Default::default() };
                let mut config = kube::Config::from_custom_kubeconfig(kc, &options).await.unwrap();
                // A frozen member holds a request for as long as it is frozen.
                config.read_timeout = Some(Duration::from_secs(3));
                let client = kube::Client::try_from(config).unwrap();
                let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
                let metrics: Api<DynamicObject> = Api::namespaced_with(client, ns, &pod_metrics());
                let Ok(list) = pods.list(&ListParams::default().labels(&format!("app={app}"))).await else { continue };
                for pod in list.items {
                    let name = pod.metadata.name.unwrap();
                    let sample = serde_json::json!({
                        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
                        "timestamp": k8s_openapi::jiff::Timestamp::now().to_string(), "window": "1s",
                        "containers": [{"name": app, "usage": {"cpu": format!("{}m", load.load(Ordering::Relaxed)), "memory": "10Mi"}}]
                    });
                    let _ = metrics.patch(&name, &PatchParams::apply("load").force(), &Patch::Apply(sample)).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

/// Running nginx pods in member1 and member2.
async fn running(members: &Members) -> (usize, usize) {
    let mut counts = [0; 2];
    for (i, member) in ["member1", "member2"].iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(members.client(member).await, "default");
        counts[i] = pods
            .list(&ListParams::default().labels("app=nginx"))
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                    .count()
            })
            .unwrap_or(0);
    }
    (counts[0], counts[1])
}

fn replicas_in_git(served: &Path) -> i64 {
    let out = Command::new("git").args(["show", "main:nginx/nginx.yaml"]).current_dir(served).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().find_map(|l| l.strip_prefix("  replicas: ")).and_then(|v| v.trim().parse().ok()).unwrap()
}

fn bot_commits(served: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["log", "--format=%an|%s", "--author=flotilla-autoscaler", "main"])
        .current_dir(served)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_federated_hpa_scales_1_to_10_and_back_through_git() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    // examples/repo in a served repository.
    let dir = tempfile::tempdir().unwrap();
    let (work, served) = (dir.path().join("work"), dir.path().join("fleet.git"));
    git(dir.path(), &["init", "-q", "--bare", "-b", "main", served.to_str().unwrap()]);
    let copy = Command::new("cp").arg("-r").arg(root().join("examples/repo")).arg(&work).status().unwrap();
    assert!(copy.success());
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "the seed"]);
    git(&work, &["push", "-q", served.to_str().unwrap(), "HEAD:main"]);
    let original = std::fs::read_to_string(work.join("nginx/nginx.yaml")).unwrap();
    let port = free_port();
    let _daemon = Running(
        git_daemon()
            .args(["--reuseaddr", "--export-all", "--enable=receive-pack", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", dir.path().display()))
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let http = free_port();
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "run",
                "--insecure-allow-http",
                "--repo",
                &format!("git://127.0.0.1:{port}/fleet.git"),
                "--interval",
                "2",
            ])
            .args(["--kubeconfig", members.kubeconfig().to_str().unwrap(), "--listen", &format!("127.0.0.1:{http}")])
            .args(["--cache-dir", cache.path().to_str().unwrap(), "--autoscale-interval", "1"])
            .quiet(),
    );
    wait_for("the seed to apply", Duration::from_secs(90), || async { ready(http) }).await;
    wait_for("one nginx pod in member1", Duration::from_secs(60), || async { running(members).await == (1, 0) }).await;
    // The consumer's derived Service leads to every ready nginx pod of the fleet.
    let derived = ("nginx-service", "derived-nginx-service");
    imported_match(members, "default", derived, &["member1", "member2"], 1).await;

    // Load: 25m of the 25m request is 100 % against a 10 % target.
    let load = Arc::new(AtomicI64::new(1));
    let driver = drive_load(members.kubeconfig().to_path_buf(), load.clone());
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(replicas_in_git(&served), 1, "idle (4 %) is within the target");
    let start = Instant::now();
    load.store(25, Ordering::Relaxed);
    wait_for("a first scale-up in Git", Duration::from_secs(60), || async { replicas_in_git(&served) > 1 }).await;
    let first_commit = start.elapsed();
    let first = replicas_in_git(&served);
    wait_for("the first scale-up to run", Duration::from_secs(60), || async {
        let (a, b) = running(members).await;
        a + b == first as usize
    })
    .await;
    eprintln!("load → replicas: {first} committed in {first_commit:?}, running after {:?}", start.elapsed());
    wait_for("replicas: 10 in Git", Duration::from_secs(90), || async { replicas_in_git(&served) == 10 }).await;
    let to_ten = start.elapsed();
    wait_for("5 nginx pods in each member", Duration::from_secs(60), || async { running(members).await == (5, 5) })
        .await;
    let applied = start.elapsed();
    eprintln!("load → replicas: 10 committed in {to_ten:?}; 5/5 running after {applied:?}");
    imported_match(members, "default", derived, &["member1", "member2"], 10).await;
    withdraw_and_restore(members).await;
    // The status says what happened, in /status, `flotilla status` and /metrics.
    let status = || crate::support::run(&["status", "--controller", &format!("http://127.0.0.1:{http}")]).1;
    let settled = "FederatedHPA default/nginx  target apps/v1 Deployment default/nginx  replicas 10 → 10";
    wait_for("the next sync to report 10 → 10", Duration::from_secs(15), || async { status().contains(settled) }).await;
    let status = status();
    assert!(
        status.contains("cpu 100% of request") && status.contains("ScalingActive True ValidMetricFound"),
        "{status}"
    );
    let metrics = crate::controller::http(http, "GET", "/metrics", &[], b"").1;
    assert!(
        metrics
            .contains(r#"flotilla_autoscaler_replicas{autoscaler="autoscaling.karmada.io/v1alpha1/FederatedHPA/default/nginx",replicas="current"} 10"#),
        "{metrics}"
    );

    // Idle again: back to 1 once the 10 s scale-down window has passed.
    let start = Instant::now();
    load.store(0, Ordering::Relaxed);
    wait_for("replicas: 1 in Git", Duration::from_secs(90), || async { replicas_in_git(&served) == 1 }).await;
    wait_for("1 nginx pod left", Duration::from_secs(60), || async {
        let (a, b) = running(members).await;
        a + b == 1
    })
    .await;
    eprintln!("idle → replicas: 1 in {:?}", start.elapsed());
    let commits = bot_commits(&served);
    assert!(commits.len() >= 3, "{commits:?}");
    assert!(
        commits
            .iter()
            .all(|c| c.starts_with("flotilla-autoscaler|autoscale: apps/v1 Deployment default/nginx: replicas ")),
        "{commits:?}"
    );
    assert!(
        commits[0].contains("→ 1")
            && commits.last().unwrap().contains("1 → 5 (FederatedHPA default/nginx: cpu utilization"),
        "{commits:?}"
    );
    let show = Command::new("git").args(["show", "main:nginx/nginx.yaml"]).current_dir(&served).output().unwrap();
    assert_eq!(String::from_utf8(show.stdout).unwrap(), original, "back at 1 the file is byte for byte the original");

    // Load swinging across the target every 4 s for 48 s (almost five 10 s windows),
    // sampled every second: each window holds both a high and a low recommendation, so
    // stabilization holds the count and nothing is committed.
    let before = bot_commits(&served).len();
    for step in 0..12 {
        load.store(if step % 2 == 0 { 4 } else { 1 }, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(4)).await;
    }
    assert_eq!(bot_commits(&served).len(), before, "no flapping");
    driver.abort();
    imported_match(members, "default", derived, &["member1", "member2"], 1).await;

    // The ServiceExport leaves Git: its slices leave member1.
    git(&work, &["pull", "-q", "--rebase", served.to_str().unwrap(), "main"]);
    let file = work.join("nginx/multicluster-service.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let kept: Vec<&str> = text.split("---\n").skip(2).collect();
    std::fs::write(&file, kept.join("---\n")).unwrap();
    git(&work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "stop exporting"]);
    git(&work, &["push", "-q", served.to_str().unwrap(), "HEAD:main"]);
    wait_for("the imported slices to leave member1", Duration::from_secs(60), || async {
        let slices: Api<EndpointSlice> = Api::namespaced(members.client("member1").await, "default");
        let listed =
            slices.list(&ListParams::default().labels("kubernetes.io/service-name=derived-nginx-service")).await;
        listed.is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

/// member2's API server stops: its endpoints leave member1's slices within the
/// documented bound (`--endpoint-withdraw-after` 6 s, plus one 2 s probe); it
/// returns, and so do they.
async fn withdraw_and_restore(members: &Members) {
    let frozen = Instant::now();
    members.freeze("member2", true);
    let own = addresses(members, "member1", "default", "nginx-service", false).await;
    assert_eq!(own.len(), 5);
    wait_for("member2's addresses to leave member1's slices", Duration::from_secs(30), || async {
        addresses(members, "member1", "default", "derived-nginx-service", true).await == own
    })
    .await;
    let withdrawn = frozen.elapsed();
    let thawed = Instant::now();
    members.freeze("member2", false);
    imported_match(members, "default", ("nginx-service", "derived-nginx-service"), &["member1", "member2"], 10).await;
    eprintln!(
        "member2 stopped: withdrawn from member1 after {withdrawn:?}; back: restored after {:?}",
        thawed.elapsed()
    );
    assert!(withdrawn < Duration::from_secs(10), "withdrawn within the bound: {withdrawn:?}");
}

/// A CronFederatedHPA rule firing every minute with `--writeback=state`: the decision
/// goes to the state ConfigMap in the host cluster (member3 here), the render applies
/// it, and Git is left alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_cron_rule_scales_through_the_state_configmap_without_commits() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    let members = crate::members::members();
    let ns = "e2e-cron-state";
    let docs = [
        crate::apply::fleet(ns, &[]),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1 # Git's count\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: web}}]}}\n"
        ),
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
        ),
        format!(
            "apiVersion: autoscaling.karmada.io/v1alpha1\nkind: CronFederatedHPA\nmetadata: {{name: every-minute, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n  rules:\n  - {{name: up, schedule: \"* * * * *\", targetReplicas: 3}}\n"
        ),
    ];
    let repo = serve(&docs.join("---\n"));
    let host = members.client("member3").await;
    let host_ns = "flotilla-cron";
    let created = Api::<Namespace>::all(host.clone())
        .patch(
            host_ns,
            &PatchParams::apply("e2e"),
            &Patch::Apply(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": host_ns}})),
        )
        .await;
    created.unwrap();
    let http = free_port();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "2"])
            .args(["--kubeconfig", &kubeconfig, "--listen", &format!("127.0.0.1:{http}"), "--instance", "cronstate"])
            .args(["--cache-dir", cache.path().to_str().unwrap(), "--autoscale-interval", "2", "--writeback", "state"])
            .args(["--host-kubeconfig", &kubeconfig, "--host-context", "member3", "--namespace", host_ns])
            .quiet(),
    );
    let deployments: Api<Deployment> = Api::namespaced(members.client("member1").await, ns);
    let replicas = || async {
        deployments.get_opt("web").await.ok().flatten().and_then(|d| d.spec).and_then(|s| s.replicas).unwrap_or(0)
    };
    wait_for("Git's 1 replica applied", Duration::from_secs(60), || async { replicas().await == 1 }).await;
    wait_for("the rule's 3 replicas (next minute boundary)", Duration::from_secs(100), || async {
        replicas().await == 3
    })
    .await;
    let state: Api<ConfigMap> = Api::namespaced(host, host_ns);
    let data = state.get("flotilla-replicas-cronstate").await.unwrap().data.unwrap();
    assert_eq!(data.get(&format!("apps.v1.Deployment.{ns}.web")).map(String::as_str), Some("3"), "{data:?}");
    let log = Command::new("git")
        .args(["log", "--format=%an", "main"])
        .current_dir(repo.served.path().join("fleet.git"))
        .output()
        .unwrap();
    let authors = String::from_utf8(log.stdout).unwrap();
    assert!(!authors.contains("flotilla-autoscaler"), "no commit with --writeback=state: {authors}");
    let status = crate::controller::http(http, "GET", "/status", &[], b"").1;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let rule = &status["autoscalers"][format!("autoscaling.karmada.io/v1alpha1/CronFederatedHPA/{ns}/every-minute")]["rules"]
        ["up"];
    assert!(
        rule["successful"][0].as_str().unwrap().ends_with(&format!("apps/v1 Deployment {ns}/web replicas = 3")),
        "{rule}"
    );
    assert!(rule["nextExecutionTime"].is_string(), "{rule}");
}

/// A CronFederatedHPA on a workload a Helm chart renders: the count is committed to the
/// values file that sets the key its HelmChart names (`spec.replicaValues`), byte for
/// byte but the scalar, and the next render applies it to the member.
#[tokio::test(flavor = "multi_thread")]
async fn a_cron_rule_on_a_chart_workload_commits_to_its_values_file() {
    use k8s_openapi::api::apps::v1::Deployment;

    let members = crate::members::members();
    let ns = "e2e-chart-scale";
    let docs = [
        crate::apply::fleet(ns, &[]),
        format!(
            "apiVersion: flotilla.dev/v1alpha1\nkind: HelmChart\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  chart: charts/web\n  valuesFiles: [envs/prod.yaml]\n  replicaValues: [{{kind: Deployment, name: web, path: web.replicas}}]\n"
        ),
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
        ),
        format!(
            "apiVersion: autoscaling.karmada.io/v1alpha1\nkind: CronFederatedHPA\nmetadata: {{name: every-minute, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n  rules:\n  - {{name: up, schedule: \"* * * * *\", targetReplicas: 3}}\n"
        ),
    ];
    let repo = serve(&docs.join("---\n"));
    let work = repo.work.path();
    let prod = "# production values: the autoscaler keeps web.replicas\nweb:\n  replicas: 1 # scaled\n  image: web\n";
    for (path, text) in [
        ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
        ("charts/web/values.yaml", "web:\n  replicas: 1\n  image: web\n"),
        (
            "charts/web/templates/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}\nspec:\n  replicas: {{ .Values.web.replicas }}\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: {{ .Values.web.image }}}]}\n",
        ),
        ("envs/prod.yaml", prod),
    ] {
        std::fs::create_dir_all(work.join(path).parent().unwrap()).unwrap();
        std::fs::write(work.join(path), text).unwrap();
    }
    crate::controller::commit_and_push(work, "the chart");
    let http = free_port();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "2", "--kubeconfig", &kubeconfig, "--listen", &format!("127.0.0.1:{http}")])
            .args([
                "--instance",
                "chartscale",
                "--cache-dir",
                cache.path().to_str().unwrap(),
                "--autoscale-interval",
                "2",
            ])
            .quiet(),
    );
    let deployments: Api<Deployment> = Api::namespaced(members.client("member1").await, ns);
    let replicas = || async {
        deployments.get_opt("web").await.ok().flatten().and_then(|d| d.spec).and_then(|s| s.replicas).unwrap_or(0)
    };
    wait_for("the chart's 1 replica applied", Duration::from_secs(60), || async { replicas().await == 1 }).await;
    let served = repo.served.path().join("fleet.git");
    let show = |path: &str| {
        let out = Command::new("git").args(["show", &format!("main:{path}")]).current_dir(&served).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    wait_for("replicas: 3 in envs/prod.yaml (next minute boundary)", Duration::from_secs(100), || async {
        show("envs/prod.yaml").contains("replicas: 3")
    })
    .await;
    assert_eq!(show("envs/prod.yaml"), prod.replace("replicas: 1 #", "replicas: 3 #"), "only the scalar changed");
    assert_eq!(show("fleet.yaml"), docs.join("---\n"), "the HelmChart is as it was");
    assert_eq!(
        show("charts/web/values.yaml"),
        "web:\n  replicas: 1\n  image: web\n",
        "the chart's defaults are not edited"
    );
    wait_for("the chart's 3 replicas applied", Duration::from_secs(60), || async { replicas().await == 3 }).await;
    let log = Command::new("git").args(["log", "--format=%an|%s", "-1", "main"]).current_dir(&served).output().unwrap();
    let last = String::from_utf8(log.stdout).unwrap();
    let said = format!("flotilla-autoscaler|autoscale: apps/v1 Deployment {ns}/web: replicas → 3 (CronFederatedHPA");
    assert!(last.starts_with(&said), "{last}");
}
