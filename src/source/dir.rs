//! A plain directory (the working tree): every entry is walked, so an escaping symlink
//! anywhere refuses the repo even if no manifest uses it.

use std::fs;
use std::path::Path;

use flotilla_core::model::{Limits, RepoFiles};

use super::{Collector, MAX_DIR_DEPTH, SourceError, check_component, resolve_link};

/// Reads the directory at `root`. The revision is a digest of the manifests' paths and
/// contents (`dir-<sha1>`), so an unchanged tree renders to the same revision.
pub fn read(root: &Path, limits: &Limits) -> Result<RepoFiles, SourceError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SourceError::Io { path, source }
    };
    let canonical = fs::canonicalize(root).map_err(io(root))?;
    let mut collector = Collector::new(limits);
    walk(&canonical, &mut collector)?;
    let mut files = collector.files;
    files.revision = digest(&mut files);
    Ok(files)
}

/// Walks the directory depth-first with an explicit stack, as the Git walk does.
fn walk(root: &Path, out: &mut Collector<'_>) -> Result<(), SourceError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SourceError::Io { path, source }
    };
    let mut pending = vec![(root.to_path_buf(), String::new(), 0, false)];
    while let Some((dir, prefix, depth, in_unit)) = pending.pop() {
        let mut entries: Vec<_> = fs::read_dir(&dir).map_err(io(&dir))?.collect::<Result<_, _>>().map_err(io(&dir))?;
        entries.sort_by_key(|e| e.file_name());
        let names: Vec<String> = entries.iter().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        let in_unit = in_unit || flotilla_core::sources::is_unit_dir(names.iter().map(String::as_str));
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            check_component(&name, &rel)?;
            if prefix.is_empty() && name == ".git" {
                continue;
            }
            let path = entry.path();
            // The entry's type comes with the listing (no lstat), as the link itself.
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_symlink() {
                read_link(root, &path, &rel, in_unit, out)?;
            } else if kind.is_dir() {
                if depth + 1 > MAX_DIR_DEPTH {
                    return Err(SourceError::TooDeep { path: rel });
                }
                pending.push((path, rel, depth + 1, in_unit));
            } else if kind.is_file() && (in_unit || RepoFiles::is_manifest_path(&rel)) {
                let bytes = read_file(&path, &path, &rel, out)?;
                out.add(rel, bytes);
            }
        }
    }
    Ok(())
}

/// A regular file's bytes (at `path`, named `shown` in errors), its size admitted first
/// (taken from the open file, so the size checked is the file's that is read).
fn read_file(path: &Path, shown: &Path, rel: &str, out: &mut Collector<'_>) -> Result<Vec<u8>, SourceError> {
    let io = |source| SourceError::Io { path: shown.to_path_buf(), source };
    let mut file = fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    out.admit(rel, size)?;
    let mut bytes = Vec::with_capacity(size as usize);
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io)?;
    Ok(bytes)
}

/// A symlink must resolve, lexically and on disk, to something inside the root. Links
/// to files are read under the link's name; links to directories are not followed
/// (no loops), but their target was still checked.
fn read_link(root: &Path, path: &Path, rel: &str, in_unit: bool, out: &mut Collector<'_>) -> Result<(), SourceError> {
    let escaping = || SourceError::EscapingSymlink { path: rel.into() };
    let target = fs::read_link(path).map_err(|_| escaping())?;
    resolve_link(rel, &target.to_string_lossy())?;
    let resolved = fs::canonicalize(path).map_err(|_| escaping())?;
    if !resolved.starts_with(root) {
        return Err(escaping());
    }
    let meta = fs::metadata(&resolved).map_err(|_| escaping())?;
    if meta.is_file() && (in_unit || RepoFiles::is_manifest_path(rel)) {
        let bytes = read_file(&resolved, path, rel, out)?;
        out.add(rel.to_owned(), bytes);
    }
    Ok(())
}

/// The revision's digest; every file gets its Git blob id as its content id, as a Git
/// revision's files do (so a parse cache holds them by content, whichever way they were
/// read).
fn digest(files: &mut RepoFiles) -> String {
    let mut listing = Vec::new();
    for (path, bytes) in &files.files {
        let oid = blob_id(bytes);
        listing.extend_from_slice(format!("{path}\0{oid}\n").as_bytes());
        files.ids.insert(path.clone(), oid);
    }
    format!("dir-{}", blob_id(&listing))
}

/// Git's blob id of `bytes` (SHA-1 of `blob <length>\0` and the bytes), computed here
/// rather than by libgit2: any libgit2 call first initialises its TLS, which loads the
/// system's CA bundle, and reading a working tree needs none of it.
fn blob_id(bytes: &[u8]) -> String {
    use sha1::Digest;
    let mut hash = sha1::Sha1::new();
    hash.update(format!("blob {}\0", bytes.len()));
    hash.update(bytes);
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    #[test]
    fn blob_ids_are_gits() {
        for bytes in [&b""[..], b"kind: ConfigMap\n", &[0u8, 159, 146, 150][..], &vec![b'x'; 70_000][..]] {
            let git = git2::Oid::hash_object(git2::ObjectType::Blob, bytes).unwrap().to_string();
            assert_eq!(super::blob_id(bytes), git);
        }
    }
}
