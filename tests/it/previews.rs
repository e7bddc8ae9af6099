//! PR plans and preview environments end to end: examples/repo on a real Gitea, the
//! controller following it with `--previews`, webhooks from Gitea, comments and statuses
//! read back through Gitea's API, previews in dedicated real members.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use serde_json::{Value, json};

use crate::controller::{Quiet, Running, free_port, git, ready};
use crate::gitea::Gitea;
use crate::members::{Dedicated, Members};
use crate::support::{root, wait_for};

const MARKER: &str = "<!-- flotilla:plan -->";

/// Quiet, unless `FLOTILLA_TEST_LOG` names a file for the controller's log.
trait Logged {
    fn logged(&mut self) -> std::process::Child;
}

impl Logged for Command {
    fn logged(&mut self) -> std::process::Child {
        match std::env::var_os("FLOTILLA_TEST_LOG") {
            Some(path) => {
                let file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
                self.env("RUST_LOG", "info").stdout(std::process::Stdio::null()).stderr(file).spawn().unwrap()
            }
            None => self.quiet(),
        }
    }
}

/// The controller following `flotilla/fleet` on `gitea`, with previews.
fn controller(gitea: &Gitea, kubeconfig: &Path, dir: &Path, http: u16, ttl: &str) -> Running {
    let poll = if ttl == "168h" { "1h" } else { "3s" };
    let token = dir.join("token");
    std::fs::write(&token, &gitea.token).unwrap();
    std::fs::write(dir.join("secret"), "hook-secret").unwrap();
    let cache = dir.join("cache");
    Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["run", "--insecure-allow-http", "--repo", &gitea.clone_url("fleet"), "--interval", "2"])
            .args(["--kubeconfig", kubeconfig.to_str().unwrap(), "--listen", &format!("127.0.0.1:{http}")])
            .args(["--cache-dir", cache.to_str().unwrap(), "--writeback", "off"])
            .args(["--webhook-secret-file", dir.join("secret").to_str().unwrap()])
            .args([
                "--previews",
                "--forge",
                "gitea",
                "--forge-api",
                &gitea.api_root(),
                "--forge-repo",
                "flotilla/fleet",
            ])
            .args(["--forge-token-file", token.to_str().unwrap(), "--preview-ttl", ttl])
            .args(["--preview-poll-interval", poll, "--ui"])
            .logged(),
    )
}

/// `flotilla/fleet` on `gitea` holding the seed repository (examples/repo) on `main`:
/// the temporary directory, the working clone in it, and the seed's commit.
async fn seed(gitea: &Gitea) -> (tempfile::TempDir, std::path::PathBuf, String) {
    gitea.api("POST", "user/repos", Some(json!({"name": "fleet", "default_branch": "main"}))).await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    assert!(Command::new("cp").arg("-r").arg(root().join("examples/repo")).arg(&work).status().unwrap().success());
    git(&work, &["init", "-q", "-b", "main"]);
    let main = commit(&work, "the seed");
    gitea.push(&work, "fleet", "HEAD", "main");
    (dir, work, main)
}

/// Gitea's webhook for `events` to the controller listening on `http`.
async fn hook(gitea: &Gitea, http: u16, events: &[&str]) {
    let hook = json!({
        "type": "gitea",
        "config": {"url": format!("http://127.0.0.1:{http}/webhook/pulls"), "content_type": "json", "secret": "hook-secret"},
        "events": events,
        "active": true,
    });
    gitea.api("POST", "repos/flotilla/fleet/hooks", Some(hook)).await;
}

/// flotilla's comments on pull request `number`.
async fn comments(gitea: &Gitea, number: u64) -> Vec<String> {
    let all = gitea.api("GET", &format!("repos/flotilla/fleet/issues/{number}/comments"), None).await;
    all.as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .filter(|b| b.starts_with(MARKER))
        .map(str::to_owned)
        .collect()
}

/// The statuses of `sha`, by context: state and description.
async fn statuses(gitea: &Gitea, sha: &str) -> Vec<(String, String, String)> {
    let all = gitea.api("GET", &format!("repos/flotilla/fleet/commits/{sha}/statuses"), None).await;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    all.as_array().unwrap().iter().map(|s| (text(&s["context"]), text(&s["status"]), text(&s["description"]))).collect()
}

