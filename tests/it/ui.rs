//! The fleet page (`flotilla ui`) on the seed repository and three real members, read
//! over HTTP as a browser or a script reads it: cells carry their member, object and
//! desired replicas as attributes, a commit shows without a reload, every page is
//! escaped and never holds a Secret's value, and off loopback a token is required.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::browser::Browser;
use crate::controller::{Running, free_port};
use crate::members::members;
use crate::support::{root, write};

/// An HTTP/1.1 exchange: status, headers (lower-cased names) and body.
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    stream.write_all(format!("{request}\r\n").as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, head.to_lowercase(), body.to_owned())
}

/// `flotilla ui` on `repo`, once it answers.
fn serve(repo: &Path, extra: &[&str], port: u16) -> Running {
    let members = members();
    let child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "ui",
            repo.to_str().unwrap(),
            "--kubeconfig",
            members.kubeconfig().to_str().unwrap(),
            "--refresh",
            "200ms",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = Running(child);
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "flotilla ui did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    guard
}

/// The seed repository in a temporary directory, with a file whose name is markup and a
/// Secret placed on member1.
fn seed() -> tempfile::TempDir {
    let dir = crate::support::copy_tree(&root().join("examples/repo"));
    let hostile = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: quoted, namespace: default}\ndata: {k: v}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: default}\nstringData: {password: hunter2-ui}\n---\n\
         apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: ui-extras, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: quoted}, {apiVersion: v1, kind: Secret, name: token}]\n\
         \x20 placement: {clusterAffinity: {clusterNames: [member1]}}\n";
    write(dir.path(), "<img src=x onerror=alert(1)>.yaml", hostile.as_bytes());
    dir
}

fn cell(page: &str, member: &str, workload: &str) -> Option<String> {
    let at = page.find(&format!("data-member=\"{member}\" data-workload=\"{workload}\" data-replicas=\""))?;
    let rest = &page[at..];
    let start = rest.find("data-replicas=\"")? + "data-replicas=\"".len();
    Some(rest[start..].split('"').next()?.to_owned())
}

