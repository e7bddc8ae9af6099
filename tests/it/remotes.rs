//! `flotilla run` against authenticated remotes served by real servers: https (Git's
//! own `git http-backend` behind TLS and Basic auth, hack/git-https-server.py) and ssh
//! (OpenSSH's sshd with a client key and known_hosts). Wrong credentials and unknown
//! host keys fail the fetch, apply nothing, and no secret reaches the logs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::apply::fleet;
use crate::controller::{Running, free_port, http, ready, serve};
use crate::members::members;
use crate::support::{root, wait_for};

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A controller whose logs go to a file, to search them for secrets afterwards.
fn controller(repo: &str, extra: &[&str], env: &[(&str, &Path)], log: &Path) -> (Running, u16) {
    let port = free_port();
    let cache = tempfile::tempdir().unwrap().keep();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flotilla"));
    cmd.args(["run", "--repo", repo, "--interval", "1", "--instance", &format!("remote-{port}")])
        .args(["--kubeconfig", members().kubeconfig().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.to_str().unwrap()])
        .args(extra)
        .env("RUST_LOG", "debug")
        .env_remove("SSL_CERT_FILE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    (Running(cmd.spawn().unwrap()), port)
}

/// Waits until the controller has counted a failed fetch.
async fn fetch_fails(port: u16) {
    wait_for("a failed fetch in /metrics", Duration::from_secs(30), || async {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && http(port, "GET", "/metrics", &[], b"")
                .1
                .contains(r#"flotilla_errors_total{cluster="-",reason="fetch"}"#)
    })
    .await;
    assert!(!ready(port), "nothing was applied");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_https_remote_with_a_token() {
    let ns = "e2e-https";
    let repo = serve(&fleet(ns, &[("over-https", &["member1"])]));
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = crate::support::certificate(dir.path());
    let (token, wrong) = ("tok-7c1f0a9e5b", "tok-wrong-31d4");
    let (token_file, wrong_file) = (dir.path().join("token"), dir.path().join("wrong"));
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::write(&wrong_file, wrong).unwrap();
    let port = free_port();
    let mut server = Command::new("python3")
        .arg(root().join("hack/git-https-server.py"))
        .args(["--root", repo.served.path().to_str().unwrap(), "--port", &port.to_string()])
        .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
        .args(["--user", "flotilla", "--password-file", token_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let _server = Running(server);
    let url = format!("https://127.0.0.1:{port}/fleet.git");
    let auth = |file: &Path| {
        ["--git-username".to_owned(), "flotilla".into(), "--git-password-file".into(), file.display().to_string()]
    };

    // The right token, trusting the server's CA through SSL_CERT_FILE: applied.
    let good_log = dir.path().join("good.log");
    let args = auth(&token_file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_good, good_port) = controller(&url, &args, &[("SSL_CERT_FILE", &cert)], &good_log);
    wait_for("the https remote to apply", Duration::from_secs(60), || async { ready(good_port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members().client("member1").await, ns);
    assert!(cms.get_opt("over-https").await.unwrap().is_some());

    // A wrong token, and the right token without trusting the CA: both fail to fetch.
    let wrong_log = dir.path().join("wrong.log");
    let args = auth(&wrong_file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_wrong, wrong_port) = controller(&url, &args, &[("SSL_CERT_FILE", &cert)], &wrong_log);
    fetch_fails(wrong_port).await;
    let untrusted_log = dir.path().join("untrusted.log");
    let args = auth(&token_file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_untrusted, untrusted_port) = controller(&url, &args, &[], &untrusted_log);
    fetch_fails(untrusted_port).await;
    for log in [&good_log, &wrong_log, &untrusted_log] {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(!text.is_empty(), "debug logging is on");
        assert!(!text.contains(token) && !text.contains(wrong), "a token reached {}", log.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ssh_remote_with_a_key_and_known_hosts() {
    let ns = "e2e-ssh";
    let repo = serve(&fleet(ns, &[("over-ssh", &["member2"])]));
    let dir = tempfile::tempdir().unwrap();
    let keygen = |name: &str| {
        let path = dir.path().join(name);
        run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f", path.to_str().unwrap()]));
        std::fs::read_to_string(path.with_extension("pub")).unwrap()
    };
    let host_key = keygen("host");
    let other_host_key = keygen("other-host");
    let client_key = keygen("client");
    std::fs::write(dir.path().join("authorized_keys"), &client_key).unwrap();
    let port = free_port();
    let config = dir.path().join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
             StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let _sshd = Running(
        Command::new(crate::support::tool("/usr/sbin/sshd", "openssh-server"))
            .args(["-D", "-e", "-f", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("sshd to listen", Duration::from_secs(10), || async {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    // Named by the caller: a key's own text may hold a `/`.
    let known = |name: &str, key: &str| {
        let path = dir.path().join(format!("known-{name}"));
        let mut fields = key.split_whitespace();
        std::fs::write(&path, format!("[127.0.0.1]:{port} {} {}\n", fields.next().unwrap(), fields.next().unwrap()))
            .unwrap();
        path.display().to_string()
    };
    let url = format!("ssh://root@127.0.0.1:{port}{}/fleet.git", repo.served.path().display());
    let key_file = dir.path().join("client").display().to_string();

    let good_log = dir.path().join("good.log");
    // Hashed, as `HashKnownHosts yes` and `ssh-keyscan -H` write it.
    let known_good = known("good", &host_key);
    run(Command::new("ssh-keygen").args(["-q", "-H", "-f", &known_good]));
    assert!(std::fs::read_to_string(&known_good).unwrap().starts_with("|1|"), "hashed");
    let args = ["--git-ssh-key-file", &key_file, "--git-known-hosts-file", &known_good];
    let (_good, good_port) = controller(&url, &args, &[], &good_log);
    wait_for("the ssh remote to apply", Duration::from_secs(60), || async { ready(good_port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members().client("member2").await, ns);
    assert!(cms.get_opt("over-ssh").await.unwrap().is_some());

    // A server whose key is not the one in known_hosts is refused.
    let impostor_log = dir.path().join("impostor.log");
    let args = ["--git-ssh-key-file", &key_file, "--git-known-hosts-file", &known("other", &other_host_key)];
    let (_impostor, impostor_port) = controller(&url, &args, &[], &impostor_log);
    fetch_fails(impostor_port).await;
    let text = std::fs::read_to_string(&impostor_log).unwrap();
    assert!(text.contains("does not match"), "the refusal says why: {text}");
    let private = std::fs::read_to_string(dir.path().join("client")).unwrap();
    let secret_line = private.lines().nth(1).unwrap();
    for log in [&good_log, &impostor_log] {
        assert!(!std::fs::read_to_string(log).unwrap().contains(secret_line), "the private key reached a log");
    }
}
