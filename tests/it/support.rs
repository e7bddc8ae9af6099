//! Helpers shared by the test modules.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the flotilla binary with `args` in the repository root.
pub fn flotilla(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .current_dir(root())
        .env("RUST_LOG", "warn")
        .output()
        .expect("the flotilla binary runs")
}

/// Exit code, stdout and stderr as text.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = flotilla(args);
    (
        out.status.code().expect("exited normally, not by a signal"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A temporary repo directory with `files` written into it.
pub fn repo(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        write(dir.path(), path, content);
    }
    dir
}

/// Writes a file, creating parent directories.
pub fn write(root: &Path, path: &str, content: &[u8]) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, content).unwrap();
}

/// One Push cluster named `name`.
pub fn cluster(name: &str) -> String {
    format!(
        "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec: {{syncMode: Push}}\n"
    )
}

/// Commits every file in `dir` to a new Git repository there; returns the commit id.
pub fn commit_all(dir: &Path, message: &str) -> String {
    let repo = git2::Repository::open(dir).or_else(|_| git2::Repository::init(dir)).unwrap();
    let mut index = repo.index().unwrap();
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("test", "test@example.invalid").unwrap();
    let parents: Vec<git2::Commit<'_>> = repo.head().ok().and_then(|h| h.peel_to_commit().ok()).into_iter().collect();
    let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap().to_string()
}

/// Polls `check` every 100 ms until it holds; panics naming `what` after `limit`.
pub async fn wait_for<F, Fut>(what: &str, limit: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

/// A program the tests run, or a failure that names it and how to get it (instead of a
/// bare "No such file or directory" from spawning it).
pub fn tool<'a>(path: &'a str, debian_package: &str) -> &'a str {
    assert!(
        std::path::Path::new(path).exists(),
        "{path} is missing: install Debian's {debian_package} package (hack/test.sh installs everything the tests need)"
    );
    path
}

/// `flotilla run` following the test git daemon's repository on `port`. The daemon
/// speaks plain git://, which the controller refuses unless told otherwise.
pub fn run_from_daemon(port: u16) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"));
    command.args(["run", "--insecure-allow-http", "--repo", &format!("git://127.0.0.1:{port}/fleet.git")]);
    command
}

/// A self-signed certificate for 127.0.0.1 in `dir`: (cert, key).
pub fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-keyout", key.to_str().unwrap(), "-out", cert.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    (cert, key)
}

/// A copy of the directory tree `src` in a new temporary directory.
pub fn copy_tree(src: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut pending = vec![src.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(src).unwrap().to_string_lossy().into_owned();
                write(dir.path(), &rel, &std::fs::read(&path).unwrap());
            }
        }
    }
    dir
}