fn head(work: &Path) -> String {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(work).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn commit(work: &Path, message: &str) -> String {
    git(work, &["add", "-A"]);
    git(work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", message]);
    head(work)
}

/// Sets `spec.replicas` of the nginx seed.
fn scale(work: &Path, replicas: u32) {
    let path = work.join("nginx/nginx.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (before, after) = text.split_once("replicas: ").unwrap();
    let rest = after.split_once('\n').unwrap().1;
    std::fs::write(&path, format!("{before}replicas: {replicas}\n{rest}")).unwrap();
}

async fn open_pull(gitea: &Gitea, branch: &str) -> u64 {
    let body = json!({"head": branch, "base": "main", "title": format!("change {branch}")});
    gitea.api("POST", "repos/flotilla/fleet/pulls", Some(body)).await["number"].as_u64().unwrap()
}

async fn deployment(members: &Members, member: &str, namespace: &str) -> Option<Deployment> {
    Api::<Deployment>::namespaced(members.client(member).await, namespace).get_opt("nginx").await.unwrap()
}

async fn label(gitea: &Gitea, number: u64, id: u64) {
    gitea.api("POST", &format!("repos/flotilla/fleet/issues/{number}/labels"), Some(json!({"labels": [id]}))).await;
}

/// Whether `namespace` is gone (or going) from `member`.
async fn gone(members: &Members, member: &str, namespace: &str) -> bool {
    let found = Api::<Namespace>::all(members.client(member).await).get_opt(namespace).await.unwrap();
    found.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some())
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_requests_on_gitea_get_plans_statuses_and_previews() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let gitea = Gitea::start().await;
    let (_dir, work, main) = seed(&gitea).await;
    let preview_label = gitea
        .api("POST", "repos/flotilla/fleet/labels", Some(json!({"name": "preview", "color": "#00aabb"})))
        .await["id"]
        .as_u64()
        .unwrap();

    let http = free_port();
    let state = tempfile::tempdir().unwrap();
    let mut running = controller(&gitea, members.kubeconfig(), state.path(), http, "60s");
    hook(&gitea, http, &["pull_request", "pull_request_sync", "pull_request_label"]).await;
    wait_for("main to apply", Duration::from_secs(120), || async { ready(http) }).await;
    let production = deployment(members, "member1", "default").await.expect("main's nginx in member1");
    let production_generation = production.metadata.generation;

    // A pull request scaling nginx from 1 to 10: one comment, member1 1 → 5, member2 +5.
    scale(&work, 10);
    let first = commit(&work, "ten replicas");
    gitea.push(&work, "fleet", "HEAD", "scale");
    let opened = Instant::now();
    let number = open_pull(&gitea, "scale").await;
    wait_for("the plan comment", Duration::from_secs(60), || async { !comments(&gitea, number).await.is_empty() })
        .await;
    let webhook_to_comment = opened.elapsed();
    let comment = comments(&gitea, number).await.remove(0);
    assert!(comment.contains("| ` member1 ` | 0 | 1 | 0 | ` Deployment default/nginx ` 1 → 5 |"), "{comment}");
    assert!(comment.contains("| ` member2 ` | 1 | 0 | 0 | ` Deployment default/nginx ` new (5) |"), "{comment}");
    assert!(comment.contains(&format!("` {} ` → ` {} `", &main[..12], &first[..12])), "{comment}");
    wait_for("the summary status", Duration::from_secs(30), || async {
        statuses(&gitea, &first).await.iter().any(|(c, s, _)| c == "flotilla/plan" && s == "success")
    })
    .await;
    let all = statuses(&gitea, &first).await;
    assert!(all.iter().any(|(c, s, _)| c == "flotilla/member2" && s == "success"), "{all:?}");

    // A second push updates the same comment.
    scale(&work, 4);
    let second = commit(&work, "four replicas");
    gitea.push(&work, "fleet", "HEAD", "scale");
    wait_for("the comment to follow the push", Duration::from_secs(60), || async {
        comments(&gitea, number).await.iter().any(|c| c.contains(&second[..12]))
    })
    .await;
    let after = comments(&gitea, number).await;
    assert_eq!(after.len(), 1, "one comment, updated: {after:?}");
    assert!(after[0].contains("` Deployment default/nginx ` 1 → 2"), "{}", after[0]);

    // The label: the head runs in pr-<N>-default, beside main's objects, untouched.
    let preview_ns = format!("pr-{number}-default");
    label(&gitea, number, preview_label).await;
    wait_for("the preview in member1 and member2", Duration::from_secs(90), || async {
        deployment(members, "member1", &preview_ns).await.is_some()
            && deployment(members, "member2", &preview_ns).await.is_some()
    })
    .await;
    let previewed = deployment(members, "member1", &preview_ns).await.unwrap();
    assert_eq!(previewed.spec.unwrap().replicas, Some(2), "the head's split of 4");
    let labels = previewed.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("flotilla.dev/preview").map(String::as_str), Some(number.to_string().as_str()));
    let production = deployment(members, "member1", "default").await.unwrap();
    // Its status moves (pods come and go); its spec does not.
    assert_eq!(production.metadata.generation, production_generation, "main's nginx untouched");
    assert!(!production.metadata.labels.unwrap_or_default().contains_key("flotilla.dev/preview"));
    assert_eq!(production.spec.unwrap().replicas, Some(1));
    assert!(deployment(members, "member2", "default").await.is_none(), "main places nginx on member1 only");
    wait_for("the comment to name the preview", Duration::from_secs(30), || async {
        comments(&gitea, number).await.iter().any(|c| c.contains("**Preview**") && c.contains(&preview_ns))
    })
    .await;
    // The fleet page lists the pull request: its link on the forge, its title, the
    // members its plan changes, its running preview.
    let link = format!("/flotilla/fleet/pulls/{number}\"");
    wait_for("the preview on the fleet page", Duration::from_secs(10), || async {
        let page = crate::controller::http(http, "GET", "/ui/previews", &[], b"").1;
        page.contains(&link) && page.contains("change scale") && page.contains("running, until")
    })
    .await;
    let page = crate::controller::http(http, "GET", "/ui/previews", &[], b"").1;
    assert!(page.contains("0 added, 1 changed, 0 removed"), "{page}");
    tokio::task::block_in_place(|| crate::browser::shoot(http, &[("/ui/previews", "Pull requests", "previews")]));

    // Closing the pull request removes the preview.
    gitea.api("PATCH", &format!("repos/flotilla/fleet/pulls/{number}"), Some(json!({"state": "closed"}))).await;
    wait_for("the preview to go", Duration::from_secs(60), || async {
        deployment(members, "member1", &preview_ns).await.is_none()
            && deployment(members, "member2", &preview_ns).await.is_none()
            && gone(members, "member1", &preview_ns).await
    })
    .await;
    assert!(deployment(members, "member1", "default").await.is_some(), "main's nginx stays");

    // A broken head: a failing status naming file and line, nothing applied.
    git(&work, &["checkout", "-q", "-b", "broken", &main]);
    crate::support::write(&work, "nginx/broken.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n");
    let broken = commit(&work, "broken");
    gitea.push(&work, "fleet", "HEAD", "broken");
    let broken_number = open_pull(&gitea, "broken").await;
    label(&gitea, broken_number, preview_label).await;
    wait_for("a failing status", Duration::from_secs(60), || async {
        statuses(&gitea, &broken).await.iter().any(|(c, s, _)| c == "flotilla/plan" && s == "failure")
    })
    .await;
    let failing = statuses(&gitea, &broken).await;
    let (_, _, why) = failing.iter().find(|(c, s, _)| c == "flotilla/plan" && s == "failure").unwrap();
    assert!(why.contains("nginx/broken.yaml") && why.contains("line"), "{why}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let broken_ns = format!("pr-{broken_number}-default");
    assert!(gone(members, "member1", &broken_ns).await && gone(members, "member2", &broken_ns).await);

    // A preview whose time to live runs out while the controller is down is removed when
    // it is back.
    git(&work, &["checkout", "-q", "-b", "ttl", &main]);
    scale(&work, 3);
    commit(&work, "three replicas");
    gitea.push(&work, "fleet", "HEAD", "ttl");
    let ttl_number = open_pull(&gitea, "ttl").await;
    label(&gitea, ttl_number, preview_label).await;
    let ttl_ns = format!("pr-{ttl_number}-default");
    wait_for("the ttl preview", Duration::from_secs(90), || async {
        deployment(members, "member1", &ttl_ns).await.is_some()
    })
    .await;
    let deployed = Instant::now();
    drop(running);
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(deployed.elapsed()) + Duration::from_secs(2)).await;
    assert!(deployment(members, "member1", &ttl_ns).await.is_some(), "nothing removes it while the controller is down");
    running = controller(&gitea, members.kubeconfig(), state.path(), http, "60s");
    wait_for("the expired preview to go after the restart", Duration::from_secs(90), || async {
        deployment(members, "member1", &ttl_ns).await.is_none()
    })
    .await;
    drop(running);
    eprintln!("Gitea webhook to plan comment (first push of a pull request): {webhook_to_comment:?}");
}

/// Every push is planned from its webhook alone (polling is an hour apart): the comment
/// names each new head. It prints push → comment p50 and p99; `hack/bench-previews.sh`
/// runs it in release mode over 20 pushes (`FLOTILLA_BENCH_PUSHES`), CI over 3.
#[tokio::test(flavor = "multi_thread")]
async fn every_push_is_planned_from_its_webhook_alone() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let gitea = Gitea::start().await;
    let (_dir, work, _) = seed(&gitea).await;
    let http = free_port();
    let state = tempfile::tempdir().unwrap();
    // Polling far apart, so every comment below comes from a webhook.
    let _running = controller(&gitea, members.kubeconfig(), state.path(), http, "168h");
    hook(&gitea, http, &["pull_request", "pull_request_sync"]).await;
    wait_for("main to apply", Duration::from_secs(120), || async { ready(http) }).await;
    scale(&work, 2);
    let first = commit(&work, "2");
    gitea.push(&work, "fleet", "HEAD", "bench");
    let number = open_pull(&gitea, "bench").await;
    wait_for("the first comment", Duration::from_secs(60), || async {
        comments(&gitea, number).await.iter().any(|c| c.contains(&first[..12]))
    })
    .await;
    let mut took = Vec::new();
    let pushes: u32 = std::env::var("FLOTILLA_BENCH_PUSHES").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    for replicas in 3..3 + pushes {
        scale(&work, replicas);
        let head = commit(&work, &replicas.to_string());
        gitea.push(&work, "fleet", "HEAD", "bench");
        let pushed = Instant::now();
        wait_for("the comment on the new head", Duration::from_secs(60), || async {
            comments(&gitea, number).await.iter().any(|c| c.contains(&head[..12]))
        })
        .await;
        took.push(pushed.elapsed());
    }
    took.sort();
    let p = |q: f64| took[((took.len() as f64 * q).ceil() as usize).clamp(1, took.len()) - 1];
    eprintln!(
        "webhook → comment over {} pushes: p50 {:?}, p99 {:?}, max {:?}",
        took.len(),
        p(0.5),
        p(0.99),
        took[took.len() - 1]
    );
}

