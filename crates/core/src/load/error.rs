//! Why a revision could not be loaded: [`LoadError`], and how a YAML parser's error
//! becomes one (file, document, line; never the document's content).

use std::sync::Arc;

use crate::model::{ObjectKey, Origin};

/// Why a revision could not be loaded. Messages name the file, document and line; none
/// of them quotes document content, so Secret values never reach error text.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    /// A file is over [`Limits::max_file_bytes`].
    #[error("{file}: {size} bytes is over the limit of {limit} bytes for one file")]
    FileTooLarge {
        /// Repo-relative path.
        file: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// All documents together hold more than [`Limits::max_total_nodes`] nodes.
    #[error("the repository's documents add up to more than {limit} YAML nodes")]
    TooManyNodes {
        /// The limit.
        limit: usize,
    },
    /// All manifests together are over [`Limits::max_total_bytes`].
    #[error("the repository's manifests add up to more than {limit} bytes")]
    RepoTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A file is not UTF-8.
    #[error("{file}: not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Repo-relative path.
        file: String,
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A file has more than [`Limits::max_documents_per_file`] documents.
    #[error("{file}: more than {limit} YAML documents")]
    TooManyDocuments {
        /// Repo-relative path.
        file: String,
        /// The limit.
        limit: usize,
    },
    /// One document is over [`Limits::max_document_bytes`].
    #[error("{origin}: {size} bytes is over the limit of {limit} bytes for one document")]
    DocumentTooLarge {
        /// The document.
        origin: Origin,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The YAML does not parse, breaks a budget (depth, nodes, aliases), or does not
    /// fit the typed shape of a Karmada object.
    #[error("{file}: document {document}: {message}")]
    Parse {
        /// Repo-relative path.
        file: String,
        /// 1-based document index.
        document: usize,
        /// Parser message, with the absolute line and column.
        message: String,
    },
    /// The document parses but breaks a rule (missing name, invalid policy field, …).
    #[error("{origin}: {message}")]
    Invalid {
        /// The document.
        origin: Origin,
        /// What is wrong, with the field path.
        message: String,
    },
    /// Two documents declare the same object.
    #[error("{key} is declared twice: {first} and {second}")]
    Duplicate {
        /// The object (boxed: it is the largest field of any variant).
        key: Box<ObjectKey>,
        /// The first declaration.
        first: Origin,
        /// The second declaration.
        second: Origin,
    },
}

/// Why the YAML of document `document` (starting at line `first_line` of `file`) does
/// not parse. A duplicate key is named, with its own line: kubectl refuses such a file
/// too, and Kubernetes would keep only one of the two values.
pub(crate) fn yaml_error(file: &str, document: usize, first_line: usize, err: &serde_saphyr::Error) -> LoadError {
    if let serde_saphyr::Error::DuplicateMappingKey { key, location } = err {
        let line = first_line + (location.line() as usize).saturating_sub(1);
        let key: String = key.as_deref().map(crate::escape::visible).unwrap_or_default().chars().take(80).collect();
        let named = if key.is_empty() { "a key".to_owned() } else { format!("the key `{key}`") };
        return LoadError::Invalid {
            origin: Origin { file: Arc::from(file), document, line },
            message: format!("{named} appears twice in one mapping; keep one"),
        };
    }
    let options = serde_saphyr::render_options! {
        line_offset: (first_line - 1) as u64,
        snippets: serde_saphyr::SnippetMode::Off,
    };
    LoadError::Parse { file: file.to_owned(), document, message: err.render_with_options(options) }
}
