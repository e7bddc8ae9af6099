//! The followed branch of a repository: a remote fetched incrementally into an on-disk
//! bare cache, or a local repository read in place. Either way revisions are read from
//! Git's object database, never from a working tree.

use std::path::{Path, PathBuf};

use flotilla_core::load::ParseCache;
use flotilla_core::model::{Limits, RepoFiles};
use git2::{FetchOptions, Oid, Repository};

use super::{GitAuth, Revision};
use crate::source::SourceError;

/// Files to commit: repo-relative path and content.
pub type Files = Vec<(String, Vec<u8>)>;

/// The followed branch and the repository it is read from. libgit2 repositories may
/// move between threads but not be shared: one owner at a time (see [`super::Git`]).
pub struct Branch {
    repo: Repository,
    /// The remote URL, when fetching.
    url: Option<String>,
    branch: String,
    auth: GitAuth,
    /// Private key write-back commits are signed with (SSH, namespace `git`).
    signing_key: Option<PathBuf>,
}

/// Why a revision could not be fetched.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct FetchError {
    what: String,
    #[source]
    source: git2::Error,
}

fn failed(what: impl Into<String>) -> impl FnOnce(git2::Error) -> FetchError {
    let what = what.into();
    move |source| FetchError { what, source }
}

impl Branch {
    /// A local repository path is read in place; anything with a URL scheme (`file://`,
    /// `git://`) is fetched into a bare cache under `cache`.
    pub fn open(repo: &str, branch: &str, cache: &Path, auth: GitAuth) -> Result<Self, FetchError> {
        if !is_url(repo) {
            let opened = Repository::open(repo).map_err(failed(format!("{repo} is not a Git repository")))?;
            return Ok(Self { repo: opened, url: None, branch: branch.to_owned(), auth, signing_key: None });
        }
        let dir = cache.join(cache_name(repo));
        let opened = match Repository::open_bare(&dir) {
            Ok(r) => r,
            Err(_) => {
                std::fs::create_dir_all(&dir).map_err(|e| FetchError {
                    what: format!("cannot create the cache {}", dir.display()),
                    source: git2::Error::from_str(&e.to_string()),
                })?;
                Repository::init_bare(&dir).map_err(failed(format!("cannot create the cache {}", dir.display())))?
            }
        };
        Ok(Self { repo: opened, url: Some(repo.to_owned()), branch: branch.to_owned(), auth, signing_key: None })
    }

    /// Fetches the branch (for remotes) and returns its head commit. Every fetch adds a
    /// pack to the cache and libgit2 keeps every pack open, so once packs pile up the
    /// cache is compacted into one.
    pub fn fetch(&mut self) -> Result<Revision, FetchError> {
        let branch = format!("refs/heads/{}", self.branch);
        let local = format!("refs/remotes/origin/{}", self.branch);
        let oid = self.fetch_into(&branch, &local)?;
        if self.url.is_some() && packs(&self.pack_dir()).len() > MAX_PACKS {
            self.compact(oid).map_err(failed("compacting the repository cache"))?;
        }
        Ok(oid)
    }

    /// Fetches another ref of the same repository (a pull request's head,
    /// `refs/pull/7/head`) and returns its commit; a local repository resolves it in
    /// place. It is kept under `refs/flotilla/fetched/`, which compaction keeps.
    pub fn fetch_ref(&mut self, remote_ref: &str) -> Result<Revision, FetchError> {
        let local = format!("refs/flotilla/fetched/{}", remote_ref.trim_start_matches("refs/"));
        self.fetch_into(remote_ref, &local)
    }