/// With one Push member unreachable, the controller is ready once the others are
/// current, and a pull request still gets its plan comment and statuses: nothing
/// fleet-wide waits on one member.
#[tokio::test(flavor = "multi_thread")]
async fn with_a_member_unreachable_pull_requests_still_get_plans() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let gitea = Gitea::start().await;
    let (_dir, work, _) = seed(&gitea).await;

    // A port that was free a moment ago: nothing listens there, every connection is refused.
    let kubeconfig = members.kubeconfig_with("member2", free_port());
    let (http, state) = (free_port(), tempfile::tempdir().unwrap());
    let _running = controller(&gitea, kubeconfig.path(), state.path(), http, "60s");
    hook(&gitea, http, &["pull_request", "pull_request_sync", "pull_request_label"]).await;
    let started = Instant::now();
    wait_for("ready with member2 unreachable", Duration::from_secs(90), || async { ready(http) }).await;
    let became_ready = started.elapsed();
    let status: Value = serde_json::from_str(&crate::controller::http(http, "GET", "/status", &[], b"").1).unwrap();
    assert_eq!(status["members"]["member1"]["state"], "current", "{status}");
    assert_eq!(status["members"]["member2"]["state"], "failing", "{status}");
    assert!(deployment(members, "member1", "default").await.is_some(), "main's nginx in member1");

    scale(&work, 10);
    git(&work, &["checkout", "-q", "-b", "scale"]);
    let head = commit(&work, "ten replicas");
    gitea.push(&work, "fleet", "HEAD", "scale");
    let opened = Instant::now();
    let number = open_pull(&gitea, "scale").await;
    wait_for("the plan comment", Duration::from_secs(60), || async { !comments(&gitea, number).await.is_empty() })
        .await;
    let commented = opened.elapsed();
    let comment = comments(&gitea, number).await.remove(0);
    assert!(comment.contains("| ` member2 ` | 1 | 0 | 0 | ` Deployment default/nginx ` new (5) |"), "{comment}");
    wait_for("the plan status", Duration::from_secs(30), || async {
        statuses(&gitea, &head).await.iter().any(|(c, s, _)| c == "flotilla/plan" && s == "success")
    })
    .await;

    // The preview label: member1 gets the preview at once; member2 costs one refused
    // attempt (no retries for the cluster timeout), and the comment says so.
    let preview_label = gitea
        .api("POST", "repos/flotilla/fleet/labels", Some(json!({"name": "preview", "color": "#00aabb"})))
        .await["id"]
        .as_u64()
        .unwrap();
    let labelled = Instant::now();
    label(&gitea, number, preview_label).await;
    let preview_ns = format!("pr-{number}-default");
    wait_for("the comment to name the preview", Duration::from_secs(60), || async {
        comments(&gitea, number).await.iter().any(|c| c.contains("**Preview**") && c.contains("**Not applied**"))
    })
    .await;
    let previewed = labelled.elapsed();
    let comment = comments(&gitea, number).await.remove(0);
    assert!(comment.contains("**Not applied** in ` member2 `"), "{comment}");
    assert!(deployment(members, "member1", &preview_ns).await.is_some(), "the preview in member1");
    eprintln!(
        "member2 unreachable: ready after {became_ready:?}; plan comment {commented:?} after the pull request opened; \
         preview comment {previewed:?} after the label"
    );
}
