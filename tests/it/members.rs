//! Real member clusters for end-to-end tests: kube-apiservers built from
//! `k8s.io/kubernetes`, with controller-manager, scheduler and kwok nodes, started by
//! `hack/local-up.sh`.
//!
//! With `FLOTILLA_MEMBERS_KUBECONFIG` set (a kubeconfig with contexts member1..memberN,
//! as local-up writes), those clusters are reused and left running. Otherwise the first
//! test that asks starts three in a temporary directory, owned by this test process: a
//! watchdog stops them when the process exits, however it exits (normal end, panic,
//! SIGKILL). Each test gets its own namespaces, deleted when its guard drops.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::support::root;

/// A set of running member clusters.
pub struct Members {
    kubeconfig: PathBuf,
    names: Vec<String>,
    /// local-up's state directory (audit logs, process ids), when known.
    state: Option<PathBuf>,
}

/// The member clusters, started on first use. A missing toolchain fails loudly here.
pub fn members() -> &'static Members {
    static MEMBERS: OnceLock<Members> = OnceLock::new();
    MEMBERS.get_or_init(|| match std::env::var_os("FLOTILLA_MEMBERS_KUBECONFIG") {
        Some(path) => Members::reuse(PathBuf::from(path)),
        None => Members::start(3),
    })
}

impl Members {
    fn reuse(kubeconfig: PathBuf) -> Self {
        let kc = Kubeconfig::read_from(&kubeconfig)
            .unwrap_or_else(|e| panic!("FLOTILLA_MEMBERS_KUBECONFIG={}: {e}", kubeconfig.display()));
        let mut names: Vec<String> =
            kc.contexts.iter().map(|c| c.name.clone()).filter(|n| n.starts_with("member")).collect();
        names.sort();
        let state = std::env::var_os("FLOTILLA_CLUSTERS_DIR").map(PathBuf::from);
        Self { kubeconfig, names, state }
    }

    fn start(n: usize) -> Self {
        // The watchdog's local-down.sh removes this directory, kubeconfig included.
        let state = tempfile::Builder::new().prefix("flotilla-members-").tempdir().expect("temp dir").keep();
        let kubeconfig = state.join("members.config");
        let out = Command::new(root().join("hack/local-up.sh"))
            .arg(n.to_string())
            .env("FLOTILLA_CLUSTERS_DIR", &state)
            .env("KUBECONFIG_OUT", &kubeconfig)
            .env("FLOTILLA_OWNER_PID", std::process::id().to_string())
            .output()
            .expect("hack/local-up.sh runs");
        assert!(
            out.status.success(),
            "could not start member clusters (hack/local-up.sh needs Go, openssl, curl and python3):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names = (1..=n).map(|i| format!("member{i}")).collect();
        Self { kubeconfig, names, state: Some(state) }
    }

    /// The kubeconfig with contexts member1…
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// Where `member`'s API server listens.
    pub fn server(&self, member: &str) -> std::net::SocketAddr {
        let kc = Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let cluster = kc.clusters.iter().find(|c| c.name == member).and_then(|c| c.cluster.clone());
        let server = cluster.and_then(|c| c.server).expect("the member's server");
        server.trim_start_matches("https://").trim_end_matches('/').parse().expect("host:port")
    }

    /// This kubeconfig with `member`'s API server reached at `port` on 127.0.0.1 instead
    /// (its certificate names 127.0.0.1, whatever the port): through a proxy, or at a
    /// port nothing listens on.
    pub fn kubeconfig_with(&self, member: &str, port: u16) -> tempfile::NamedTempFile {
        let mut kc = Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let cluster = kc.clusters.iter_mut().find(|c| c.name == member).and_then(|c| c.cluster.as_mut());
        cluster.expect("the member's cluster").server = Some(format!("https://127.0.0.1:{port}"));
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        std::fs::write(file.path(), serde_json::to_vec(&kc).expect("kubeconfigs serialise")).expect("written");
        file
    }

    /// Write requests (create, update, patch, delete) by the admin user recorded in the
    /// members' audit logs that `filter` accepts (it sees each audit event).
    pub fn writes(&self, filter: impl Fn(&serde_json::Value) -> bool) -> usize {
        self.names
            .iter()
            .flat_map(|m| self.audit(m))
            .filter(|e| e["user"]["username"] == "admin")
            .filter(|e| {
                matches!(e["verb"].as_str(), Some("create" | "update" | "patch" | "delete" | "deletecollection"))
            })
            .filter(|e| filter(e))
            .count()
    }

    /// The events in `member`'s audit log (write requests; see hack/audit-policy.yaml).
    pub fn audit(&self, member: &str) -> Vec<serde_json::Value> {
        let state = self.state.as_ref().expect("audit logs need FLOTILLA_CLUSTERS_DIR or owned clusters");
        let log = std::fs::read_to_string(state.join(member).join("audit.log")).unwrap_or_default();
        // A line cut short by a kill is not an event.
        log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) one member's API server.
    pub fn freeze(&self, member: &str, frozen: bool) {
        let pid = self.apiserver_pid(member);
        let signal = if frozen { "-STOP" } else { "-CONT" };
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    /// Kills (SIGKILL) one member's API server: connections to it are refused until
    /// [`Members::restart`]. Returns its command line, for the restart.
    pub fn kill(&self, member: &str) -> Vec<std::ffi::OsString> {
        let pid = self.apiserver_pid(member);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the API server's command line");
        let args = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a).to_owned())
            .collect();
        assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
        // Dead once /proc says so (a zombie counts: it no longer listens).
        let state = format!("/proc/{pid}/stat");
        while std::fs::read_to_string(&state).is_ok_and(|s| !s.contains(") Z ")) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        args
    }