    fn fetch_into(&mut self, remote_ref: &str, local: &str) -> Result<Revision, FetchError> {
        let Some(url) = self.url.clone() else {
            return self.repo.refname_to_id(remote_ref).map_err(failed(format!("{remote_ref} not found")));
        };
        let url = url.as_str();
        let mut remote = self.repo.remote_anonymous(url).map_err(failed(format!("invalid remote {}", redact(url))))?;
        let refspec = format!("+{remote_ref}:{local}");
        let mut options = FetchOptions::new();
        options.remote_callbacks(self.auth.callbacks(url));
        let what = remote_ref.strip_prefix("refs/heads/").unwrap_or(remote_ref);
        let fetching = format!("fetching {what} from {}", redact(url));
        match remote.fetch(&[refspec.as_str()], Some(&mut options), None) {
            // Objects a ref of the cache names are gone (a disk fault, or a cache
            // damaged by an older version): the cache is only a copy, so start it
            // afresh and fetch once more rather than fail every fetch from now on.
            Err(e) if e.class() == git2::ErrorClass::Odb => {
                drop((options, remote));
                tracing::warn!(error = %e, "the repository cache is missing objects; starting it afresh");
                self.start_afresh().map_err(failed(format!("{fetching}: starting the cache afresh")))?;
                let mut remote =
                    self.repo.remote_anonymous(url).map_err(failed(format!("invalid remote {}", redact(url))))?;
                let mut options = FetchOptions::new();
                options.remote_callbacks(self.auth.callbacks(url));
                remote.fetch(&[refspec.as_str()], Some(&mut options), None).map_err(failed(fetching))?;
            }
            Err(e) => return Err(failed(fetching)(e)),
            Ok(()) => {}
        }
        self.repo.refname_to_id(local).map_err(failed(format!("{what} not found")))
    }

    /// Empties the cache and opens it again.
    fn start_afresh(&mut self) -> Result<(), git2::Error> {
        let path = self.repo.path().to_path_buf();
        std::fs::remove_dir_all(&path).map_err(|e| git2::Error::from_str(&e.to_string()))?;
        self.repo = Repository::init_bare(&path)?;
        Ok(())
    }

    /// The best common ancestor of two commits (where a pull request branched off).
    pub fn merge_base(&self, a: Revision, b: Revision) -> Result<Revision, FetchError> {
        self.repo.merge_base(a, b).map_err(failed(format!("{a} and {b} share no history")))
    }

    fn pack_dir(&self) -> PathBuf {
        self.repo.path().join("objects").join("pack")
    }

    /// Writes one pack with everything reachable from `head` and the fetched
    /// pull-request refs, removes the others, and reopens the cache so libgit2 lets go
    /// of them. Objects of rewritten history go.
    fn compact(&mut self, head: Oid) -> Result<(), git2::Error> {
        let dir = self.pack_dir();
        let old = packs(&dir);
        let kept = {
            let mut builder = self.repo.packbuilder()?;
            let mut walk = self.repo.revwalk()?;
            walk.push(head)?;
            // Pull-request heads fetched for plans stay readable too, and so does every
            // other ref of ours: a ref naming a dropped object breaks every later fetch.
            walk.push_glob("refs/flotilla/*")?;
            builder.insert_walk(&mut walk)?;
            builder.write(&dir, 0o644)?;
            builder.name()?.map(|n| format!("pack-{n}"))
        };
        for pack in old.iter().filter(|p| kept.as_deref() != p.file_stem().and_then(|s| s.to_str())) {
            for ext in ["pack", "idx", "rev", "keep"] {
                let _ = std::fs::remove_file(pack.with_extension(ext));
            }
        }
        let path = self.repo.path().to_path_buf();
        self.repo = Repository::open_bare(path)?;
        Ok(())
    }

    /// One attempt at a write-back: fetches the head, commits the files `change` returns
    /// on top of it and pushes the commit (a fast-forward, never a force). `change`
    /// returning `None` means there is nothing to write. A push refused because the
    /// branch moved is [`Pushed::Refused`]: the caller backs off (without holding the
    /// repository) and tries again on the new head.
    pub fn commit_and_push(
        &mut self,
        author: (&str, &str),
        message: &str,
        change: impl FnOnce(&Repository, Revision) -> Result<Option<Files>, String>,
    ) -> Result<Pushed, String> {
        let Some(url) = self.url.clone() else {
            return Err("writing back needs a remote repository (--repo with a URL): committing into a local \
                        repository's branch would leave its checkout behind"
                .into());
        };
        let head = self.fetch().map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
        let Some(files) = change(&self.repo, head)? else { return Ok(Pushed::Nothing) };
        let commit = self.commit(head, author, message, &files).map_err(|e| format!("committing: {e}"))?;
        Ok(match self.push(&url, commit) {
            Ok(()) => Pushed::Commit(commit),
            Err(why) => Pushed::Refused(why),
        })
    }

