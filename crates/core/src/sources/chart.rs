//! Where a HelmChart's chart comes from: a directory of the repository, or a remote
//! archive pinned by version and digest.

/// Where a chart comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chart {
    /// A chart directory of the repository.
    Dir(String),
    /// A chart archive fetched from a Helm repository or an OCI registry, pinned by version and digest.
    Remote(Box<RemoteChart>),
}

/// A remote chart: an `https://` Helm repository or an `oci://` registry, the chart's name, an exact
/// version and the archive's `sha256:` digest (as the load checked them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoteChart {
    /// The repository's URL.
    pub url: String,
    /// The chart's name in it.
    pub name: String,
    /// The exact version.
    pub version: String,
    /// `sha256:` and 64 lower-case hex digits: what the archive must hash to.
    pub digest: String,
}

impl RemoteChart {
    /// The digest's hex digits.
    pub fn hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }

    /// Whether it is pulled from an OCI registry (its URL names the chart).
    pub fn is_oci(&self) -> bool {
        self.url.starts_with("oci://")
    }
}

/// A remote chart as the load checked it (`load::validate::source`).
pub(super) fn remote(repository: &crate::model::source::ChartRepository) -> RemoteChart {
    RemoteChart {
        url: repository.url.clone(),
        name: repository.name.clone().unwrap_or_default(),
        version: repository.version.clone(),
        digest: repository.digest.clone(),
    }
}