#[test]
fn the_page_shows_the_split_live_escapes_everything_and_never_a_secret() {
    let repo = seed();
    let port = free_port();
    let _ui = serve(repo.path(), &["--listen", &format!("127.0.0.1:{port}")], port);
    let (code, head, page) = get(port, "/ui/", &[]);
    assert_eq!(code, 200, "{head}{page}");
    assert!(head.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{head}");
    assert!(!page.contains("<script>") && !page.contains(" style="), "no inline script or style");
    assert_eq!(cell(&page, "member1", "Deployment/default/nginx").as_deref(), Some("1"), "{page}");
    assert_eq!(cell(&page, "member2", "Deployment/default/nginx"), None, "no nginx in member2 at 1 replica");
    // Filtered by labels, as `kubectl -l` selects: only nginx carries app=nginx.
    let labelled = get(port, "/ui/?label=app%3Dnginx", &[]).2;
    let rows = labelled.matches("<th scope=\"row\">").count();
    assert!(rows == 1 && labelled.contains("/ui/workload/Deployment/default/nginx"), "{labelled}");
    assert_eq!(get(port, "/ui/?label=app+notin+%28nginx%29", &[]).2.matches("Deployment/default/nginx\"").count(), 0);
    let invalid = get(port, "/ui/?label=app+in+nginx", &[]).2;
    assert!(invalid.contains("Label selector: ") && invalid.contains("0 objects"), "{invalid}");

    // Live: an events stream is open when the replicas go to 10; the page then shows 5 and 5.
    let mut events = TcpStream::connect(("127.0.0.1", port)).unwrap();
    events.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    events.write_all(b"GET /ui/events HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let nginx = std::fs::read_to_string(repo.path().join("nginx/nginx.yaml")).unwrap();
    write(repo.path(), "nginx/nginx.yaml", nginx.replacen("replicas: 1", "replicas: 10", 1).as_bytes());
    let changed = Instant::now();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let mut chunk = [0u8; 1024];
        let n = events.read(&mut chunk).expect("an event within 5 s");
        seen.extend_from_slice(&chunk[..n]);
    }
    let page = get(port, "/ui/", &[]).2;
    assert!(changed.elapsed() < Duration::from_secs(5));
    assert_eq!(cell(&page, "member1", "Deployment/default/nginx").as_deref(), Some("5"), "{page}");
    assert_eq!(cell(&page, "member2", "Deployment/default/nginx").as_deref(), Some("5"), "{page}");

    // The workload page explains the 1:1 static-weight split.
    let (code, _, nginx) = get(port, "/ui/workload/Deployment/default/nginx", &[]);
    assert_eq!(code, 200);
    assert!(nginx.contains("10 replicas over static weights member1:1 member2:1 (sum 2)"), "{nginx}");
    assert!(nginx.contains("PropagationPolicy default/nginx-propagation"), "{nginx}");

    // A file name that is markup is text on every page that shows it.
    let quoted = get(port, "/ui/workload/ConfigMap/default/quoted", &[]).2;
    assert!(quoted.contains("&lt;img src=x onerror=alert(1)&gt;.yaml"), "{quoted}");
    assert!(!quoted.contains("<img"), "{quoted}");

    // Every page the fleet links to, and none holds the Secret's value.
    let mut pending = vec!["/ui/".to_owned()];
    let mut visited = std::collections::BTreeSet::new();
    while let Some(path) = pending.pop() {
        if !visited.insert(path.clone()) || visited.len() > 300 {
            continue;
        }
        let (code, _, body) = get(port, &path.replace("&amp;", "&"), &[]);
        assert_eq!(code, 200, "{path}");
        for secret in ["hunter2-ui", "aHVudGVyMi11aQ"] {
            assert!(!body.contains(secret), "{path} holds the Secret's value");
        }
        for link in body.split("href=\"").skip(1).filter_map(|s| s.split('"').next()) {
            if link.starts_with("/ui/") && !link.starts_with("/ui/static/") {
                pending.push(link.to_owned());
            }
        }
    }
    assert!(
        visited.contains("/ui/workload/Secret/default/token")
            && visited.contains("/ui/workload/Secret/default/token?live=1")
            && visited.contains("/ui/member/member1"),
        "{visited:?}"
    );
    assert_eq!(get(port, "/ui/member/nobody", &[]).0, 404);
}

#[test]
fn off_loopback_a_token_is_required() {
    let repo = seed();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "ui-token-5e1\n").unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["ui", repo.path().to_str().unwrap(), "--kubeconfig", "/nonexistent", "--listen", "0.0.0.0:1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("give --ui-token-file"));
    let port = free_port();
    let _ui =
        serve(repo.path(), &["--listen", &format!("0.0.0.0:{port}"), "--ui-token-file", token.to_str().unwrap()], port);
    for path in ["/ui/", "/ui/events", "/ui/member/member1", "/ui/workload/Deployment/default/nginx"] {
        let (code, head, _) = get(port, path, &[]);
        assert_eq!(code, 401, "{path}");
        assert!(head.contains("content-security-policy"));
        assert_eq!(get(port, path, &[("Authorization", "Bearer wrong")]).0, 401, "{path}");
    }
    assert_eq!(get(port, "/ui/", &[("Authorization", "Bearer ui-token-5e1")]).0, 200);
    // A browser signs in once; the cookie is HttpOnly and SameSite=Strict.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = "token=ui-token-5e1";
    let request = format!(
        "POST /ui/login HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 303"), "{response}");
    let cookie = response.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap_or_default().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{response}");
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(get(port, "/ui/", &[("Cookie", pair)]).0, 200);
}

/// The replicas each member's nginx cell shows, as the page's attributes say.
const NGINX_CELLS: &str = "return [...document.querySelectorAll('td[data-workload=\"Deployment/default/nginx\"][data-replicas]')]\
    .map(td => td.dataset.member + '=' + td.dataset.replicas).join(',')";

