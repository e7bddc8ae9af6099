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

    /// Fetches the branch (for remotes) and returns its head commit.
    pub fn head(&self) -> Result<Oid, FetchError> {
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
        Ok(oid)
    }

    /// Whether `new` descends from `old`; false means history was rewritten.
    pub fn descends(&self, new: Oid, old: Oid) -> bool {
        new == old || self.repo.graph_descendant_of(new, old).unwrap_or(false)
    }
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

    #[test]
    fn credentials_never_reach_messages() {
        assert_eq!(redact("https://user:token@git.example/r.git"), "https://***@git.example/r.git");
        assert_eq!(redact("git://host/r.git"), "git://host/r.git");
    }
}
