//! Running a renderer (helm, kustomize) as a child process that can hold nothing of
//! ours: a cleared environment (no credentials, proxies or kubeconfig), a scratch HOME,
//! a time limit and an output limit. Found by `FLOTILLA_<TOOL>`, then `PATH`, then the
//! directory hack/build-tools.sh builds into; missing, it is named with how to get it.
//! A chart renders through `flotilla-helm` when one is found (`helm template` built from
//! the same pinned Helm packages without Helm's install machinery, so it starts in a
//! quarter of the time; docs/sources.md), else through the helm CLI.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one render may take.
pub const TIME_LIMIT: Duration = Duration::from_secs(60);
/// How much one render may print (the repository's limit for one file).
pub const OUTPUT_LIMIT: usize = 16 << 20;
/// How much of a failing tool's message is kept.
const MESSAGE_LIMIT: usize = 4 << 10;

/// A tool found on this machine, with what identifies its build (part of every cache
/// key).
#[derive(Debug, Clone)]
pub struct Tool {
    /// Its command name.
    pub name: &'static str,
    /// The executable.
    pub path: PathBuf,
    /// Its canonical path, size and modification time: a different build is a different
    /// key, without running the tool (a render whose outputs are all kept runs nothing).
    pub identity: String,
}

/// `name` (helm or kustomize), found once per process: what `helm pull` and
/// `kustomize build` run.
pub fn find(name: &'static str) -> anyhow::Result<Tool> {
    static HELM: OnceLock<Result<Tool, String>> = OnceLock::new();
    static KUSTOMIZE: OnceLock<Result<Tool, String>> = OnceLock::new();
    let cell = if name == "helm" { &HELM } else { &KUSTOMIZE };
    cell.get_or_init(|| locate(name, &[name])).clone().map_err(anyhow::Error::msg)
}

/// What renders a job of `name`'s: for helm, `flotilla-helm` when one is found (its
/// output is `helm template`'s byte for byte: tests/it/helm_renderer.rs), else the helm
/// CLI. `FLOTILLA_HELM` names the helm CLI, which then renders too.
pub fn renderer(name: &'static str) -> anyhow::Result<Tool> {
    static HELM: OnceLock<Result<Tool, String>> = OnceLock::new();
    match name {
        "helm" => HELM.get_or_init(|| locate("helm", &["flotilla-helm", "helm"])).clone().map_err(anyhow::Error::msg),
        _ => find(name),
    }
}

/// The first of `programs` found: `FLOTILLA_<NAME>`, then each program on `PATH` and
/// in the tools directory, in the order given.
fn locate(name: &'static str, programs: &[&str]) -> Result<Tool, String> {
    let variable = format!("FLOTILLA_{}", name.to_uppercase());
    let built = std::env::var_os("FLOTILLA_TOOLS_BIN").map(PathBuf::from).or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|c| c.join("flotilla/bin"))
    });
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path_var).chain(built).collect();
    let candidates = std::env::var_os(&variable)
        .map(PathBuf::from)
        .into_iter()
        .chain(programs.iter().flat_map(|program| dirs.iter().map(move |d| d.join(program))));
    let how = match name {
        "helm" => {
            "helm v4 (hack/build-tools.sh builds it and flotilla-helm, its faster renderer, from helm.sh/helm/v4; the container image has both)"
        }
        _ => {
            "kustomize v5 (hack/build-tools.sh builds it from sigs.k8s.io/kustomize/kustomize/v5; the container image has it)"
        }
    };
    let Some(path) = candidates.into_iter().find(|p| p.is_file()) else {
        return Err(format!(
            "{name} is needed to render this repository and was not found: install {how}, put it on PATH or set {variable}"
        ));
    };
    let path = path.canonicalize().map_err(|e| format!("{name} at {}: {e}", path.display()))?;
    let meta = path.metadata().map_err(|e| format!("{name} at {}: {e}", path.display()))?;
    let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    let identity = format!("{} {} {}", path.display(), meta.len(), modified.as_nanos());
    Ok(Tool { name, path, identity })
}

/// Runs `program args` in `dir` with only `env` and a scratch HOME under `scratch`;
/// its standard output, or why it failed (the tool's own message, cut short and with
/// control characters made visible: it may quote the repository).
pub fn run(
    program: &Path,
    args: &[&str],
    dir: &Path,
    scratch: &Path,
    env: &[(&str, &Path)],
) -> Result<Vec<u8>, String> {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir).env_clear().env("HOME", scratch).env("TMPDIR", scratch);
    // Both tools are Go programs that live for one render: with GOGC off they collect
    // garbage only once the heap nears GOMEMLIMIT (a helm run went from ~59 to ~48 ms
    // by hand), so a large chart still gets collected.
    command.env("GOGC", "off").env("GOMEMLIMIT", "512MiB");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let (ended, output_ended) = std::sync::mpsc::channel();
    let out = std::thread::spawn(move || {
        let read = read_limited(stdout, OUTPUT_LIMIT);
        let _ = ended.send(());
        read
    });
    let err = std::thread::spawn(move || read_limited(stderr, MESSAGE_LIMIT));
    let deadline = Instant::now() + TIME_LIMIT;
    // A tool's output ends when it exits: wait for that rather than poll, then for the
    // exit itself (polled, as one that closes its output may still hang).
    let _ = output_ended.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("took longer than {} s and was stopped", TIME_LIMIT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    };
    let (out, over) = out.join().map_err(|_| "its output could not be read".to_string())?;
    let (message, _) = err.join().map_err(|_| "its messages could not be read".to_string())?;
    if over {
        return Err(format!("printed more than {OUTPUT_LIMIT} bytes"));
    }
    if !status.success() {
        let message = String::from_utf8_lossy(&message);
        return Err(format!("{status}: {}", flotilla_core::escape::visible(message.trim())));
    }
    Ok(out)
}

/// Up to `limit` bytes of `reader`, and whether there were more (then the rest is
/// drained, so the child is not blocked on a full pipe).
fn read_limited(mut reader: impl Read, limit: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    let mut over = false;
    while let Ok(n) = reader.read(&mut chunk) {
        if n == 0 {
            break;
        }
        if out.len() + n > limit {
            over = true;
            out.extend_from_slice(&chunk[..limit - out.len()]);
            continue;
        }
        if !over {
            out.extend_from_slice(&chunk[..n]);
        }
    }
    (out, over)
}