#[test]
fn in_chromium_the_page_updates_without_a_reload_and_markup_stays_text() {
    let repo = seed();
    let port = free_port();
    let _ui = serve(repo.path(), &["--listen", &format!("127.0.0.1:{port}")], port);
    let browser = Browser::start();
    let base = format!("http://127.0.0.1:{port}");
    browser.open(&format!("{base}/ui/"));
    assert_eq!(browser.run(NGINX_CELLS), "member1=1");
    browser.screenshot("overview");
    // Marks this document: a reload would lose the mark.
    browser.run("window.flotillaMark = 'kept'; return null");
    let nginx = std::fs::read_to_string(repo.path().join("nginx/nginx.yaml")).unwrap();
    write(repo.path(), "nginx/nginx.yaml", nginx.replacen("replicas: 1", "replicas: 10", 1).as_bytes());
    let changed = Instant::now();
    while browser.run(NGINX_CELLS) != "member1=5,member2=5" {
        assert!(
            changed.elapsed() < Duration::from_secs(5),
            "the page shows 5 and 5 within 5 s: {}",
            browser.run(NGINX_CELLS)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(browser.run("return window.flotillaMark"), "kept", "updated without a reload");
    browser.screenshot("overview-after");

    browser.open(&format!("{base}/ui/workload/Deployment/default/nginx"));
    let text = browser.run("return document.body.innerText");
    assert!(text.as_str().unwrap().contains("10 replicas over static weights member1:1 member2:1 (sum 2)"), "{text}");
    browser.screenshot("workload");
    browser.open(&format!("{base}/ui/member/member1"));
    browser.screenshot("member");

    // A file name that is markup: no element made of it, its text shown as written.
    browser.open(&format!("{base}/ui/workload/ConfigMap/default/quoted"));
    let shown = browser.run(
        "return [document.querySelectorAll('img').length, document.body.innerText.includes('<img src=x onerror=alert(1)>.yaml')]",
    );
    assert_eq!(shown, serde_json::json!([0, true]));
}

/// A Deployment of `replicas` divided 1:1 over member1 and member2, in `ns`.
fn divided(ns: &str, replicas: u32) -> String {
    let mut repo = crate::apply::fleet(ns, &[("settings", &["member1"])]);
    repo.push_str(&format!(
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n\
         \x20 selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n\
         \x20   spec: {{containers: [{{name: web, image: registry.example/web:1}}]}}\n---\n\
         apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n\
         \x20 resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]\n  placement:\n\
         \x20   clusterAffinity: {{clusterNames: [member1, member2]}}\n    replicaScheduling:\n\
         \x20     replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n\
         \x20       staticWeightList:\n        - {{targetCluster: {{clusterNames: [member1]}}, weight: 1}}\n\
         \x20       - {{targetCluster: {{clusterNames: [member2]}}, weight: 1}}\n"
    ));
    repo
}

/// [`divided`], and a Service member2's API server refuses (an unknown `spec.type`).
fn refusing(ns: &str, replicas: u32) -> String {
    divided(ns, replicas)
        + &format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: refused, namespace: {ns}}}\n\
             spec: {{type: Bogus, ports: [{{port: 80}}]}}\n---\n\
             apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: refused, namespace: {ns}}}\n\
             spec:\n  resourceSelectors: [{{apiVersion: v1, kind: Service, name: refused}}]\n\
             \x20 placement: {{clusterAffinity: {{clusterNames: [member2]}}}}\n"
        )
}

fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_controller_serves_the_page_on_its_main_listener_only_with_its_own_state() {
    let ns = "e2e-ui-ctrl";
    let repo = crate::controller::serve(&refusing(ns, 4));
    let secret = tempfile::tempdir().unwrap();
    let secret_file = secret.path().join("secret");
    std::fs::write(&secret_file, "hook-secret-ui").unwrap();
    let hooks = free_port();
    let hooks_at = format!("127.0.0.1:{hooks}");
    let args = ["--ui", "--ui-refresh", "500ms", "--interval", "1", "--instance", "ui-ctrl"];
    let (_controller, port, _cache) = crate::controller::run_on_daemon(
        repo.port,
        &[&args[..], &["--webhook-listen", &hooks_at, "--webhook-secret-file", secret_file.to_str().unwrap()]].concat(),
    );
    let web = "Deployment/e2e-ui-ctrl/web";
    wait_until("the first render on the page", Duration::from_secs(60), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok() && cell(&get(port, "/ui/", &[]).2, "member1", web).is_some()
    });
    let page = get(port, "/ui/", &[]).2;
    assert_eq!(cell(&page, "member1", web).as_deref(), Some("2"), "{page}");
    assert_eq!(cell(&page, "member2", web).as_deref(), Some("2"), "{page}");

    // The member page holds the controller's own view: converged on the revision it
    // rendered, target and applied.
    wait_until("member1 current on the page", Duration::from_secs(30), || {
        get(port, "/ui/member/member1", &[]).2.contains("data-state=\"current\"")
    });
    let member = get(port, "/ui/member/member1", &[]).2;
    assert!(member.contains("Target revision") && member.contains("Applied revision"), "{member}");

    // An object member2 refuses: its workload page says why, in member2's row.
    wait_until("the refused Service's error on its page", Duration::from_secs(30), || {
        let page = get(port, &format!("/ui/workload/Service/{ns}/refused"), &[]).2;
        page.contains("last apply failed: ") && page.contains("Unsupported value")
    });

    // Never on the webhook listener.
    assert_eq!(get(hooks, "/ui/", &[]).0, 404, "the page is not served beside the webhooks");

    // A commit shows without a reload: an event, then 4 and 4.
    let mut events = TcpStream::connect(("127.0.0.1", port)).unwrap();
    events.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    events.write_all(b"GET /ui/events HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    write(repo.work.path(), "fleet.yaml", refusing(ns, 8).as_bytes());
    crate::controller::commit_and_push(repo.work.path(), "eight");
    wait_until("8 replicas as 4 and 4", Duration::from_secs(15), || {
        let page = get(port, "/ui/", &[]).2;
        cell(&page, "member1", web).as_deref() == Some("4") && cell(&page, "member2", web).as_deref() == Some("4")
    });
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let mut chunk = [0u8; 1024];
        let n = events.read(&mut chunk).expect("an event for the commit");
        seen.extend_from_slice(&chunk[..n]);
    }

    // The controller's views answer; the workload page explains the split.
    for view in ["/ui/rollouts", "/ui/failover", "/ui/services"] {
        let (code, _, body) = get(port, view, &[]);
        assert_eq!(code, 200, "{view}");
        assert!(!body.contains("flotilla run --ui"), "{view} is the controller's, not the laptop's: {body}");
    }
    // The history: both revisions, each applied on both members.
    wait_until("both revisions on both members in the history", Duration::from_secs(30), || {
        let history = get(port, "/ui/history", &[]).2;
        history.matches("<tr data-revision=").count() == 2 && history.matches("<td class=\"healthy\">").count() == 2
    });
    crate::browser::shoot(port, &[("/ui/history", "History", "history")]);
    let explained = get(port, &format!("/ui/workload/{web}"), &[]).2;
    assert!(explained.contains("8 replicas over static weights member1:1 member2:1 (sum 2)"), "{explained}");
}

