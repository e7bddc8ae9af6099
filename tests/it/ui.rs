//! The fleet page (`flotilla ui`) on the seed repository and three real members, read
//! over HTTP as a browser or a script reads it: cells carry their member, object and
//! desired replicas as attributes, a commit shows without a reload, every page is
//! escaped and never holds a Secret's value, and off loopback a token is required.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("examples/repo");
    let mut pending = vec![src.clone()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                write(dir.path(), &path.strip_prefix(&src).unwrap().to_string_lossy(), &std::fs::read(&path).unwrap());
            }
        }
    }
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
        visited.contains("/ui/workload/Secret/default/token") && visited.contains("/ui/member/member1"),
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
