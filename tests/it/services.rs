//! Multi-cluster Services on real members: kube-controller-manager writes each member's
//! own EndpointSlices for the pods kwok makes ready, and the controller's endpoints loop
//! copies them to the consumers. Helpers here serve the seed tutorial's test
//! (`autoscale.rs`) too.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};

use crate::controller::{Quiet, Running, commit_and_push, free_port, http, serve};
use crate::members::{Dedicated, Members};
use crate::support::{run, run_from_daemon, wait_for, write};

/// Ready addresses in `member`'s slices of Service `service` in `ns`; with `ours`, only
/// the slices flotilla wrote, else only the member's own.
pub async fn addresses(members: &Members, member: &str, ns: &str, service: &str, ours: bool) -> BTreeSet<String> {
    let api: Api<EndpointSlice> = Api::namespaced(members.client(member).await, ns);
    let Ok(list) = api.list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}"))).await
    else {
        return BTreeSet::new();
    };
    list.items
        .into_iter()
        .filter(|s| {
            let managed = s.metadata.labels.as_ref().and_then(|l| l.get(MANAGED_BY));
            (managed.map(String::as_str) == Some("endpointslice-controller.flotilla.dev")) == ours
        })
        .flat_map(|s| s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| e.addresses)
        .collect()
}

/// Waits until member1's imported slices of `target` list exactly the ready addresses
/// of `service` in `providers` (each member's own slices), `count` of them; returns when.
pub async fn imported_match(
    members: &Members,
    ns: &str,
    (service, target): (&str, &str),
    providers: &[&str],
    count: usize,
) {
    let what = format!("member1's {target} to list the {count} ready addresses of {service} in {providers:?}");
    wait_for(&what, Duration::from_secs(60), || async {
        let mut expected = BTreeSet::new();
        for provider in providers {
            expected.extend(addresses(members, provider, ns, service, false).await);
        }
        let imported = addresses(members, "member1", ns, target, true).await;
        expected.len() == count && imported == expected
    })
    .await;
}

fn fleet(ns: &str) -> String {
    let docs = [
        crate::apply::fleet(ns, &[]),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: web}}]}}\n"
        ),
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]\n  placement: {{clusterAffinity: {{clusterNames: [member2]}}}}\n"
        ),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  selector: {{app: web}}\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n"
        ),
        format!(
            "apiVersion: networking.karmada.io/v1alpha1\nkind: MultiClusterService\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  types: [CrossCluster]\n  providerClusters: [{{name: member2}}]\n  consumerClusters: [{{name: member1}}]\n"
        ),
    ];
    docs.join("---\n")
}

/// A pod of `web` created straight in member2 (kwok makes it ready).
fn pod(ns: &str, i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("extra-{i}"), "namespace": ns, "labels": {"app": "web", "extra": "true"}},
        "spec": {"containers": [{"name": "web", "image": "web"}]},
    }))
    .unwrap()
}