#[test]
fn the_controller_refuses_an_open_page_off_loopback() {
    let (code, out, err) = crate::support::run(&[
        "run",
        "--repo",
        "/nonexistent",
        "--kubeconfig",
        "/nonexistent",
        "--ui",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("0.0.0.0:0 is not a loopback address: give --ui-token-file"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_takes_a_kubernetes_token_its_host_cluster_allows() {
    use serde_json::json;
    let ns = "e2e-ui-auth";
    let host = members().client("member1").await;
    crate::controller::apply_access(
        &host,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer", "namespace": ns}}),
        ],
    )
    .await;
    let token = crate::controller::service_account_token(&host, ns, "viewer").await;
    let repo = crate::controller::serve(&divided(ns, 2));
    let kubeconfig = members().kubeconfig().to_str().unwrap().to_owned();
    let args = ["--ui", "--ui-kubernetes-auth", "--interval", "1", "--instance", "ui-auth", "--namespace", ns];
    let host_args = ["--host-kubeconfig", &kubeconfig, "--host-context", "member1"];
    let (_controller, port, _cache) = crate::controller::run_on_daemon(repo.port, &[&args[..], &host_args].concat());
    wait_until("the controller listening", Duration::from_secs(30), || TcpStream::connect(("127.0.0.1", port)).is_ok());
    let bearer = format!("Bearer {token}");
    assert_eq!(get(port, "/ui/", &[]).0, 401, "no token");
    assert_eq!(get(port, "/ui/", &[("Authorization", "Bearer not-a-token")]).0, 401, "a token nobody issued");
    let (code, _, body) = get(port, "/ui/", &[("Authorization", &bearer)]);
    assert_eq!(code, 403, "a user the host knows, not granted the fleet: {body}");
    assert!(body.contains("system:serviceaccount:e2e-ui-auth:viewer") && !body.contains(&token), "{body}");

    // A Role granting `get` on this instance's fleet: the page opens (once the verdict
    // kept for 10 s runs out), by header and by the login cookie.
    crate::controller::apply_access(
        &host,
        &[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "fleet-viewer", "namespace": ns},
                   "rules": [{"apiGroups": ["flotilla.dev"], "resources": ["fleets"], "resourceNames": ["ui-auth"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "fleet-viewer", "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "fleet-viewer"},
                   "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns}]}),
        ],
    )
    .await;
    tokio::task::block_in_place(|| {
        wait_until("the granted token to open the page", Duration::from_secs(30), || {
            get(port, "/ui/", &[("Authorization", &bearer)]).0 == 200
        });
        let form = format!("token={token}");
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let request = format!(
            "POST /ui/login HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let cookie = answer.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap_or_else(|| panic!("{answer}"));
        let pair = cookie.split(';').next().unwrap();
        assert_eq!(get(port, "/ui/", &[("Cookie", pair)]).0, 200);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn the_workload_page_compares_with_the_members_and_shows_drift() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Api, Patch, PatchParams};
    let ns = "e2e-ui-live";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "fleet.yaml", divided(ns, 4).as_bytes());
    let (repo, kubeconfig) = (dir.path().to_str().unwrap(), members().kubeconfig().to_str().unwrap());
    let (code, out, err) = crate::support::run(&["apply", repo, "--kubeconfig", kubeconfig, "--instance", "ui-live"]);
    assert_eq!(code, 0, "{out}{err}");
    let port = free_port();
    let _ui = serve(dir.path(), &["--listen", &format!("127.0.0.1:{port}"), "--instance", "ui-live"], port);
    let url = format!("/ui/workload/Deployment/{ns}/web");
    let row = |page: &str, member: &str| {
        let start = page.find(&format!("<tr data-member=\"{member}\" data-live=\""))?;
        let rest = &page[start..];
        Some(rest[..rest.find("</tr>")?].to_owned())
    };
    tokio::task::block_in_place(|| {
        let page = get(port, &url, &[]).2;
        assert!(page.contains(&format!("{url}?live=1")), "the page offers the comparison: {page}");
        let live = get(port, &format!("{url}?live=1"), &[]).2;
        for member in ["member1", "member2"] {
            let row = row(&live, member).unwrap_or_else(|| panic!("{member}: {live}"));
            assert!(row.contains("data-live=\"synced\"") && row.contains("in sync"), "{row}");
        }
    });

    // Someone scales member1's copy by hand: the comparison shows the field and the value
    // applying would put back.
    let deployments: Api<Deployment> = Api::namespaced(members().client("member1").await, ns);
    let patch = serde_json::json!({"spec": {"replicas": 7}});
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    tokio::task::block_in_place(|| {
        let live = get(port, &format!("{url}?live=1&member=member1"), &[]).2;
        let drifted = row(&live, "member1").unwrap_or_else(|| panic!("{live}"));
        assert!(drifted.contains("data-live=\"drifted\""), "{drifted}");
        assert!(drifted.contains("spec.replicas") && drifted.contains("7 → 2"), "{drifted}");
        assert!(row(&live, "member2").is_none(), "member= compares that member alone: {live}");
        let heading = format!("Deployment/{ns}/web");
        crate::browser::shoot(port, &[(&format!("{url}?live=1#live"), &heading, "live")]);
    });
}
