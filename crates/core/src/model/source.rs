//! `flotilla.dev/v1alpha1` HelmChart: a Helm chart of the repository rendered into
//! resource templates (docs/sources.md). Field names follow Flux's HelmRelease and
//! Argo CD's `helm` source where they mean the same thing; unknown fields are refused.

use serde::Deserialize;
use serde_json::Value;

/// Whether `file` is one of the files a tool's output is loaded as (`helm:NAMESPACE/NAME:SOURCE`
/// or `kustomize:DIR/kustomization.yaml`): a template from one has no file in the
/// repository to edit.
pub fn is_output(file: &str) -> bool {
    is_helm_output(file) || file.starts_with("kustomize:")
}

/// Whether `file` is one a Helm chart's output is loaded as.
pub fn is_helm_output(file: &str) -> bool {
    file.starts_with("helm:")
}

/// How the files of the HelmChart NAMESPACE/NAME's output begin: `helm:NAMESPACE/NAME:`
/// (the template's source path follows).
pub fn helm_output_prefix(namespace: &str, name: &str) -> String {
    format!("helm:{namespace}/{name}:")
}

/// `spec` of a HelmChart. Its `metadata.namespace` is the release namespace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelmChartSpec {
    /// A chart directory of the repository (repository-relative, holding `Chart.yaml`).
    #[serde(default)]
    pub chart: Option<String>,
    /// A chart outside the repository, pinned by version and digest.
    #[serde(default)]
    pub repository: Option<ChartRepository>,
    /// The release name (`.Release.Name`); the object's name when unset.
    #[serde(default)]
    pub release_name: Option<String>,
    /// Values files, repository-relative, applied in order (`helm template -f`).
    #[serde(default)]
    pub values_files: Vec<String>,
    /// Values applied after every file.
    #[serde(default)]
    pub values: Option<Value>,
    /// Whether the chart's `crds/` are rendered too (Helm installs them; true).
    #[serde(default = "yes", rename = "includeCRDs")]
    pub include_crds: bool,
    /// Whether the chart's test hooks are left out (Flux and Argo CD do not apply them;
    /// true).
    #[serde(default = "yes")]
    pub skip_tests: bool,
    /// `.Capabilities.KubeVersion` (`--kube-version`); Helm's default when unset.
    #[serde(default)]
    pub kube_version: Option<String>,
    /// Extra `.Capabilities.APIVersions` (`--api-versions`).
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Where an autoscaler writes the replicas of a workload the chart renders: the
    /// values key that sets its `spec.replicas` (docs/sources.md).
    #[serde(default)]
    pub replica_values: Vec<ReplicaValue>,
}

/// The values key that sets one rendered workload's `spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaValue {
    /// The workload's kind, as the chart renders it (`Deployment`).
    pub kind: String,
    /// The workload's name, as the chart renders it.
    pub name: String,
    /// The values key, dotted (`productpage.replicas`).
    pub path: String,
}

impl ReplicaValue {
    /// The key's segments, or why it is not a key: empty segments and segments that are
    /// not plain names (Helm's values are maps of names) are refused.
    pub fn keys(&self) -> Result<Vec<&str>, String> {
        let keys: Vec<&str> = self.path.split('.').collect();
        let plain = |k: &&str| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if keys.iter().all(plain) {
            Ok(keys)
        } else {
            Err(format!("{:?} is not a dotted values key (names of letters, digits, `_` and `-`)", self.path))
        }
    }
}

fn yes() -> bool {
    true
}

/// A chart fetched from a Helm or OCI repository.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartRepository {
    /// `oci://…` or a Helm repository's `https://…`.
    pub url: String,
    /// The chart's name in a Helm repository (an OCI URL names it already).
    #[serde(default)]
    pub name: Option<String>,
    /// An exact version.
    pub version: String,
    /// `sha256:…` of the chart archive.
    pub digest: String,
}

impl HelmChartSpec {
    /// The release name: `releaseName`, or the object's name.
    pub fn release<'a>(&'a self, name: &'a str) -> &'a str {
        self.release_name.as_deref().unwrap_or(name)
    }
}
