//! HelmChart (`flotilla.dev/v1alpha1`): where the chart is, its values files and release
//! name, checked before any tool runs. Paths are repository-relative and may not leave
//! the repository; docs/sources.md.

use super::{Check, ensure};
use crate::model::names::is_dns1123_subdomain;
use crate::model::source::{ChartRepository, HelmChartSpec};

/// Helm refuses release names over 53 characters (the Secrets it stores them in add a
/// suffix to a 63-character label).
const MAX_RELEASE_NAME: usize = 53;

pub fn helm_chart(spec: &mut HelmChartSpec, _namespace: Option<&str>) -> Check {
    match (&mut spec.chart, &mut spec.repository) {
        (Some(_), Some(_)) => return Err("spec: set chart or repository, not both".into()),
        (None, None) => {
            return Err(
                "spec.chart: required (a chart directory of the repository), or spec.repository (a pinned remote chart)"
                    .into(),
            );
        }
        (Some(chart), None) => *chart = repository_path(chart).map_err(|e| format!("spec.chart: {e}"))?,
        (None, Some(repository)) => remote(repository)?,
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
    for (i, entry) in spec.replica_values.iter().enumerate() {
        entry.keys().map_err(|why| format!("spec.replicaValues[{i}].path: {why}"))?;
    }
    for (i, api) in spec.api_versions.iter().enumerate() {
        ensure(!api.is_empty() && !api.starts_with('-') && !api.contains(char::is_whitespace), || {
            format!("spec.apiVersions[{i}]: must be a group/version or group/version/Kind")
        })?;
    }
    Ok(())
}

/// `spec.repository`: an https Helm repository or an OCI registry, without credentials;
/// a chart name (for OCI, the URL's last segment); one exact version (no range: a render
/// must not depend on what the repository serves today) and the archive's sha256 digest,
/// lower-cased here.
fn remote(repository: &mut ChartRepository) -> Check {
    let url = repository.url.trim_end_matches('/').to_owned();
    let oci = url.strip_prefix("oci://");
    let rest = match oci {
        Some(rest) => rest,
        None => url
            .strip_prefix("https://")
            .ok_or("spec.repository.url: must be an https:// Helm repository or an oci:// registry")?,
    };
    ensure(!rest.is_empty() && !rest.contains(['@', ' ', '?', '#']) && !rest.chars().any(char::is_control), || {
        "spec.repository.url: must be a plain URL (no credentials, query, fragment or digest: credentials never come from the repository; pin the archive in spec.repository.digest)".into()
    })?;
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c));
    if oci.is_some() {
        // An OCI reference names the chart: oci://registry/path/name.
        let last = rest
            .rsplit_once('/')
            .map(|(_, name)| name)
            .filter(|n| plain(n))
            .ok_or("spec.repository.url: an oci:// URL names the chart (oci://registry/path/chart)")?;
        ensure(repository.name.as_deref().is_none_or(|n| n == last), || {
            format!("spec.repository.name: the oci:// URL names the chart {last}; leave name out or set it to {last}")
        })?;
        repository.name = Some(last.to_owned());
    }
    let name =
        repository.name.as_deref().ok_or("spec.repository.name: required (the chart's name in the repository)")?;
    ensure(plain(name), || "spec.repository.name: must be a chart name".into())?;
    let version = &repository.version;
    ensure(plain(version) && version.starts_with(|c: char| c.is_ascii_digit() || c == 'v'), || {
        "spec.repository.version: must be one exact version, not a range".into()
    })?;
    let digest = repository.digest.to_ascii_lowercase();
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    ensure(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()), || {
        "spec.repository.digest: must be sha256: and 64 hex digits (the sha256sum of the chart archive)".into()
    })?;
    (repository.url, repository.digest) = (url, digest);
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
