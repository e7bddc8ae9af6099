//! The customizations shipped in the binary: Karmada's third-party ones (copied
//! unchanged, Apache-2.0, see `thirdparty/NOTICE`) and flotilla's own for kinds Karmada
//! ships none usable for. A repository's customization for the same kind and operation
//! wins over these.

use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::{Customization, CustomizationSpec};

/// The shipped files, by name.
pub const FILES: &[(&str, &str)] = &[
    ("argo-rollout.yaml", include_str!("thirdparty/argo-rollout.yaml")),
    (
        "karmada-apps-kruise-io-v1alpha1-cloneset.yaml",
        include_str!("thirdparty/karmada-apps-kruise-io-v1alpha1-cloneset.yaml"),
    ),
    (
        "karmada-argoproj-io-v1alpha1-workflow.yaml",
        include_str!("thirdparty/karmada-argoproj-io-v1alpha1-workflow.yaml"),
    ),
];

#[derive(Deserialize)]
struct File {
    metadata: Metadata,
    spec: CustomizationSpec,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

/// Every shipped customization, parsed once.
pub fn all() -> &'static [Arc<Customization>] {
    static ALL: OnceLock<Vec<Arc<Customization>>> = OnceLock::new();
    ALL.get_or_init(|| {
        FILES
            .iter()
            .map(|(file, text)| {
                let parsed: File = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("shipped {file}: {e}"));
                Arc::new(Customization { name: format!("{} (shipped)", parsed.metadata.name), spec: parsed.spec })
            })
            .collect()
    })
}
