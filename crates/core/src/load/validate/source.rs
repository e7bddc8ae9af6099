//! HelmChart (`flotilla.dev/v1alpha1`): where the chart is, its values files and release
//! name, checked before any tool runs. Paths are repository-relative and may not leave
//! the repository; docs/sources.md.

use super::{Check, ensure};
use crate::model::names::is_dns1123_subdomain;
use crate::model::source::HelmChartSpec;

/// Helm refuses release names over 53 characters (the Secrets it stores them in add a
/// suffix to a 63-character label).
const MAX_RELEASE_NAME: usize = 53;

pub fn helm_chart(spec: &mut HelmChartSpec, _namespace: Option<&str>) -> Check {
    match (&mut spec.chart, &spec.repository) {
        (Some(_), Some(_)) => return Err("spec: set chart or repository, not both".into()),
        (None, None) => return Err("spec.chart: required (a chart directory of the repository)".into()),
        (Some(chart), None) => *chart = repository_path(chart).map_err(|e| format!("spec.chart: {e}"))?,
        (None, Some(repository)) => {
            let url = &repository.url;
            ensure(url.starts_with("oci://") || url.starts_with("https://"), || {
                "spec.repository.url: must be oci://… or https://…".into()
            })?;
            ensure(url.starts_with("oci://") || repository.name.is_some(), || {
                "spec.repository.name: required for a Helm repository (an oci:// URL names the chart)".into()
            })?;
            ensure(!repository.version.is_empty(), || "spec.repository.version: required (an exact version)".into())?;
            let digest = repository.digest.strip_prefix("sha256:").unwrap_or("");
            ensure(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()), || {
                "spec.repository.digest: must be sha256: and 64 hex digits".into()
            })?;
        }
    }
    for (i, file) in spec.values_files.iter_mut().enumerate() {
        *file = repository_path(file).map_err(|e| format!("spec.valuesFiles[{i}]: {e}"))?;
    }
    if let Some(values) = &spec.values {
        ensure(values.is_object(), || "spec.values: must be a mapping".into())?;
    }
    if let Some(release) = &spec.release_name {
        ensure(release.len() <= MAX_RELEASE_NAME && is_dns1123_subdomain(release), || {
            format!("spec.releaseName: must be a DNS-1123 subdomain of at most {MAX_RELEASE_NAME} characters")
        })?;
    }
    if let Some(version) = &spec.kube_version {
        ensure(version.trim_start_matches('v').split('.').filter(|p| p.parse::<u32>().is_ok()).count() >= 2, || {
            "spec.kubeVersion: must be a version such as v1.35.0".into()
        })?;
    }
    for (i, api) in spec.api_versions.iter().enumerate() {
        ensure(!api.is_empty() && !api.starts_with('-') && !api.contains(char::is_whitespace), || {
            format!("spec.apiVersions[{i}]: must be a group/version or group/version/Kind")
        })?;
    }
    Ok(())
}

/// `path` resolved lexically against the repository root: `/`-separated, without `.`
/// components; refused if absolute, empty or climbing above the root.
pub fn repository_path(path: &str) -> Result<String, String> {
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return Err("must be a path inside the repository (relative, /-separated)".into());
    }
    let mut parts: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(|| "leaves the repository".to_string())?;
            }
            c => parts.push(c),
        }
    }
    ensure(!parts.is_empty(), || "must name a path inside the repository".into())?;
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repository() {
        assert_eq!(repository_path("./charts//shop/").unwrap(), "charts/shop");
        assert_eq!(repository_path("envs/../charts/shop").unwrap(), "charts/shop");
        for bad in ["/etc/passwd", "../outside", "charts/../../x", "", ".", "a\\b"] {
            assert!(repository_path(bad).is_err(), "{bad:?}");
        }
    }
}
