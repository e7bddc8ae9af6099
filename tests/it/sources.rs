//! Helm charts and kustomizations as templates (docs/sources.md), on
//! tests/fixtures/sources: what the real tools print is what is placed, a values change
//! plans per member, bad sources are refused whole, and it all reconciles into three
//! real members.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use crate::members::members;
use crate::support::{commit_all, root, run, write};

const FIXTURE: &str = "tests/fixtures/sources";

/// A tool hack/build-tools.sh builds (or `FLOTILLA_HELM` / `FLOTILLA_KUSTOMIZE` names).
pub(crate) fn built(name: &str) -> PathBuf {
    let path = std::env::var_os(format!("FLOTILLA_{}", name.to_uppercase())).map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
        cache.join("flotilla/bin").join(name)
    });
    assert!(path.is_file(), "{} is missing: hack/build-tools.sh builds {name} (hack/test.sh runs it)", path.display());
    path
}

/// A tool's output, run in the fixture.
fn tool(name: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(built(name)).args(args).current_dir(root().join(FIXTURE)).output().unwrap();
    assert!(out.status.success(), "{name} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every object of a YAML stream, by kind/namespace/name.
fn objects(stream: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for doc in stream.split("\n---").map(|d| d.trim_start_matches("---")) {
        let value: Value = serde_saphyr::from_str(doc).unwrap_or(Value::Null);
        if value.is_null() {
            continue;
        }
        let key = format!("{}/{}/{}", value["kind"], value["metadata"]["namespace"], value["metadata"]["name"]);
        assert!(out.insert(key.clone(), value).is_none(), "{key} twice");
    }
    out
}

/// A copy of the fixture in a temporary directory.
fn copy() -> tempfile::TempDir {
    crate::support::copy_tree(&root().join(FIXTURE))
}

fn render(repo: &str) -> Value {
    let (code, stdout, stderr) = run(&["render", repo, "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn placed(plan: &Value, cluster: &str) -> Vec<(String, String, Option<i64>)> {
    plan["clusters"][cluster]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "Deployment")
        .map(|m| {
            let name = m["metadata"]["name"].as_str().unwrap().to_owned();
            (
                name,
                m["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap().to_owned(),
                m["spec"]["replicas"].as_i64(),
            )
        })
        .collect()
}

/// The templates flotilla loads are exactly what `helm template` and `kustomize build`
/// print with the same inputs, object for object, plus the plain manifests.
#[test]
fn the_templates_are_what_helm_template_and_kustomize_build_print() {
    let (code, stdout, stderr) = run(&["render", FIXTURE, "--templates"]);
    assert_eq!(code, 0, "{stderr}");
    let ours = objects(&stdout);
    assert!(stdout.contains("# source: helm:sources/bookinfo:bookinfo/templates/services.yaml"), "{stdout}");

    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values.path(), br#"{"tag": "1.19.1"}"#).unwrap();
    let mut expected = objects(&tool(
        "helm",
        &[
            "template",
            "bookinfo",
            "charts/bookinfo",
            "--namespace",
            "sources",
            "-f",
            "charts/bookinfo/values-prod.yaml",
            "-f",
            values.path().to_str().unwrap(),
            "--include-crds",
            "--skip-tests",
        ],
    ));
    std::fs::write(values.path(), br#"{"image": {"tag": "2.4.1"}}"#).unwrap();
    let observer = ["template", "observer", "charts/observer", "--namespace", "sources", "-f"];
    let observer = [&observer[..], &[values.path().to_str().unwrap(), "--include-crds", "--skip-tests"]].concat();
    expected.extend(objects(&tool("helm", &observer)));
    expected.extend(objects(&tool("kustomize", &["build", "web/overlays/prod"])));
    expected.extend(objects(&std::fs::read_to_string(root().join(FIXTURE).join("namespace.yaml")).unwrap()));
    assert_eq!(ours.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (key, object) in &expected {
        assert_eq!(&ours[key], object, "{key}");
    }
    assert!(!ours.keys().any(|k| k.contains("observer-test")), "test hooks are left out");
    assert!(ours.contains_key("\"CustomResourceDefinition\"/null/\"probes.observer.example.com\""), "crds/ included");
}

/// Policies select what the charts and the overlay render by kind, name and labels;
/// overrides and replica division apply to them like any template.
#[test]
fn rendered_templates_are_placed_overridden_and_divided() {
    let plan = render(FIXTURE);
    assert_eq!(plan["problems"], serde_json::json!([]));
    let names = |c| placed(&plan, c).into_iter().map(|(n, _, r)| (n, r)).collect::<Vec<_>>();
    let two = Some(2);
    assert_eq!(
        names("member1"),
        [
            ("observer".into(), Some(1)),
            ("observer-cache".into(), Some(1)),
            ("prod-web".into(), Some(4)),
            ("productpage-v1".into(), two),
            ("reviews-v1".into(), two),
            ("reviews-v2".into(), two),
            ("reviews-v3".into(), two)
        ]
    );
    let member2: Vec<String> = names("member2").into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        member2,
        [
            "details-v1",
            "observer",
            "observer-cache",
            "prod-web",
            "ratings-v1",
            "reviews-v1",
            "reviews-v2",
            "reviews-v3"
        ]
    );
    assert_eq!(names("member2")[3], ("prod-web".into(), Some(2)), "six replicas divided 2:1");
    let member3 = placed(&plan, "member3");
    let ratings = member3.iter().find(|(n, _, _)| n == "ratings-v1").unwrap();
    assert_eq!(ratings.1, "mirror.member3.example/ack-demo/examples-bookinfo-ratings-v1:1.19.1", "the image override");
    let probes = |c: &str| plan["clusters"][c].as_array().unwrap().iter().filter(|m| m["kind"] == "Probe").count();
    assert_eq!((probes("member1"), probes("member2"), probes("member3")), (1, 1, 1));
}

/// A values change in a pull request: the per-member plan shows each Deployment the
/// chart changes, and only those (golden, as the PR comment shows it).
#[test]
fn a_values_change_plans_per_member() {
    let dir = copy();
    commit_all(dir.path(), "as the fixture");
    write(dir.path(), "charts/bookinfo/values-prod.yaml", b"replicas: 3\n");
    commit_all(dir.path(), "three replicas per version in production");
    let repo = dir.path().to_str().unwrap();
    let (code, stdout, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let diff: Value = serde_json::from_str(&stdout).unwrap();
    let changed = |c: &str| {
        diff["clusters"][c]["changed"].as_array().map_or(0, |a| {
            assert!(
                a.iter().all(|o| o["fields"] == serde_json::json!([{"path": "spec.replicas", "from": 2, "to": 3}]))
            );
            a.len()
        })
    };
    assert_eq!((changed("member1"), changed("member2"), changed("member3")), (4, 5, 1), "{diff}");
    let (code, markdown, stderr) = run(&["diff", repo, "--from", "HEAD~1", "--to", "HEAD", "-o", "markdown"]);
    assert_eq!(code, 0, "{stderr}");
    let (from, to) = (diff["from"].as_str().unwrap(), diff["to"].as_str().unwrap());
    let markdown =
        markdown.replace(from, "FROM").replace(to, "TO").replace(&from[..12], "FROM").replace(&to[..12], "TO");
    insta::with_settings!({snapshot_path => root().join("tests/snapshots"), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("sources-values-change", markdown);
    });
}

/// What each bad source gets: exit 2 and a message naming the chart, the file and
/// what is wrong.
fn refused(dir: &Path, env: &[(&str, &str)], expected: &[&str]) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["render", dir.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
}

#[test]
fn a_broken_chart_a_missing_tool_and_a_chart_reaching_outside_are_refused() {
    let dir = copy();
    let services = dir.path().join("charts/bookinfo/templates/services.yaml");
    let text = std::fs::read_to_string(&services).unwrap();
    std::fs::write(&services, format!("{text}{{{{ .Values.nope }}\n")).unwrap();
    refused(
        dir.path(),
        &[],
        &["HelmChart sources/bookinfo (bookinfo/chart.yaml", "bookinfo/templates/services.yaml:", "helm template"],
    );
    std::fs::write(&services, &text).unwrap();

    let empty = tempfile::tempdir().unwrap();
    let nowhere = empty.path().to_str().unwrap();
    let missing =
        [("PATH", nowhere), ("HOME", nowhere), ("FLOTILLA_HELM", "/nonexistent/helm"), ("FLOTILLA_TOOLS_BIN", nowhere)];
    refused(
        dir.path(),
        &missing,
        &["helm is needed to render this repository", "hack/build-tools.sh", "FLOTILLA_HELM"],
    );

    let chart = dir.path().join("bookinfo/chart.yaml");
    let declared = std::fs::read_to_string(&chart).unwrap();
    std::fs::write(&chart, declared.replace("chart: charts/bookinfo", "chart: ../../etc")).unwrap();
    refused(dir.path(), &[], &["bookinfo/chart.yaml: document 1", "spec.chart: leaves the repository"]);
    let values = declared.replace("values-prod.yaml]", "values-prod.yaml, /etc/passwd]");
    std::fs::write(&chart, values).unwrap();
    refused(dir.path(), &[], &["bookinfo/chart.yaml: document 1", "spec.valuesFiles[1]"]);
    std::fs::write(&chart, &declared).unwrap();

    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("charts/bookinfo/files.txt")).unwrap();
    refused(dir.path(), &[], &["charts/bookinfo/files.txt: symlink points outside the repository"]);
    std::fs::remove_file(dir.path().join("charts/bookinfo/files.txt")).unwrap();

    let overlay = dir.path().join("web/overlays/prod/kustomization.yaml");
    let text = std::fs::read_to_string(&overlay).unwrap();
    std::fs::write(&overlay, text.replace("[../../base]", "[../../base, ../../../../etc]")).unwrap();
    refused(
        dir.path(),
        &[],
        &["web/overlays/prod/kustomization.yaml: document 1 (line 5): resources[1]: leaves the repository"],
    );
    std::fs::write(
        &overlay,
        text.replace("[../../base]", "[../../base, https://github.com/kubernetes-sigs/kustomize//examples/helloWorld]"),
    )
    .unwrap();
    refused(dir.path(), &[], &["web/overlays/prod/kustomization.yaml", "resources[1]"]);
}

fn instance_writes(e: &Value) -> bool {
    e["objectRef"]["namespace"] == "sources"
        || e["objectRef"]["name"] == "sources"
        || e["objectRef"]["name"] == "probes.observer.example.com"
        || e["objectRef"]["name"] == "flotilla-inventory-sources"
}

/// The fixture reconciles into three real members; a broken chart or a missing tool
/// afterwards is exit 2 and writes nothing anywhere.
#[tokio::test(flavor = "multi_thread")]
async fn charts_and_an_overlay_reconcile_into_three_members() {
    let members = members();
    let dir = copy();
    let (code, stdout, stderr) = crate::apply::apply(members, dir.path(), "sources", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let expected: [(&str, &[(&str, i32)]); 3] = [
        (
            "member1",
            &[
                ("observer", 1),
                ("observer-cache", 1),
                ("prod-web", 4),
                ("productpage-v1", 2),
                ("reviews-v1", 2),
                ("reviews-v2", 2),
                ("reviews-v3", 2),
            ],
        ),
        (
            "member2",
            &[
                ("details-v1", 2),
                ("observer", 1),
                ("observer-cache", 1),
                ("prod-web", 2),
                ("ratings-v1", 2),
                ("reviews-v1", 2),
                ("reviews-v2", 2),
                ("reviews-v3", 2),
            ],
        ),
        ("member3", &[("observer", 1), ("observer-cache", 1), ("ratings-v1", 2)]),
    ];
    let probe = ApiResource {
        group: "observer.example.com".into(),
        version: "v1".into(),
        api_version: "observer.example.com/v1".into(),
        kind: "Probe".into(),
        plural: "probes".into(),
    };
    for (member, deployments) in expected {
        let client = members.client(member).await;
        let api: Api<Deployment> = Api::namespaced(client.clone(), "sources");
        let mut live: Vec<(String, i32)> = api
            .list(&ListParams::default().labels("flotilla.dev/managed=true"))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|d| (d.metadata.name.unwrap(), d.spec.unwrap().replicas.unwrap()))
            .collect();
        live.sort();
        let want: Vec<(String, i32)> = deployments.iter().map(|(n, r)| (n.to_string(), *r)).collect();
        assert_eq!(live, want, "{member}");
        let probes: Api<DynamicObject> = Api::namespaced_with(client, "sources", &probe);
        let url = probes.get("homepage").await.unwrap().data["spec"]["url"].clone();
        assert_eq!(url, "http://productpage.sources:9080/", "{member}: the chart's custom resource, after its CRD");
    }

    let before = members.writes(instance_writes);
    assert!(before > 20, "the audit log shows the apply's writes ({before})");
    let services = dir.path().join("charts/bookinfo/templates/services.yaml");
    let text = std::fs::read_to_string(&services).unwrap();
    std::fs::write(&services, format!("{text}{{{{ fail \"broken on purpose\" }}}}\n")).unwrap();
    let (code, _, stderr) = crate::apply::apply(members, dir.path(), "sources", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("broken on purpose") && stderr.contains("HelmChart sources/bookinfo"), "{stderr}");
    std::fs::write(&services, &text).unwrap();
    write(dir.path(), "charts/bookinfo/values-prod.yaml", b"replicas: 0\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["apply", dir.path().to_str().unwrap(), "--kubeconfig", members.kubeconfig().to_str().unwrap()])
        .args(["--instance", "sources"])
        .env("FLOTILLA_HELM", "/nonexistent/helm")
        .env("FLOTILLA_TOOLS_BIN", "/nonexistent")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("helm is needed"), "{stderr}");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(members.writes(instance_writes), before, "nothing written after the good apply");
}

/// A remote chart (the fixture's observer, packaged and served by a real HTTPS server as
/// a Helm repository) is fetched only with --fetch-charts, refused when its bytes do not
/// match the pinned digest, then renders offline from the chart cache exactly as the
/// vendored chart does.
#[test]
fn a_remote_chart_is_fetched_only_when_told_verified_against_its_digest_and_kept() {
    use std::io::BufRead;
    let work = tempfile::tempdir().unwrap();
    let served = work.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let helm = built("helm");
    let helm_run = |args: &[&str]| {
        let out = std::process::Command::new(&helm).args(args).current_dir(root().join(FIXTURE)).output().unwrap();
        assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    helm_run(&["package", "charts/observer", "--destination", served.to_str().unwrap()]);
    helm_run(&["repo", "index", served.to_str().unwrap()]);
    let archive = std::fs::read(served.join("observer-2.4.0.tgz")).unwrap();
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&archive)));
    let (cert, key) = crate::support::certificate(work.path());
    let (port, log) = (crate::controller::free_port(), work.path().join("requests.log"));
    let mut server = std::process::Command::new("python3")
        .arg(root().join("hack/helm-repo-server.py"))
        .args(["--root", served.to_str().unwrap(), "--port", &port.to_string(), "--log", log.to_str().unwrap()])
        .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    let server = crate::controller::Running(server);

    // The fixture with the observer's HelmChart pointing at the served chart.
    let repo = copy();
    let vendored = render(repo.path().to_str().unwrap());
    let remote = |digest: &str| {
        point_at(
            repo.path(),
            &format!("url: \"https://127.0.0.1:{port}\", name: observer, version: 2.4.0, digest: \"{digest}\""),
        )
    };
    let cache = work.path().join("cache");
    let flotilla = |fetch: bool| render_fetching(repo.path(), &cache, &cert, fetch, None);
    let requests = || std::fs::read_to_string(&log).unwrap_or_default();
    let archives = || std::fs::read_dir(cache.join("charts")).map(|d| d.count()).unwrap_or(0);

    remote(&digest);
    let (code, stdout, stderr) = flotilla(false);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("HelmChart sources/observer") && stderr.contains("observer/chart.yaml"), "{stderr}");
    assert!(stderr.contains("is not in the chart cache: run with --fetch-charts"), "{stderr}");
    assert_eq!(requests(), "", "nothing is fetched unless told");

    let wrong = format!("sha256:{}", "0".repeat(64));
    remote(&wrong);
    let (code, _, stderr) = flotilla(true);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("the archive is {digest}, not {wrong} as spec.repository.digest pins")),
        "{stderr}"
    );
    assert!(requests().contains("/observer-2.4.0.tgz"), "{}", requests());
    assert_eq!(archives(), 0, "an archive that does not match is not kept");

    remote(&digest);
    let (code, stdout, stderr) = flotilla(true);
    assert_eq!(code, 0, "{stderr}");
    let fetched: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(fetched["clusters"], vendored["clusters"], "the remote chart renders as the vendored one");
    assert_eq!(archives(), 1);

    // The server gone and the values changed (a new render): the kept archive serves.
    drop(server);
    let chart =
        std::fs::read_to_string(repo.path().join("observer/chart.yaml")).unwrap().replace("tag: 2.4.1", "tag: 2.4.2");
    write(repo.path(), "observer/chart.yaml", chart.as_bytes());
    let (code, stdout, stderr) = flotilla(false);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("observer:2.4.2"), "the new values rendered from the kept archive");
}