    /// Signs write-back commits with the SSH private key at `key` from now on.
    pub fn sign_with(&mut self, key: PathBuf) {
        self.signing_key = Some(key);
    }

    /// The principal of the allowed signer who signed `rev`, or why it is not trusted.
    pub fn verify(&self, rev: Revision, verifier: &super::Verifier) -> Result<String, super::Unverified> {
        verifier.verify(&self.repo, rev)
    }

    /// Reads revision `rev`, limited to the subdirectory `prefix`; blobs the parse cache
    /// holds are listed by id and not read.
    pub fn read(
        &self,
        rev: Revision,
        prefix: &str,
        limits: &Limits,
        cache: &ParseCache,
    ) -> Result<RepoFiles, SourceError> {
        super::read::read_commit(&self.repo, rev, prefix, limits, cache)
    }

    fn commit(&self, head: Oid, author: (&str, &str), message: &str, files: &Files) -> Result<Oid, git2::Error> {
        let parent = self.repo.find_commit(head)?;
        let tree = parent.tree()?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, content) in files {
            let blob = self.repo.blob(content)?;
            let mode = tree.get_path(Path::new(path)).map(|e| e.filemode()).unwrap_or(0o100644);
            update.upsert(
                path.as_str(),
                blob,
                if mode == 0o100755 { git2::FileMode::BlobExecutable } else { git2::FileMode::Blob },
            );
        }
        let new_tree = self.repo.find_tree(update.create_updated(&self.repo, &tree)?)?;
        let signature = git2::Signature::now(author.0, author.1)?;
        let Some(key) = &self.signing_key else {
            return self.repo.commit(None, &signature, &signature, message, &new_tree, &[&parent]);
        };
        // Signed as `git commit -S` with gpg.format ssh signs, so --verify-commits
        // accepts the controller's own write-back.
        let content = self.repo.commit_create_buffer(&signature, &signature, message, &new_tree, &[&parent])?;
        let signed = super::verify::sign(key, &content).map_err(|e| git2::Error::from_str(&e.to_string()))?;
        let content = std::str::from_utf8(&content).map_err(|_| git2::Error::from_str("commit is not UTF-8"))?;
        self.repo.commit_signed(content, &signed, None)
    }

    fn push(&self, url: &str, commit: Oid) -> Result<(), String> {
        let local = "refs/flotilla/writeback";
        self.repo.reference(local, commit, true, "write-back").map_err(|e| e.to_string())?;
        let refused = std::cell::RefCell::new(None::<String>);
        let mut remote = self.repo.remote_anonymous(url).map_err(|e| e.to_string())?;
        let mut callbacks = self.auth.callbacks(url);
        callbacks.push_update_reference(|_, status| {
            if let Some(status) = status {
                *refused.borrow_mut() = Some(status.to_owned());
            }
            Ok(())
        });
        let mut options = git2::PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("{local}:refs/heads/{}", self.branch);
        let pushed = remote.push(&[refspec.as_str()], Some(&mut options)).map_err(|e| e.message().to_owned());
        drop(options);
        // The ref only names the commit for the push; kept, it would pin (or, once
        // compacted away, break) history a force-push may have dropped.
        if let Ok(mut reference) = self.repo.find_reference(local) {
            let _ = reference.delete();
        }
        pushed?;
        match refused.into_inner() {
            Some(status) => Err(status),
            None => Ok(()),
        }
    }

    /// Whether `new` descends from `old`; false means history was rewritten.
    pub fn descends(&self, new: Oid, old: Oid) -> bool {
        new == old || self.repo.graph_descendant_of(new, old).unwrap_or(false)
    }
}

/// A remote URL (`https://`, `ssh://`, `git://`, `file://`, or scp-like `user@host:path`)
/// rather than a local path.
pub fn is_url(repo: &str) -> bool {
    repo.contains("://") || (!repo.starts_with('/') && repo.split_once(':').is_some_and(|(h, _)| h.contains('@')))
}