/// A CrossCluster MultiClusterService: member2 provides, member1 consumes under the
/// Service's own name. Then pods become ready in member2 one at a time, and each is
/// timed from member2's own slice to member1's copy (`FLOTILLA_BENCH_CHANGES` of them,
/// 5 by default; `hack/bench-endpoints.sh` runs 50), with the writes each cost. Then
/// member2 stops and comes back, and the MultiClusterService leaves Git.
#[tokio::test(flavor = "multi_thread")]
async fn a_cross_cluster_service_carries_the_providers_endpoints_to_its_consumer() {
    // Dedicated members: this test stops member2's API server.
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let ns = "e2e-mcs";
    let pods: Api<Pod> = Api::namespaced(members.client("member2").await, ns);
    let extra = ListParams::default().labels("extra=true");
    // Pods a previous run on reused members left behind.
    let _ = pods.delete_collection(&Default::default(), &extra).await;
    let repo = serve(&fleet(ns));
    let listen = free_port();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "2", "--instance", "mcs", "--kubeconfig", &kubeconfig])
            .args(["--listen", &format!("127.0.0.1:{listen}"), "--cache-dir", cache.path().to_str().unwrap()])
            .arg("--ui")
            .quiet(),
    );
    imported_match(members, ns, ("web", "web"), &["member2"], 2).await;
    // The Service went to the consumer too (and to the provider), claimed by the MCS.
    let services: Api<Service> = Api::namespaced(members.client("member1").await, ns);
    let service = services.get("web").await.unwrap();
    let annotations = service.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations["flotilla.dev/policy"], format!("MultiClusterService {ns}/web"));
    assert!(addresses(members, "member1", ns, "web", false).await.is_empty(), "member1 runs no pod of its own");
    let (_, listed, _) = run(&["get", "endpointslices", "-A", "--kubeconfig", &kubeconfig, "--cluster", "member1"]);
    assert!(listed.contains("member2-web-") && listed.contains(ns), "{listed}");
    // /status follows within a second.
    let service = || async {
        let status: serde_json::Value = serde_json::from_str(&http(listen, "GET", "/status", &[], b"").1).unwrap();
        status["services"][format!("{ns}/web")].clone()
    };
    wait_for("/status to show the service", Duration::from_secs(5), || async {
        let web = service().await;
        web["providers"]["member2"] == serde_json::json!({"state": "ready", "endpoints": 2})
            && web["consumers"]["member1"] == serde_json::json!({"slices": 1, "endpoints": 2, "synced": true})
    })
    .await;
    let (_, printed, _) = run(&["status", "--controller", &format!("http://127.0.0.1:{listen}")]);
    assert!(printed.contains(&format!("service {ns}/web → web")), "{printed}");
    wait_for("the service on the fleet page", Duration::from_secs(5), || async {
        let page = http(listen, "GET", "/ui/services", &[], b"").1;
        page.contains(&format!("data-service=\"{ns}/web\"")) && page.contains("2 endpoints")
    })
    .await;
    tokio::task::block_in_place(|| crate::browser::shoot(listen, &[("/ui/services", "Services", "services")]));

    // Pods become ready in member2 one at a time: each address reaches member1.
    let changes: usize = std::env::var("FLOTILLA_BENCH_CHANGES").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let writes = || {
        members.writes(|e| {
            e["objectRef"]["resource"] == "endpointslices"
                && e["objectRef"]["namespace"] == ns
                && e["objectRef"]["name"].as_str().is_some_and(|n| n.starts_with("member2-"))
        })
    };
    let before = writes();
    let provider_changes = count_changes(members.client("member2").await, ns);
    let mut latencies = Vec::new();
    for i in 0..changes {
        let known = addresses(members, "member2", ns, "web", false).await;
        pods.create(&PostParams::default(), &pod(ns, i)).await.unwrap();
        let mut seen_in_provider = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "pod {i} never reached member1");
            let provider = addresses(members, "member2", ns, "web", false).await;
            if seen_in_provider.is_none() && provider.len() > known.len() {
                seen_in_provider = Some(Instant::now());
            }
            if let Some(seen) = seen_in_provider
                && addresses(members, "member1", ns, "web", true).await == provider
            {
                latencies.push(seen.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Let the last write's echo settle, then count what the changes cost.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = writes() - before;
    provider_changes.abort();
    let changed = CHANGES.load(std::sync::atomic::Ordering::Relaxed);
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    eprintln!(
        "endpoints: {changes} pods ready, provider slice → consumer slice p50 {:?} p99 {:?}; \
         {changed} provider slice updates, {written} consumer writes ({:.2} per update)",
        at(0.5),
        at(0.99),
        written as f64 / changed.max(1) as f64
    );
    assert!(
        written >= changes && written <= changed,
        "at most one write per provider slice update: {written} for {changed}"
    );
    imported_match(members, ns, ("web", "web"), &["member2"], 2 + changes).await;

    // member2 stops answering: its endpoints leave member1 within the bound; back, they return.
    let frozen = Instant::now();
    members.freeze("member2", true);
    wait_for("member2's addresses to leave member1", Duration::from_secs(30), || async {
        addresses(members, "member1", ns, "web", true).await.is_empty()
    })
    .await;
    let withdrawn = frozen.elapsed();
    members.freeze("member2", false);
    imported_match(members, ns, ("web", "web"), &["member2"], 2 + changes).await;
    eprintln!("member2 stopped: withdrawn from member1 after {withdrawn:?}");
    assert!(withdrawn < Duration::from_secs(10), "withdrawn within the bound: {withdrawn:?}");

    // The MultiClusterService leaves Git: its slices leave member1.
    let without: Vec<String> =
        fleet(ns).split("---\n").filter(|d| !d.contains("MultiClusterService")).map(str::to_owned).collect();
    write(repo.work.path(), "fleet.yaml", without.join("---\n").as_bytes());
    commit_and_push(repo.work.path(), "no more multi-cluster service");
    wait_for("the imported slices to leave member1", Duration::from_secs(60), || async {
        let slices: Api<EndpointSlice> = Api::namespaced(members.client("member1").await, ns);
        let listed = slices
            .list(&ListParams::default().labels(&format!("{MANAGED_BY}=endpointslice-controller.flotilla.dev")))
            .await;
        listed.is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

/// Updates of member2's own `web` slices seen since the count started.
static CHANGES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts every update of member2's own `web` slices (kube-controller-manager's writes).
fn count_changes(client: kube::Client, ns: &str) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api: Api<EndpointSlice> = Api::namespaced(client, ns);
    let config = watcher::Config::default().labels("kubernetes.io/service-name=web");
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, config).boxed();
        let mut listed = false;
        while let Some(Ok(event)) = stream.next().await {
            match event {
                watcher::Event::InitDone => listed = true,
                watcher::Event::Apply(_) | watcher::Event::Delete(_) if listed => {
                    CHANGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                _ => {}
            }
        }
    })
}
