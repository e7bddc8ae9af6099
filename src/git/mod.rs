//! Git, in one place: read a revision into memory, fetch the followed branch, commit and
//! push. The CLI reads revisions of local repositories ([`read`]); the controller and
//! the autoscaler share one [`Branch`] through [`Git`], which owns it on a thread of its
//! own, so no runtime thread ever waits on a lock held across network I/O.
//!
//! A revision is a commit id ([`Revision`]) from fetch to render to write-back; it
//! becomes text only where it is shown.

mod auth;
mod branch;
mod read;
mod socket;
mod verify;
mod watch;

use std::time::Duration;

pub use auth::GitAuth;
pub use branch::{Branch, FetchError, Files, Pushed, check_transport, is_url};
pub use read::{read, read_cached, read_commit};
pub use verify::{Unverified, Verifier};
pub use watch::{LocalWatch, watch_local};

/// Where a local directory's manifests come from, for the inventory: inside a Git work
/// tree, its `origin` URL (else the work tree's path), the branch (`rev`, else the
/// checked-out branch, else unknown) and the directory's path in the tree; outside one,
/// the directory itself. So CI jobs that clone the same repository to different places
/// name the same source.
pub fn local_source(dir: &std::path::Path, rev: Option<&str>) -> flotilla_core::inventory::Source {
    use flotilla_core::inventory::Source;
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Ok(repo) = git2::Repository::discover(&dir) else {
        return Source::new(&dir.to_string_lossy(), "", "");
    };
    let Some(workdir) = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok()) else {
        return Source::new(&dir.to_string_lossy(), "", "");
    };
    let url = repo
        .find_remote("origin")
        .ok()
        .and_then(|r| r.url().ok().map(str::to_owned))
        .unwrap_or_else(|| workdir.to_string_lossy().into_owned());
    let branch = match rev {
        Some(rev) => rev.to_owned(),
        None => repo
            .head()
            .ok()
            .filter(git2::Reference::is_branch)
            .and_then(|h| h.shorthand().ok().map(str::to_owned))
            .unwrap_or_default(),
    };
    let path = dir.strip_prefix(&workdir).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    Source::new(&url, &branch, &path)
}

/// A commit of the followed repository.
pub type Revision = git2::Oid;

/// How long connecting to a remote may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection to a remote may stay silent (a stalled transfer) before the
/// fetch or push fails.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Readies libgit2's networking: every TCP connection is one of ours, with Nagle's
/// algorithm off ([`socket`]), and every network operation is bounded (connect, then
/// each read and write on the connection), so a fetch or push against an unresponsive
/// remote fails instead of hanging (libgit2's own timeouts are still set: its SSH
/// transport bounds libssh2's session with them). Must be called before any other thread starts:
/// libgit2 keeps these in globals without synchronisation.
#[allow(unsafe_code)]
pub fn prepare_network() -> Result<(), git2::Error> {
    let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: called from `main` before the async runtime or any other thread exists,
    // which is what the functions require (they write libgit2 globals unsynchronised).
    unsafe {
        git2::opts::set_server_connect_timeout_in_milliseconds(millis(CONNECT_TIMEOUT))?;
        git2::opts::set_server_timeout_in_milliseconds(millis(STALL_TIMEOUT))?;
    }
    socket::register(CONNECT_TIMEOUT, STALL_TIMEOUT)
}

type Job = Box<dyn FnOnce(&mut Branch) + Send>;

/// The followed branch, owned by one thread that runs one job at a time. Cloning is
/// cheap; every clone reaches the same branch. Jobs are short (one fetch, one read, one
/// push attempt): back-offs and waits happen in the caller, between jobs.
#[derive(Clone)]
pub struct Git {
    jobs: std::sync::mpsc::Sender<Job>,
}

/// The thread that owned the branch is gone (it panicked).
#[derive(Debug, thiserror::Error)]
#[error("the Git worker stopped")]
pub struct Stopped;

impl Git {
    /// Hands `branch` to a thread of its own.
    pub fn spawn(mut branch: Branch) -> Self {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("flotilla-git".into())
            .spawn(move || {
                for job in queue {
                    job(&mut branch);
                }
            })
            .expect("spawning the Git thread");
        Self { jobs }
    }

    /// Runs `job` on the branch and waits (asynchronously) for its result.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Branch) -> T + Send + 'static,
    ) -> Result<T, Stopped> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |branch| {
            let _ = tx.send(job(branch));
        });
        self.jobs.send(job).map_err(|_| Stopped)?;
        rx.await.map_err(|_| Stopped)
    }
}
