//! The watched repository: a remote fetched incrementally into an on-disk bare cache,
//! or a local repository read in place. Either way the controller reads revisions from
//! Git's object database, never from a working tree.

use std::path::{Path, PathBuf};

use git2::{FetchOptions, Oid, Repository};

/// Where revisions come from.
pub struct Watched {
    repo: Repository,
    /// The remote URL, when fetching.
    url: Option<String>,
    branch: String,
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

impl Watched {
    /// A local repository path is read in place; anything with a URL scheme (`file://`,
    /// `git://`) is fetched into a bare cache under `cache`.
    pub fn open(repo: &str, branch: &str, cache: &Path) -> Result<Self, FetchError> {
        if !repo.contains("://") {
            let opened = Repository::open(repo).map_err(failed(format!("{repo} is not a Git repository")))?;
            return Ok(Self { repo: opened, url: None, branch: branch.to_owned() });
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
        Ok(Self { repo: opened, url: Some(repo.to_owned()), branch: branch.to_owned() })
    }

    /// The directory to read revisions from (a bare cache or the local repository).
    pub fn path(&self) -> PathBuf {
        self.repo.path().to_path_buf()
    }

    /// Fetches the branch (for remotes) and returns its head commit. Every fetch adds a
    /// pack to the cache and libgit2 keeps every pack open, so once packs pile up the
    /// cache is compacted into one.
    pub fn head(&mut self) -> Result<Oid, FetchError> {
        let local = format!("refs/remotes/origin/{}", self.branch);
        if let Some(url) = &self.url {
            let mut remote =
                self.repo.remote_anonymous(url).map_err(failed(format!("invalid remote {}", redact(url))))?;
            let refspec = format!("+refs/heads/{}:{local}", self.branch);
            let mut options = FetchOptions::new();
            remote.fetch(&[refspec.as_str()], Some(&mut options), None).map_err(failed(format!(
                "fetching {} from {}",
                self.branch,
                redact(url)
            )))?;
        }
        let reference = if self.url.is_some() { local } else { format!("refs/heads/{}", self.branch) };
        let oid = self.repo.refname_to_id(&reference).map_err(failed(format!("branch {} not found", self.branch)))?;
        if self.url.is_some() && packs(&self.pack_dir()).len() > MAX_PACKS {
            self.compact(oid).map_err(failed("compacting the repository cache"))?;
        }
        Ok(oid)
    }

    fn pack_dir(&self) -> PathBuf {
        self.repo.path().join("objects").join("pack")
    }

    /// Writes one pack with everything reachable from `head`, removes the others, and
    /// reopens the cache so libgit2 lets go of them. Objects of rewritten history go.
    fn compact(&mut self, head: Oid) -> Result<(), git2::Error> {
        let dir = self.pack_dir();
        let old = packs(&dir);
        let kept = {
            let mut builder = self.repo.packbuilder()?;
            let mut walk = self.repo.revwalk()?;
            walk.push(head)?;
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

    /// Whether `new` descends from `old`; false means history was rewritten.
    pub fn descends(&self, new: Oid, old: Oid) -> bool {
        new == old || self.repo.graph_descendant_of(new, old).unwrap_or(false)
    }
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

/// Drops credentials from a URL before it reaches a message or log.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
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
        let mut watched = Watched::open(&url, "main", &dir.path().join("cache")).unwrap();
        let mut last = None;
        for i in 0..40 {
            let id = commit(&remote, &format!("revision {i}"));
            assert_eq!(watched.head().unwrap(), id);
            last = Some(id);
        }
        assert!(packs(&watched.pack_dir()).len() <= MAX_PACKS + 1, "{} packs", packs(&watched.pack_dir()).len());
        let commit = watched.repo.find_commit(last.unwrap()).unwrap();
        let blob = commit.tree().unwrap().get_name("fleet.yaml").unwrap().to_object(&watched.repo).unwrap();
        assert_eq!(blob.as_blob().unwrap().content(), b"revision 39");
        assert!(watched.descends(last.unwrap(), commit.parent_id(0).unwrap()));
    }

    #[test]
    fn credentials_never_reach_messages() {
        assert_eq!(redact("https://user:token@git.example/r.git"), "https://***@git.example/r.git");
        assert_eq!(redact("git://host/r.git"), "git://host/r.git");
    }
}