    /// Starts a killed member's API server again with the same command line, in its own
    /// session as local-up starts it, and records its pid so local-down stops it.
    pub fn restart(&self, member: &str, args: &[std::ffi::OsString]) {
        let state = self.state.as_ref().expect("owned clusters");
        let name = format!("{member}-apiserver");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(state.join("logs").join(format!("{name}.log")))
            .expect("the API server's log");
        // It outlives this call, as local-up's processes do: local-down stops it by the pid
        // recorded below, and this test process reaps it when it exits.
        #[allow(clippy::zombie_processes)]
        let child = Command::new("setsid")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("setsid starts the API server");
        let pids = std::fs::read_to_string(state.join("pids")).unwrap();
        let pids: String = pids
            .lines()
            .map(|l| match l.split_once(' ') {
                Some((_, n)) if n == name => format!("{} {name}\n", child.id()),
                _ => format!("{l}\n"),
            })
            .collect();
        std::fs::write(state.join("pids"), pids).unwrap();
    }

    fn apiserver_pid(&self, member: &str) -> String {
        let state = self.state.as_ref().expect("owned clusters");
        let pids = std::fs::read_to_string(state.join("pids")).unwrap();
        pids.lines()
            .find_map(|l| {
                l.split_once(' ').filter(|(_, name)| *name == format!("{member}-apiserver")).map(|(p, _)| p.to_owned())
            })
            .expect("the member's API server pid")
    }

    /// Context names, `member1`…
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A client for one member.
    pub async fn client(&self, name: &str) -> Client {
        let kc = Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let options = KubeConfigOptions { context: Some(name.to_owned()), ..Default::default() };
        let config = Config::from_custom_kubeconfig(kc, &options).await.expect("context");
        Client::try_from(config).expect("client")
    }

    /// A fresh namespace, created in every member, deleted when the guard drops.
    pub async fn namespace(&'static self, prefix: &str) -> TestNamespace {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        for member in &self.names {
            let ns = Namespace {
                metadata: kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() },
                ..Default::default()
            };
            Api::<Namespace>::all(self.client(member).await)
                .create(&PostParams::default(), &ns)
                .await
                .expect("create namespace");
        }
        TestNamespace { name, members: self }
    }
}

/// Clusters for one test alone (for tests that stop a member), stopped on drop.
pub struct Dedicated(pub Members);

impl Dedicated {
    /// Starts `n` members for this test.
    pub fn start(n: usize) -> Self {
        Self(Members::start(n))
    }
}

impl Drop for Dedicated {
    fn drop(&mut self) {
        if let Some(state) = &self.0.state {
            let _ = Command::new(root().join("hack/local-down.sh")).env("FLOTILLA_CLUSTERS_DIR", state).output();
        }
    }
}

/// A namespace present in every member for one test.
pub struct TestNamespace {
    /// Its name.
    pub name: String,
    members: &'static Members,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await; a short-lived runtime on another thread deletes the
        // namespaces (the namespace controller of each member then empties them).
        let (name, members) = (self.name.clone(), self.members);
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                for member in members.names() {
                    let api = Api::<Namespace>::all(members.client(member).await);
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}
