//! A real forge for the preview tests: Gitea, built from its Go module by
//! hack/build-tools.sh, started on a free port with SQLite in a temporary directory, an
//! admin user and an API token. Requests go through its REST API as a user's would.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::controller::{Running, free_port};
use crate::support::wait_for;

pub const USER: &str = "flotilla";
const PASSWORD: &str = "flotilla-Test-1";

pub struct Gitea {
    _dir: tempfile::TempDir,
    pub port: u16,
    pub token: String,
    _process: Running,
}

/// Where hack/build-tools.sh put Gitea and the files it reads.
fn tools() -> PathBuf {
    let bin = std::env::var_os("FLOTILLA_TOOLS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/flotilla/bin"));
    assert!(
        bin.join("gitea").exists() && bin.join("gitea-static/options").exists(),
        "{} has no Gitea: run hack/build-tools.sh (hack/test.sh does)",
        bin.display()
    );
    bin
}

impl Gitea {
    pub async fn start() -> Self {
        let bin = tools();
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("app.ini");
        let root = dir.path().display();
        let ini = format!(
            "APP_NAME = flotilla-test\nRUN_MODE = prod\nRUN_USER = {user}\nI_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\nWORK_PATH = {root}\n\
             [server]\nHTTP_ADDR = 127.0.0.1\nHTTP_PORT = {port}\nROOT_URL = http://127.0.0.1:{port}/\nDISABLE_SSH = true\n\
             OFFLINE_MODE = true\nLFS_START_SERVER = false\nSTATIC_ROOT_PATH = {static_root}\n\
             [database]\nDB_TYPE = sqlite3\nPATH = {root}/gitea.db\n[security]\nINSTALL_LOCK = true\n\
             [service]\nDISABLE_REGISTRATION = true\n[webhook]\nALLOWED_HOST_LIST = loopback\nDELIVER_TIMEOUT = 10\n\
             [log]\nLEVEL = Warn\n[repository]\nROOT = {root}/repos\n[cron]\nENABLED = false\n",
            user = std::env::var("USER").unwrap_or_else(|_| whoami()),
            static_root = bin.join("gitea-static").display(),
        );
        std::fs::write(&config, ini).unwrap();
        let gitea = |args: &[&str]| {
            let out = Command::new(bin.join("gitea"))
                .args(args)
                .args(["--config", config.to_str().unwrap()])
                .env("GITEA_WORK_DIR", dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "gitea {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        gitea(&["migrate"]);
        gitea(&[
            "admin",
            "user",
            "create",
            "--admin",
            "--username",
            USER,
            "--password",
            PASSWORD,
            "--email",
            "flotilla@example.invalid",
            "--must-change-password=false",
        ]);
        let token = gitea(&["admin", "user", "generate-access-token", "--username", USER, "--scopes", "all", "--raw"]);
        let token = token.lines().last().unwrap().trim().to_owned();
        let log = std::fs::File::create(dir.path().join("web.log")).unwrap();
        let process = Command::new(bin.join("gitea"))
            .args(["web", "--config", config.to_str().unwrap()])
            .env("GITEA_WORK_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let gitea = Gitea { _dir: dir, port, token, _process: Running(process) };
        wait_for("Gitea to answer", Duration::from_secs(60), || async {
            gitea.try_api("GET", "version", None).await.is_some_and(|(code, _)| code == 200)
        })
        .await;
        gitea
    }

    /// The API root.
    pub fn api_root(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1", self.port)
    }

    /// A repository's clone URL, without credentials (it is public).
    pub fn clone_url(&self, repo: &str) -> String {
        format!("http://127.0.0.1:{}/{USER}/{repo}.git", self.port)
    }

    /// Pushes `rev` of the work tree at `work` to `branch` of `repo`.
    pub fn push(&self, work: &Path, repo: &str, rev: &str, branch: &str) {
        let url = format!("http://{USER}:{PASSWORD}@127.0.0.1:{}/{USER}/{repo}.git", self.port);
        crate::controller::git(work, &["push", "-q", "-f", &url, &format!("{rev}:refs/heads/{branch}")]);
    }

    async fn try_api(&self, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let request = http::Request::builder()
            .method(method)
            .uri(format!("{}/{path}", self.api_root()))
            .header("authorization", format!("token {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.map(Value::to_string).unwrap_or_default())))
            .unwrap();
        let response = client.request(request).await.ok()?;
        let code = response.status().as_u16();
        let bytes = response.into_body().collect().await.ok()?.to_bytes();
        Some((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// Calls the API and returns the answer; panics unless it succeeded.
    pub async fn api(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (code, answer) = self.try_api(method, path, body.as_ref()).await.expect("Gitea answers");
        assert!((200..300).contains(&code), "{method} {path}: {code} {answer}");
        answer
    }
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