/// Refuses remotes that would leak credentials or let a network in the middle change
/// what is applied: userinfo in the URL (credentials come from files), and `git://` or
/// `http://` unless `allow_plain` (`--insecure-allow-http`). scp-like `git@host:path`
/// and `ssh://git@host/...` name an ssh user, not a secret, and pass.
pub fn check_transport(url: &str, allow_plain: bool) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else { return Ok(()) };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    if matches!(scheme, "http" | "https") && authority.contains('@') {
        return Err(format!(
            "{}: credentials in the URL are refused (they reach logs and process lists); use --git-username and --git-password-file",
            redact(url)
        ));
    }
    if matches!(scheme, "git" | "http") && !allow_plain {
        return Err(format!(
            "{url}: {scheme}:// has no encryption or integrity, so a network in the middle could change what is applied; use https:// or ssh://, or pass --insecure-allow-http"
        ));
    }
    Ok(())
}

/// Packs in the cache before it is compacted.
const MAX_PACKS: usize = 16;

/// The `.pack` files of a pack directory.
fn packs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pack"))
                .collect()
        })
        .unwrap_or_default()
}

/// A stable directory name for a URL's cache.
fn cache_name(url: &str) -> String {
    let hash = git2::Oid::hash_object(git2::ObjectType::Blob, url.as_bytes()).expect("hashing in memory cannot fail");
    format!("repo-{}", &hash.to_string()[..16])
}

/// How one write-back attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The commit is on the branch.
    Commit(Revision),
    /// The change had nothing to write on the current head.
    Nothing,
    /// The server refused the push (the branch moved): try again on the new head.
    Refused(String),
}

