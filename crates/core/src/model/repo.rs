//! The snapshot of a repo revision that the edges hand to the pipeline.

use std::collections::BTreeMap;

/// Every file of one revision, read completely before anything is parsed, so a failed
/// read never yields half a plan.
#[derive(Debug, Clone, Default)]
pub struct RepoFiles {
    /// Commit id, or a content digest for a plain directory.
    pub revision: String,
    /// Repo-relative path (`/`-separated) → bytes.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Content ids (Git blob ids) where the source has them: path → id. A path listed
    /// here but absent from `files` was not read because the caller's
    /// [`ParseCache`](crate::load::ParseCache) holds its documents.
    pub ids: BTreeMap<String, String>,
}

/// Bounds on every input, so hostile repos fail fast with a clear error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in one file.
    pub max_file_bytes: usize,
    /// Bytes of all manifest files together.
    pub max_total_bytes: usize,
    /// Bytes in one YAML document (the API server refuses objects over 3 MiB anyway).
    pub max_document_bytes: usize,
    /// Documents in one file.
    pub max_documents_per_file: usize,
    /// Nesting depth of one document.
    pub max_depth: usize,
    /// Nodes in one document, counting alias expansion.
    pub max_nodes: usize,
    /// Alias uses in one document.
    pub max_aliases: usize,
    /// Nodes in all documents of a revision together (cached files included), so a
    /// bomb spread over many documents, each under [`Self::max_nodes`], still fails in
    /// bounded memory.
    pub max_total_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: 16 << 20,
            max_total_bytes: 1 << 30,
            max_document_bytes: 3 << 20,
            max_documents_per_file: 10_000,
            max_depth: 64,
            max_nodes: 250_000,
            max_aliases: 1_000,
            max_total_nodes: 20_000_000,
        }
    }
}

impl RepoFiles {
    /// Whether a path is one the loader reads: `.yaml`/`.yml`, with no component that
    /// starts with a dot (so `.git`, `.github` and dotfiles are skipped).
    pub fn is_manifest_path(path: &str) -> bool {
        (path.ends_with(".yaml") || path.ends_with(".yml")) && !path.split('/').any(|c| c.starts_with('.'))
    }
}
