//! What a kustomization file refers to, read before kustomize runs: the kustomization
//! directories it builds on (so a base is built through its overlays, and an overlay's
//! inputs include its bases), and what flotilla refuses outright: remote bases (a render
//! makes no network call), paths leaving the repository, and kustomize's Helm support
//! (declare a HelmChart instead).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::load::{LoadError, repository_path};
use crate::model::{Limits, Origin};

/// The fields whose entries may name another kustomization directory.
const REFERENCING: [&str; 3] = ["resources", "bases", "components"];

/// Fields kustomize runs external programs or the network for; refused.
const REFUSED: [(&str, &str); 1] =
    [("helmCharts", "kustomize's Helm support is not run: declare a flotilla.dev/v1alpha1 HelmChart instead")];

/// The directories `file` (in `dir`) refers to: every entry of its referencing fields,
/// resolved against `dir`. Entries naming files stay inside the kustomization's own
/// directory by kustomize's load restrictor, which flotilla keeps on.
pub(super) fn references(file: &str, dir: &str, bytes: &[u8], limits: &Limits) -> Result<BTreeSet<String>, LoadError> {
    let at = |line: usize, message: String| LoadError::Invalid {
        origin: Origin { file: Arc::from(file), document: 1, line },
        message,
    };
    let text =
        std::str::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 { file: file.into(), offset: e.valid_up_to() })?;
    let value = crate::load::parse_embedded(text, limits).map_err(|e| crate::load::yaml_error(file, 1, 1, &e))?;
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).map_or(1, |i| i + 1);
    if !(value.is_object() || value.is_null()) {
        return Err(at(1, "a kustomization must be a mapping".into()));
    }
    for (field, why) in REFUSED {
        if value.get(field).is_some() {
            return Err(at(line_of(field), format!("{field}: {why}")));
        }
    }
    let mut out = BTreeSet::new();
    for field in REFERENCING {
        let Some(entries) = value.get(field) else { continue };
        let Value::Array(entries) = entries else {
            return Err(at(line_of(field), format!("{field}: must be a list of paths")));
        };
        for (i, entry) in entries.iter().enumerate() {
            let Value::String(entry) = entry else {
                return Err(at(line_of(field), format!("{field}[{i}]: must be a path")));
            };
            if remote(entry) {
                return Err(at(
                    line_of(entry),
                    format!(
                        "{field}[{i}]: a remote base is not fetched (a render makes no network call); vendor it into the repository"
                    ),
                ));
            }
            let joined = if dir.is_empty() { entry.clone() } else { format!("{dir}/{entry}") };
            let resolved = repository_path(&joined).map_err(|e| at(line_of(entry), format!("{field}[{i}]: {e}")))?;
            out.insert(resolved);
        }
    }
    Ok(out)
}

/// Whether a kustomization entry names something to fetch: a URL, a Git address or a
/// go-getter spelling, as kustomize's loader recognises them.
fn remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("git::")
        || entry.contains("?ref=")
        || entry.contains("?version=")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"].iter().any(|host| entry.starts_with(host))
}