/// Drops credentials from a URL before it reaches a message or log.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod transport_tests {
    use super::check_transport;

    #[test]
    fn plain_transports_and_credentials_in_urls_are_refused() {
        assert!(check_transport("https://git.example.com/fleet.git", false).is_ok());
        assert!(check_transport("ssh://git@git.example.com/fleet.git", false).is_ok());
        assert!(check_transport("git@github.com:org/fleet.git", false).is_ok());
        assert!(check_transport("file:///srv/fleet.git", false).is_ok());
        assert!(check_transport("/srv/fleet", false).is_ok());
        assert!(
            check_transport("git://git.example.com/fleet.git", false).unwrap_err().contains("--insecure-allow-http")
        );
        assert!(check_transport("http://git.example.com/fleet.git", false).is_err());
        assert!(check_transport("git://127.0.0.1:9418/fleet.git", true).is_ok());
        let leaked = check_transport("https://bot:s3cret@git.example.com/fleet.git", true).unwrap_err();
        assert!(!leaked.contains("s3cret"), "{leaked}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `content` as `fleet.yaml` on `main` of the bare repository at `remote`.
    fn commit(remote: &Repository, content: &str) -> Oid {
        let blob = remote.blob(content.as_bytes()).unwrap();
        let mut tree = remote.treebuilder(None).unwrap();
        tree.insert("fleet.yaml", blob, 0o100644).unwrap();
        let tree = remote.find_tree(tree.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let parent = remote.refname_to_id("refs/heads/main").ok().map(|id| remote.find_commit(id).unwrap());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        remote.commit(Some("refs/heads/main"), &sig, &sig, content, &tree, &parents).unwrap()
    }

    #[test]
    fn the_fetch_cache_is_compacted_and_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init_bare(dir.path().join("remote.git")).unwrap();
        let url = format!("file://{}", dir.path().join("remote.git").display());
        let mut watched = Branch::open(&url, "main", &dir.path().join("cache"), GitAuth::default()).unwrap();
        let mut last = None;
        for i in 0..40 {
            let id = commit(&remote, &format!("revision {i}"));
            assert_eq!(watched.fetch().unwrap(), id);
            last = Some(id);
        }
        assert!(packs(&watched.pack_dir()).len() <= MAX_PACKS + 1, "{} packs", packs(&watched.pack_dir()).len());
        let commit = watched.repo.find_commit(last.unwrap()).unwrap();
        let blob = commit.tree().unwrap().get_name("fleet.yaml").unwrap().to_object(&watched.repo).unwrap();
        assert_eq!(blob.as_blob().unwrap().content(), b"revision 39");
        assert!(watched.descends(last.unwrap(), commit.parent_id(0).unwrap()));
    }

    /// A write-back, then a force-push that rewinds the branch past it, then enough
    /// fetches to compact the cache: fetching keeps working (the write-back's objects
    /// were once dropped by compaction while a ref still named them, and every fetch
    /// after failed with "object not found").
    #[test]
    fn a_write_back_rewound_away_never_breaks_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init_bare(dir.path().join("remote.git")).unwrap();
        let first = commit(&remote, "replicas: 1");
        commit(&remote, "replicas: 2");
        let url = format!("file://{}", dir.path().join("remote.git").display());
        let mut branch = Branch::open(&url, "main", &dir.path().join("cache"), GitAuth::default()).unwrap();
        let files: Files = vec![("fleet.yaml".to_owned(), b"replicas: 5".to_vec())];
        let pushed = branch.commit_and_push(("flotilla", "bot@example.invalid"), "scale", |_, _| Ok(Some(files)));
        assert!(matches!(pushed, Ok(Pushed::Commit(_))), "{pushed:?}");
        remote.reference("refs/heads/main", first, true, "rewind").unwrap();
        for i in 0..(2 * MAX_PACKS) {
            let id = commit(&remote, &format!("revision {i}"));
            assert_eq!(branch.fetch().unwrap(), id, "fetch {i}");
        }
        // Every ref of the cache names a commit whose whole history is there: a smart
        // transport (git://, https://) offers every ref's history to the server, and
        // fails on the first object missing.
        for reference in branch.repo.references().unwrap() {
            let reference = reference.unwrap();
            let name = reference.name().unwrap_or_default().to_owned();
            let mut walk = branch.repo.revwalk().unwrap();
            walk.push(reference.target().unwrap()).unwrap();
            for id in walk {
                let id = id.unwrap_or_else(|e| panic!("{name}: {e}"));
                let commit = branch.repo.find_commit(id).unwrap_or_else(|e| panic!("{name}: {id}: {e}"));
                commit.tree().unwrap_or_else(|e| panic!("{name}: the tree of {id}: {e}"));
            }
        }
        let files: Files = vec![("fleet.yaml".to_owned(), b"replicas: 6".to_vec())];
        let pushed = branch.commit_and_push(("flotilla", "bot@example.invalid"), "scale", |_, _| Ok(Some(files)));
        assert!(matches!(pushed, Ok(Pushed::Commit(_))), "{pushed:?}");
    }

    /// A write-back signed with the configured key verifies against an allowed-signers
    /// file listing it, so `--verify-commits` accepts the controller's own commits.
    #[test]
    fn signed_write_backs_pass_verification() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init_bare(dir.path().join("remote.git")).unwrap();
        commit(&remote, "replicas: 1");
        let url = format!("file://{}", dir.path().join("remote.git").display());
        let mut branch = Branch::open(&url, "main", &dir.path().join("cache"), GitAuth::default()).unwrap();
        let key = dir.path().join("writeback");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()])
            .status()
            .expect("ssh-keygen (openssh-client) is installed");
        assert!(made.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let allowed = dir.path().join("allowed_signers");
        std::fs::write(&allowed, format!("flotilla@example.invalid {public}")).unwrap();
        branch.sign_with(key);
        let files: Files = vec![("fleet.yaml".to_owned(), b"replicas: 5".to_vec())];
        let pushed =
            branch.commit_and_push(("flotilla", "bot@example.invalid"), "scale", |_, _| Ok(Some(files))).unwrap();
        let Pushed::Commit(id) = pushed else { panic!("pushed nothing") };
        let verifier = super::super::Verifier::new(Some(allowed), None).unwrap();
        assert_eq!(branch.verify(id, &verifier).unwrap(), "flotilla@example.invalid");
        assert_eq!(remote.refname_to_id("refs/heads/main").unwrap(), id, "the signed commit is what was pushed");
    }

    #[test]
    fn credentials_never_reach_messages() {
        assert_eq!(redact("https://user:token@git.example/r.git"), "https://***@git.example/r.git");
        assert_eq!(redact("git://host/r.git"), "git://host/r.git");
    }
}
