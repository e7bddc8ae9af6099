//! Writing YAML the way Kubernetes tools write it: keys sorted (the JSON tree is
//! ordered), two-space indent, long single-line strings left on one line (no `>`
//! folding), multi-line strings as literal blocks.

use serde::Serialize;

/// Serialises a value as one YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::SerializeError> {
    let options = serde_saphyr::ser_options! { folded_wrap_chars: usize::MAX };
    serde_saphyr::to_string_with_options(value, options)
}
