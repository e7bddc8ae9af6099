//! The customizations shipped in the binary: Karmada's third-party ones (copied
//! unchanged, Apache-2.0, see `thirdparty/NOTICE`) and flotilla's own for kinds Karmada
//! ships none usable for. A repository's customization for the same kind and operation
//! wins over these.

use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::{Customization, CustomizationSpec};

/// The shipped files, by path under `thirdparty/`: Karmada's by target
/// (`karmada/<group>/<version>/<kind>/customizations.yaml`).
pub const FILES: &[(&str, &str)] = &[
    ("argo-rollout.yaml", include_str!("thirdparty/argo-rollout.yaml")),
    (
        "karmada/apps.kruise.io/v1alpha1/AdvancedCronJob/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/AdvancedCronJob/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1alpha1/BroadcastJob/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/BroadcastJob/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1alpha1/CloneSet/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/CloneSet/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1alpha1/DaemonSet/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/DaemonSet/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1alpha1/SidecarSet/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/SidecarSet/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1alpha1/UnitedDeployment/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1alpha1/UnitedDeployment/customizations.yaml"),
    ),
    (
        "karmada/apps.kruise.io/v1beta1/StatefulSet/customizations.yaml",
        include_str!("thirdparty/karmada/apps.kruise.io/v1beta1/StatefulSet/customizations.yaml"),
    ),
    (
        "karmada/argoproj.io/v1alpha1/Workflow/customizations.yaml",
        include_str!("thirdparty/karmada/argoproj.io/v1alpha1/Workflow/customizations.yaml"),
    ),
    (
        "karmada/batch.volcano.sh/v1alpha1/Job/customizations.yaml",
        include_str!("thirdparty/karmada/batch.volcano.sh/v1alpha1/Job/customizations.yaml"),
    ),
    (
        "karmada/flink.apache.org/v1beta1/FlinkDeployment/customizations.yaml",
        include_str!("thirdparty/karmada/flink.apache.org/v1beta1/FlinkDeployment/customizations.yaml"),
    ),
    (
        "karmada/helm.toolkit.fluxcd.io/v2beta1/HelmRelease/customizations.yaml",
        include_str!("thirdparty/karmada/helm.toolkit.fluxcd.io/v2beta1/HelmRelease/customizations.yaml"),
    ),
    (
        "karmada/kubeflow.org/v1/Notebook/customizations.yaml",
        include_str!("thirdparty/karmada/kubeflow.org/v1/Notebook/customizations.yaml"),
    ),
    (
        "karmada/kubeflow.org/v1/PyTorchJob/customizations.yaml",
        include_str!("thirdparty/karmada/kubeflow.org/v1/PyTorchJob/customizations.yaml"),
    ),
    (
        "karmada/kubeflow.org/v1/TFJob/customizations.yaml",
        include_str!("thirdparty/karmada/kubeflow.org/v1/TFJob/customizations.yaml"),
    ),
    (
        "karmada/kubeflow.org/v2beta1/MPIJob/customizations.yaml",
        include_str!("thirdparty/karmada/kubeflow.org/v2beta1/MPIJob/customizations.yaml"),
    ),
    (
        "karmada/kustomize.toolkit.fluxcd.io/v1/Kustomization/customizations.yaml",
        include_str!("thirdparty/karmada/kustomize.toolkit.fluxcd.io/v1/Kustomization/customizations.yaml"),
    ),
    (
        "karmada/kyverno.io/v1/ClusterPolicy/customizations.yaml",
        include_str!("thirdparty/karmada/kyverno.io/v1/ClusterPolicy/customizations.yaml"),
    ),
    (
        "karmada/kyverno.io/v1/Policy/customizations.yaml",
        include_str!("thirdparty/karmada/kyverno.io/v1/Policy/customizations.yaml"),
    ),
    (
        "karmada/ray.io/v1/RayCluster/customizations.yaml",
        include_str!("thirdparty/karmada/ray.io/v1/RayCluster/customizations.yaml"),
    ),
    (
        "karmada/ray.io/v1/RayJob/customizations.yaml",
        include_str!("thirdparty/karmada/ray.io/v1/RayJob/customizations.yaml"),
    ),
    (
        "karmada/ray.io/v1/RayService/customizations.yaml",
        include_str!("thirdparty/karmada/ray.io/v1/RayService/customizations.yaml"),
    ),
    (
        "karmada/source.toolkit.fluxcd.io/v1/GitRepository/customizations.yaml",
        include_str!("thirdparty/karmada/source.toolkit.fluxcd.io/v1/GitRepository/customizations.yaml"),
    ),
    (
        "karmada/source.toolkit.fluxcd.io/v1beta2/Bucket/customizations.yaml",
        include_str!("thirdparty/karmada/source.toolkit.fluxcd.io/v1beta2/Bucket/customizations.yaml"),
    ),
    (
        "karmada/source.toolkit.fluxcd.io/v1beta2/HelmChart/customizations.yaml",
        include_str!("thirdparty/karmada/source.toolkit.fluxcd.io/v1beta2/HelmChart/customizations.yaml"),
    ),
    (
        "karmada/source.toolkit.fluxcd.io/v1beta2/HelmRepository/customizations.yaml",
        include_str!("thirdparty/karmada/source.toolkit.fluxcd.io/v1beta2/HelmRepository/customizations.yaml"),
    ),
    (
        "karmada/source.toolkit.fluxcd.io/v1beta2/OCIRepository/customizations.yaml",
        include_str!("thirdparty/karmada/source.toolkit.fluxcd.io/v1beta2/OCIRepository/customizations.yaml"),
    ),
    (
        "karmada/sparkoperator.k8s.io/v1beta2/SparkApplication/customizations.yaml",
        include_str!("thirdparty/karmada/sparkoperator.k8s.io/v1beta2/SparkApplication/customizations.yaml"),
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
