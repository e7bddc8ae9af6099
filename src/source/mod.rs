//! Reading a repo into memory ([`RepoFiles`]), confined to the repo root: a symlink that
//! leaves it refuses the whole repo, as Argo CD does after its symlink CVEs, and every
//! file and the total are size-limited before they are read. A working directory is
//! read here ([`read_dir`]); a Git revision by `crate::git`, with the same rules. Under a
//! chart or kustomization directory every file is read, whatever its name: the tools
//! need them all. [`load`] renders those with the real tools and loads the revision.

mod charts;
mod dir;
mod expand;
mod tool;

pub use charts::{allow_fetching, registry_config};
pub use expand::load;

use std::path::{Path, PathBuf};

use flotilla_core::model::{Limits, RepoFiles};

/// How deep directories may nest. Walks are iterative, so a hostile tree of 10,000
/// nested directories is refused here rather than overflowing a stack.
pub const MAX_DIR_DEPTH: usize = 128;

/// Why a revision could not be read. Paths are repo-relative; no content is quoted.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A filesystem read failed.
    #[error("cannot read {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A symlink resolves outside the repo, or to nothing.
    #[error("{path}: symlink points outside the repository or to nothing; refusing the repository")]
    EscapingSymlink {
        /// Repo-relative path of the link.
        path: String,
    },
    /// A path component is empty, `.`, `..` or contains a separator.
    #[error("{path}: invalid path component; refusing the repository")]
    InvalidPath {
        /// Repo-relative path.
        path: String,
    },
    /// Directories nest deeper than [`MAX_DIR_DEPTH`].
    #[error("{path}: directories nest deeper than {MAX_DIR_DEPTH} levels; refusing the repository")]
    TooDeep {
        /// Repo-relative path of the first directory too deep.
        path: String,
    },
    /// A file is over the size limit.
    #[error("{path}: {size} bytes is over the limit of {limit} bytes for one file")]
    FileTooLarge {
        /// Repo-relative path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: usize,
    },
    /// All manifests together are over the limit.
    #[error("the repository's manifests add up to more than {limit} bytes")]
    RepoTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A Git operation failed.
    #[error("{what}")]
    Git {
        /// What was being done.
        what: String,
        /// The libgit2 error.
        #[source]
        source: git2::Error,
    },
}

/// Reads the working directory at `repo`.
pub fn read_dir(repo: &Path, limits: &Limits) -> Result<RepoFiles, SourceError> {
    dir::read(repo, limits)
}

/// Accumulates files under the limits.
pub struct Collector<'a> {
    limits: &'a Limits,
    total: usize,
    /// What was collected.
    pub files: RepoFiles,
}

impl<'a> Collector<'a> {
    /// Nothing collected yet.
    pub fn new(limits: &'a Limits) -> Self {
        Self { limits, total: 0, files: RepoFiles::default() }
    }

    /// Checks the size before the content is read.
    pub fn admit(&mut self, path: &str, size: u64) -> Result<(), SourceError> {
        if size > self.limits.max_file_bytes as u64 {
            return Err(SourceError::FileTooLarge { path: path.into(), size, limit: self.limits.max_file_bytes });
        }
        self.total += size as usize;
        if self.total > self.limits.max_total_bytes {
            return Err(SourceError::RepoTooLarge { limit: self.limits.max_total_bytes });
        }
        Ok(())
    }

    /// Keeps an admitted file.
    pub fn add(&mut self, path: String, bytes: Vec<u8>) {
        self.files.files.insert(path, bytes);
    }
}

/// Checks one path component of a repo path.
pub fn check_component(component: &str, path: &str) -> Result<(), SourceError> {
    if component.is_empty() || component == "." || component == ".." || component.contains(['/', '\\', '\0']) {
        return Err(SourceError::InvalidPath { path: path.into() });
    }
    Ok(())
}

/// Resolves a symlink target relative to the link's directory, lexically, refusing
/// absolute targets and any that climb above the root. Returns the repo-relative path.
pub fn resolve_link(link: &str, target: &str) -> Result<String, SourceError> {
    let escaping = || SourceError::EscapingSymlink { path: link.into() };
    if target.starts_with('/') || target.starts_with('\\') {
        return Err(escaping());
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(escaping)?;
            }
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}
