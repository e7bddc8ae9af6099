//! Watching a local repository, so a development loop does not wait for the poll
//! interval: a commit or a reset wakes the controller, and reading the repository does
//! not. Every fetch opens the repository's files, and inotify reports opens and closes;
//! a watcher that counted those would wake the next fetch, and that one the next
//! (notify-debouncer-mini, used before, could not tell them apart: it keeps paths, not kinds).

use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use anyhow::Context;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::is_url;

/// A commit writes many files; the controller is woken once they have been quiet this long.
const QUIET: Duration = Duration::from_millis(200);

/// Watching stops when this is dropped.
pub struct LocalWatch {
    _watcher: RecommendedWatcher,
}

/// For a local repository, calls `changed` when its Git directory changes, once per
/// burst of changes. Remote URLs are fetched on the interval or a webhook instead: `None`.
pub fn watch_local(repo: &str, changed: impl Fn() + Send + 'static) -> anyhow::Result<Option<LocalWatch>> {
    if is_url(repo) {
        return Ok(None);
    }
    let git_dir = git2::Repository::open(repo).context("opening the repository")?.path().to_path_buf();
    let watcher = watch(&git_dir, changed)?;
    tracing::info!(path = %git_dir.display(), "watching the local repository for commits");
    Ok(Some(watcher))
}

fn watch(dir: &Path, changed: impl Fn() + Send + 'static) -> anyhow::Result<LocalWatch> {
    let (tx, rx) = channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !matches!(e.kind, EventKind::Access(_))) {
            let _ = tx.send(());
        }
    })
    .context("watching the repository")?;
    watcher.watch(dir, RecursiveMode::Recursive).with_context(|| format!("watching {}", dir.display()))?;
    std::thread::Builder::new()
        .name("flotilla-watch".into())
        .spawn(move || debounce(&rx, QUIET, changed))
        .context("starting the watch thread")?;
    Ok(LocalWatch { _watcher: watcher })
}

/// Calls `changed` each time a burst of changes has been quiet for `quiet`; returns once
/// the watcher is gone.
fn debounce(changes: &Receiver<()>, quiet: Duration, changed: impl Fn()) {
    while changes.recv().is_ok() {
        loop {
            match changes.recv_timeout(quiet) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        changed();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_burst_of_changes_wakes_once() {
        let (tx, rx) = channel();
        for _ in 0..20 {
            tx.send(()).unwrap();
        }
        drop(tx);
        let woken = AtomicUsize::new(0);
        debounce(&rx, Duration::from_millis(50), || {
            woken.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(woken.load(Ordering::Relaxed), 0, "the watcher went away mid-burst: nothing to fetch for");
        let (tx, rx) = channel();
        let thread = std::thread::spawn(move || {
            let woken = AtomicUsize::new(0);
            debounce(&rx, Duration::from_millis(50), || {
                woken.fetch_add(1, Ordering::Relaxed);
            });
            woken.into_inner()
        });
        for _ in 0..20 {
            tx.send(()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        drop(tx);
        assert_eq!(thread.join().unwrap(), 2, "two bursts");
    }

    /// Reading the repository, as every fetch does, wakes nothing; a commit does.
    #[test]
    fn reads_do_not_wake_the_controller_and_a_commit_does() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = woken.clone();
        let _watch = watch(repo.path(), move || {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        for _ in 0..10 {
            let repo = git2::Repository::open(dir.path()).unwrap();
            let _ = std::fs::read(repo.path().join("HEAD")).unwrap();
            let _ = repo.head();
            std::thread::sleep(Duration::from_millis(30));
        }
        std::thread::sleep(QUIET * 2);
        assert_eq!(woken.load(Ordering::Relaxed), 0, "reads woke the controller");
        let signature = git2::Signature::now("t", "t@example.invalid").unwrap();
        let tree = repo.find_tree(repo.index().unwrap().write_tree().unwrap()).unwrap();
        repo.commit(Some("HEAD"), &signature, &signature, "one", &tree, &[]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while woken.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(woken.load(Ordering::Relaxed), 1, "one commit, one wake-up");
    }
}