/// `flotilla render REPO -o json` with its own source cache, trusting `cert`, fetching
/// charts when `fetch`, with `registry` as --chart-registry-config: (exit code, stdout,
/// stderr).
fn render_fetching(
    repo: &Path,
    cache: &Path,
    cert: &Path,
    fetch: bool,
    registry: Option<&Path>,
) -> (i32, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"));
    command.args(["render", repo.to_str().unwrap(), "-o", "json"]);
    command.env("FLOTILLA_SOURCE_CACHE", cache).env("SSL_CERT_FILE", cert).env("FLOTILLA_HELM", built("helm"));
    if fetch {
        command.arg("--fetch-charts");
    }
    if let Some(registry) = registry {
        command.arg("--chart-registry-config").arg(registry);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The fixture copy's observer HelmChart pointed at `repository` (the mapping's
/// fields) instead of its vendored chart directory.
fn point_at(repo: &Path, repository: &str) {
    let original = std::fs::read_to_string(root().join(FIXTURE).join("observer/chart.yaml")).unwrap();
    let chart = original.replacen("  chart: charts/observer\n", &format!("  repository: {{{repository}}}\n"), 1);
    assert_ne!(chart, original, "the fixture names its chart directory");
    write(repo, "observer/chart.yaml", chart.as_bytes());
}

/// The same chart pushed to a real private OCI registry (Debian's docker-registry, the
/// CNCF Distribution registry, over TLS with a password) and named by an `oci://` URL:
/// pulled only with --fetch-charts and with the credentials the operator gives
/// (--chart-registry-config, as `helm registry login` writes them), refused when its
/// bytes do not match the pinned digest, and rendered exactly as the vendored chart.
#[test]
fn an_oci_chart_is_pulled_from_a_real_private_registry_only_when_told_and_verified() {
    let registry = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("docker-registry is needed: apt-get install docker-registry (hack/test.sh installs it)");
    let work = tempfile::tempdir().unwrap();
    let helm = built("helm");
    let helm_run = |args: &[&str]| {
        let out = std::process::Command::new(&helm)
            .args(args)
            .env("HELM_CONFIG_HOME", work.path().join("helm"))
            .current_dir(root().join(FIXTURE))
            .output()
            .unwrap();
        assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    helm_run(&["package", "charts/observer", "--destination", work.path().to_str().unwrap()]);
    let archive = work.path().join("observer-2.4.0.tgz");
    let digest =
        format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&archive).unwrap())));
    let (cert, key) = crate::support::certificate(work.path());
    let port = crate::controller::free_port();
    let config = work.path().join("registry.yml");
    // bcrypt of PASSWORD (the registry reads htpasswd files of bcrypt hashes only).
    const PASSWORD: &str = "s3cret-chart-pass";
    let htpasswd = work.path().join("htpasswd");
    std::fs::write(&htpasswd, "flotilla:$2b$12$9VPvlk413lAzyLw7KJ6DcuSlzj7f0jJmftPRpizy//.ZFh/W/JugK\n").unwrap();
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog: {{level: warn, accesslog: {{disabled: false}}}}\nstorage: {{filesystem: {{rootdirectory: {}}}}}\nauth: {{htpasswd: {{realm: flotilla-test, path: {}}}}}\nhttp: {{addr: \"127.0.0.1:{port}\", tls: {{certificate: {}, key: {}}}}}\n",
            work.path().join("blobs").display(),
            htpasswd.display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let log = work.path().join("registry.log");
    let _registry = crate::controller::Running(
        std::process::Command::new(registry)
            .args(["serve", config.to_str().unwrap()])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(work.path().join("registry.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = format!("oci://127.0.0.1:{port}/charts");
    let login = std::process::Command::new(&helm)
        .args(["registry", "login", &format!("127.0.0.1:{port}"), "--username", "flotilla", "--password", PASSWORD])
        .args(["--ca-file", cert.to_str().unwrap()])
        .env("HELM_CONFIG_HOME", work.path().join("helm"))
        .output()
        .unwrap();
    assert!(login.status.success(), "helm registry login: {}", String::from_utf8_lossy(&login.stderr));
    let credentials = work.path().join("helm/registry/config.json");
    helm_run(&["push", archive.to_str().unwrap(), &url, "--ca-file", cert.to_str().unwrap()]);
    // Blob reads after the push: what flotilla pulled.
    let access = || {
        std::fs::read_to_string(&log).unwrap_or_default()
            + &std::fs::read_to_string(work.path().join("registry.err")).unwrap_or_default()
    };
    let pushed = access().matches("GET /v2/charts/observer/blobs/").count();
    let pulls = || access().matches("GET /v2/charts/observer/blobs/").count() - pushed;

    let repo = copy();
    let vendored = render(repo.path().to_str().unwrap());
    let cache = work.path().join("cache");
    let pin =
        |digest: &str| point_at(repo.path(), &format!("url: \"{url}/observer\", version: 2.4.0, digest: \"{digest}\""));
    pin(&digest);
    let (code, _, stderr) = render_fetching(repo.path(), &cache, &cert, false, Some(&credentials));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("chart observer 2.4.0 from {url}/observer is not in the chart cache")),
        "{stderr}"
    );
    assert_eq!(pulls(), 0, "nothing is pulled unless told");
    // Without the operator's credentials the registry refuses; the machine's own (none
    // here) are never used.
    let (code, _, stderr) = render_fetching(repo.path(), &cache, &cert, true, None);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot fetch chart observer 2.4.0") && stderr.contains("credential"), "{stderr}");
    assert_eq!(pulls(), 0);
    let missing = work.path().join("no-such-config.json");
    let (code, _, stderr) = render_fetching(repo.path(), &cache, &cert, true, Some(&missing));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--chart-registry-config") && stderr.contains("cannot read"), "{stderr}");

    let wrong = format!("sha256:{}", "0".repeat(64));
    pin(&wrong);
    let (code, _, stderr) = render_fetching(repo.path(), &cache, &cert, true, Some(&credentials));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("the archive is {digest}, not {wrong}")), "{stderr}");
    assert!(pulls() > 0, "pulled from the registry: {}", access());
    assert!(!stderr.contains(PASSWORD), "{stderr}");

    pin(&digest);
    let (code, stdout, stderr) = render_fetching(repo.path(), &cache, &cert, true, Some(&credentials));
    assert_eq!(code, 0, "{stderr}");
    let pulled: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(pulled["clusters"], vendored["clusters"], "the OCI chart renders as the vendored one");
    // Kept by its digest: the next render pulls nothing.
    let before = pulls();
    assert_eq!(render_fetching(repo.path(), &cache, &cert, true, None).0, 0, "kept: no credentials needed");
    assert_eq!(pulls(), before, "a kept archive is not pulled again");
}
