//! The soak's running parts: five real clusters (four members and a host for the
//! Leases), the git daemon, two leader-elected controller replicas, each reaching the
//! host through its own cuttable proxy, and member4's Pull agent.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::controller::{Running, Served, commit_and_push, free_port, git, http};
use crate::fence::{api_server, through};
use crate::members::{Dedicated, Members};
use crate::proxy::Proxy;
use crate::support::{run_from_daemon, write};

/// The cluster that holds the Leases.
pub const HOST: &str = "member5";
/// `--lease-duration`, and the renew deadline flotilla derives from it (2/3).
pub const LEASE: Duration = Duration::from_secs(4);
pub const RENEW_DEADLINE: Duration = Duration::from_millis(2667);

/// One `flotilla run` process, restartable with the same arguments.
pub struct Process {
    pub name: String,
    pub port: u16,
    args: Vec<String>,
    logs: PathBuf,
    child: Option<Running>,
    /// Every pid it has run as (the identity in each request's `User-Agent`).
    pub pids: Vec<u32>,
}

impl Process {
    fn start(name: &str, port: u16, args: Vec<String>, logs: &Path) -> Self {
        let mut process = Self { name: name.into(), port, args, logs: logs.into(), child: None, pids: vec![] };
        process.restart();
        process
    }

    /// Starts it again (after [`Process::kill`]), appending to its log.
    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.logs.join(format!("{}.log", self.name)))
            .unwrap();
        // FLOTILLA_BIN: a copy of the binary, for a long soak while the tree is rebuilt.
        let binary = std::env::var_os("FLOTILLA_BIN").unwrap_or(env!("CARGO_BIN_EXE_flotilla").into());
        let child = Command::new(binary)
            .args(&self.args)
            .env("RUST_LOG", "info")
            // Timestamped, so a violation's time finds its lines in every process's log.
            .env("FLOTILLA_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.pids.push(child.id());
        let mut pids = std::fs::OpenOptions::new().append(true).create(true).open(self.logs.join("pids")).unwrap();
        std::io::Write::write_all(&mut pids, format!("{} {}\n", child.id(), self.name).as_bytes()).unwrap();
        self.child = Some(Running(child));
    }

    pub fn pid(&self) -> u32 {
        *self.pids.last().unwrap()
    }

    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill").args([&format!("-{name}"), &self.pid().to_string()]).status().unwrap().success();
        assert!(ok, "kill -{name} {}", self.name);
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.0.kill();
            let _ = child.0.wait();
        }
    }

    /// Its `/status`, when it answers within a second.
    pub fn status(&self) -> Option<serde_json::Value> {
        let stream = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_secs(1));
        stream.ok()?;
        serde_json::from_str(&http(self.port, "GET", "/status", &[], b"").1).ok()
    }
}

/// A controller replica and the proxy between it and the host cluster.
pub struct Replica {
    pub process: Process,
    pub host: Proxy,
}

pub struct World {
    pub clusters: Dedicated,
    pub repo: Served,
    pub replicas: [Replica; 2],
    pub agent: Process,
    /// Logs and the proxied kubeconfigs.
    pub dir: PathBuf,
}

impl World {
    /// Starts everything, with `fleet` and `web` as the repository's first commit.
    pub fn start(fleet: &str, web: &str, dir: PathBuf) -> Self {
        let clusters = Dedicated::start(5);
        let repo = crate::controller::serve(fleet);
        write(repo.work.path(), "web.yaml", web.as_bytes());
        commit_and_push(repo.work.path(), "web");
        let kubeconfig = clusters.0.kubeconfig().to_str().unwrap().to_owned();
        let replica = |name: &str| {
            let proxy = Proxy::to(api_server(clusters.0.kubeconfig(), HOST));
            let host = dir.join(format!("{name}-host.config"));
            through(clusters.0.kubeconfig(), HOST, &proxy, &host);
            let port = free_port();
            let cache = dir.join(format!("{name}-cache"));
            let mut args = common(repo.port, &kubeconfig, port, &cache);
            args.extend(
                [
                    "--leader-elect",
                    "--host-kubeconfig",
                    host.to_str().unwrap(),
                    "--host-context",
                    HOST,
                    "--lease-namespace",
                    "default",
                    "--autoscale-interval",
                    "1",
                ]
                .map(String::from),
            );
            args.extend(["--lease-duration".to_owned(), format!("{}s", LEASE.as_secs())]);
            Replica { process: Process::start(name, port, args, &dir), host: proxy }
        };
        let replicas = [replica("replica-a"), replica("replica-b")];
        let port = free_port();
        let mut args = common(repo.port, &kubeconfig, port, &dir.join("agent-cache"));
        args.extend(["--agent".to_owned(), "member4".to_owned()]);
        let agent = Process::start("agent-member4", port, args, &dir);
        Self { clusters, repo, replicas, agent, dir }
    }

    pub fn members(&self) -> &Members {
        &self.clusters.0
    }

    /// The replica that says it leads, if one does.
    pub fn leader(&self) -> Option<usize> {
        (0..2).find(|&i| self.replicas[i].process.status().is_some_and(|s| s["leading"] == true))
    }

    /// Every pid a replica ran as, with the replica's name.
    pub fn replica_pids(&self) -> Vec<(u32, String)> {
        self.replicas.iter().flat_map(|r| r.process.pids.iter().map(|&p| (p, r.process.name.clone()))).collect()
    }

    /// The served repository (bare), which the test pushes to directly: the git
    /// daemon being down cuts the controllers off, not the people committing.
    pub fn served(&self) -> PathBuf {
        self.repo.served.path().join("fleet.git")
    }

    pub fn work(&self) -> &Path {
        self.repo.work.path()
    }

    /// Commits the work tree and pushes it, rebasing on the autoscaler's commits when
    /// the push is refused; returns the pushed commit.
    pub fn publish(&self, message: &str) -> String {
        let work = self.work();
        git(work, &["add", "-A"]);
        // A move to where an item already is changes nothing, and is still a commit.
        git(
            work,
            &[
                "-c",
                "user.name=test",
                "-c",
                "user.email=test@example.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                message,
            ],
        );
        for _ in 0..20 {
            let pushed = Command::new("git").args(["push", "-q", "origin", "HEAD:main"]).current_dir(work).output();
            if pushed.unwrap().status.success() {
                return head(work);
            }
            git(work, &["fetch", "-q", "origin"]);
            git(
                work,
                &["-c", "user.name=test", "-c", "user.email=test@example.invalid", "rebase", "-q", "origin/main"],
            );
        }
        panic!("could not push {message}");
    }

    /// Moves the branch back to `commit` (a force push), as someone undoing commits does.
    pub fn rewind(&self, commit: &str) {
        git(self.work(), &["reset", "-q", "--hard", commit]);
        git(self.work(), &["push", "-q", "--force", "origin", "HEAD:main"]);
    }
}

fn common(git_port: u16, kubeconfig: &str, port: u16, cache: &Path) -> Vec<String> {
    let command = run_from_daemon(git_port);
    let mut args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    args.extend(
        [
            "--interval",
            "1",
            "--instance",
            "chaos",
            "--kubeconfig",
            kubeconfig,
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--cache-dir",
            cache.to_str().unwrap(),
        ]
        .map(String::from),
    );
    args
}

pub fn head(work: &Path) -> String {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(work).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
