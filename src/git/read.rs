//! A revision read straight from the object database: no checkout, no working-tree
//! state, the same bytes on every machine.

use std::path::Path;

use flotilla_core::load::ParseCache;
use flotilla_core::model::{Limits, RepoFiles};
use git2::{ObjectType, Repository, Tree};

use super::Revision;
use crate::source::{Collector, MAX_DIR_DEPTH, SourceError, check_component, resolve_link};

const SYMLINK_MODE: i32 = 0o120000;

fn git(what: impl Into<String>) -> impl FnOnce(git2::Error) -> SourceError {
    let what = what.into();
    move |source| SourceError::Git { what, source }
}

/// Reads `rev` (a branch, tag or commit name) of the repository containing `path`,
/// limited to the subtree at `path`.
pub fn read(path: &Path, rev: &str, limits: &Limits) -> Result<RepoFiles, SourceError> {
    read_cached(path, rev, limits, &ParseCache::default())
}

/// [`read`], listing by id the blobs `cache` holds instead of reading them (two
/// revisions of one repository share most of their files).
pub fn read_cached(path: &Path, rev: &str, limits: &Limits, cache: &ParseCache) -> Result<RepoFiles, SourceError> {
    let repo = Repository::discover(path).map_err(git(format!("{} is not inside a Git repository", path.display())))?;
    let prefix = subdirectory(&repo, path)?;
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(git(format!("cannot resolve revision {rev}")))?;
    read_commit(&repo, commit.id(), &prefix, limits, cache)
}

/// Reads commit `rev` of `repo` (bare or not), limited to `prefix`. Blobs whose
/// documents `cache` holds are listed by id and not read.
pub fn read_commit(
    repo: &Repository,
    rev: Revision,
    prefix: &str,
    limits: &Limits,
    cache: &ParseCache,
) -> Result<RepoFiles, SourceError> {
    let prefix = prefix.trim_matches('/');
    let commit = repo.find_commit(rev).map_err(git(format!("cannot read commit {rev}")))?;
    let root = commit.tree().map_err(git("cannot read the commit's tree"))?;
    let tree = if prefix.is_empty() {
        root
    } else {
        root.get_path(Path::new(prefix))
            .and_then(|e| e.to_object(repo))
            .and_then(|o| o.peel_to_tree())
            .map_err(git(format!("{prefix} does not exist at {rev}")))?
    };
    let mut collector = Collector::new(limits);
    walk(repo, &tree, &mut Blobs { collector: &mut collector, cache })?;
    let mut files = collector.files;
    files.revision = commit.id().to_string();
    Ok(files)
}

/// `path` relative to the work tree's root ("" for the root or a bare repository).
fn subdirectory(repo: &Repository, path: &Path) -> Result<String, SourceError> {
    let Some(workdir) = repo.workdir() else { return Ok(String::new()) };
    let canonical =
        |p: &Path| std::fs::canonicalize(p).map_err(|source| SourceError::Io { path: p.to_path_buf(), source });
    let (workdir, path) = (canonical(workdir)?, canonical(path)?);
    let rel = path.strip_prefix(&workdir).unwrap_or(Path::new(""));
    Ok(rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/"))
}

/// Manifest blobs gathered by id: read, or only listed when the parse cache holds them.
struct Blobs<'c, 'l> {
    collector: &'c mut Collector<'l>,
    cache: &'c ParseCache,
}

impl Blobs<'_, '_> {
    /// Adds a blob; one of a chart or kustomization (`in_unit`) is always read.
    fn add(&mut self, repo: &Repository, rel: &str, id: git2::Oid, in_unit: bool) -> Result<(), SourceError> {
        let hex = id.to_string();
        if let Some(size) = self.cache.size(rel, &hex).filter(|_| !in_unit) {
            self.collector.admit(rel, size as u64)?;
        } else {
            let blob = repo.find_blob(id).map_err(git(format!("cannot read {rel}")))?;
            self.collector.admit(rel, blob.size() as u64)?;
            self.collector.add(rel.to_owned(), blob.content().to_vec());
        }
        self.collector.files.ids.insert(rel.to_owned(), hex);
        Ok(())
    }
}

/// Walks the tree depth-first with an explicit stack (no recursion: a hostile tree of
/// 10,000 nested directories must not overflow the Git thread's stack).
fn walk(repo: &Repository, root: &Tree<'_>, out: &mut Blobs<'_, '_>) -> Result<(), SourceError> {
    let mut pending: Vec<(Tree<'_>, String, usize, bool)> = vec![(root.clone(), String::new(), 0, false)];
    while let Some((tree, prefix, depth, in_unit)) = pending.pop() {
        let names = tree.iter().map(|e| String::from_utf8_lossy(e.name_bytes()).into_owned()).collect::<Vec<_>>();
        let in_unit = in_unit || flotilla_core::sources::is_unit_dir(names.iter().map(String::as_str));
        for entry in tree.iter() {
            let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            check_component(&name, &rel)?;
            match entry.kind() {
                Some(ObjectType::Tree) if !(prefix.is_empty() && name == ".git") => {
                    if depth + 1 > MAX_DIR_DEPTH {
                        return Err(SourceError::TooDeep { path: rel });
                    }
                    let sub = entry
                        .to_object(repo)
                        .and_then(|o| o.peel_to_tree())
                        .map_err(git(format!("cannot read {rel}")))?;
                    pending.push((sub, rel, depth + 1, in_unit));
                }
                Some(ObjectType::Blob) if entry.filemode() == SYMLINK_MODE => {
                    let blob = repo.find_blob(entry.id()).map_err(git(format!("cannot read {rel}")))?;
                    read_link(repo, root, (&rel, in_unit), blob.content(), out)?;
                }
                Some(ObjectType::Blob) if in_unit || RepoFiles::is_manifest_path(&rel) => {
                    out.add(repo, &rel, entry.id(), in_unit)?
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// In-bounds links to files are read under the link's name; a link that leaves the
/// tree or points at nothing refuses the repository.
fn read_link(
    repo: &Repository,
    root: &Tree<'_>,
    (rel, in_unit): (&str, bool),
    target: &[u8],
    out: &mut Blobs<'_, '_>,
) -> Result<(), SourceError> {
    let escaping = || SourceError::EscapingSymlink { path: rel.into() };
    let target = std::str::from_utf8(target).map_err(|_| escaping())?;
    let resolved = resolve_link(rel, target)?;
    let entry = root.get_path(Path::new(&resolved)).map_err(|_| escaping())?;
    if entry.kind() == Some(ObjectType::Blob)
        && entry.filemode() != SYMLINK_MODE
        && (in_unit || RepoFiles::is_manifest_path(rel))
    {
        out.add(repo, rel, entry.id(), in_unit)?;
    }
    Ok(())
}
