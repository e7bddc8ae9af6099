//! Writing a plan: a YAML stream, or a directory tree of one file per object.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use flotilla_core::model::Plan;
use flotilla_core::model::plan::PlanView;
use serde_json::Value;

/// Standard output, buffered in large blocks: a plan is megabytes written in small
/// pieces, and the standard handle (line-buffered, 1 KiB) would scan every piece for a
/// newline and write each kilobyte on its own. Flush it before returning.
pub fn stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock())
}

/// Every cluster's manifests as one YAML stream, each document headed by its cluster.
pub fn write_yaml(view: &PlanView<'_>, out: &mut dyn Write) -> anyhow::Result<()> {
    for (cluster, items) in view.clusters() {
        for (plan, item) in items {
            let manifest = plan.manifest(item)?;
            write!(out, "---\n# cluster: {cluster}\n{}{}", suspended(item), to_yaml(&manifest)?)?;
        }
    }
    Ok(())
}

/// The resource templates as loaded: a YAML stream, each document headed by the file
/// it comes from (a chart's or kustomization's output file names it), or a JSON array.
pub fn write_templates(
    templates: &[std::sync::Arc<flotilla_core::model::Template>],
    format: crate::cli::Format,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match format {
        crate::cli::Format::Json => {
            let objects: Vec<Value> = templates.iter().map(|t| t.object()).collect();
            serde_json::to_writer(&mut *out, &objects).context("cannot write the templates")?;
            writeln!(out)?;
        }
        crate::cli::Format::Yaml => {
            for template in templates {
                let source = template.origin.to_string();
                let source = flotilla_core::escape::visible(&source);
                write!(out, "---\n# source: {source}\n{}", to_yaml(&template.object())?)?;
            }
        }
    }
    Ok(())
}

/// A comment line for an object its policy holds back (`suspension.dispatching`, or
/// `dispatchingOnClusters` naming this cluster): rendered, and not applied.
fn suspended(item: &flotilla_core::model::plan::Rendered) -> &'static str {
    match item.suspended {
        true => "# suspended: its policy suspends dispatching here; apply leaves it as it is in the member\n",
        false => "",
    }
}

fn to_yaml(manifest: &Value) -> anyhow::Result<String> {
    flotilla_core::yaml::to_string(manifest).context("cannot serialise a manifest as YAML")
}

/// One path component that stays where it is joined. The load already refuses names and
/// kinds that are not, so this holds the line if a rule there ever loosens.
fn segment(part: &str) -> anyhow::Result<&str> {
    let mut components = std::path::Path::new(part).components();
    match (components.next(), components.next()) {
        (Some(std::path::Component::Normal(_)), None) if !part.contains(['/', '\\']) => Ok(part),
        _ => bail!("{part:?} cannot be a file name under the output directory"),
    }
}

/// The file a render writes into each cluster's directory, naming what wrote it: only
/// a directory holding it is cleared by the next render.
pub const MARKER: &str = ".flotilla-render";

/// `<dir>/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml`. Each cluster's
/// directory is replaced, so files of objects that left the plan do not linger; but
/// only a directory an earlier render wrote (it holds [`MARKER`]) is cleared. Anything
/// else in the way (a repository's `apps/` beside a Cluster named `apps`) is refused
/// before anything is written or removed.
pub fn write_dir(plan: &Plan, view: &PlanView<'_>, dir: &Path) -> anyhow::Result<()> {
    for (cluster, _) in view.clusters() {
        let base = dir.join(segment(cluster)?);
        let ours = base.join(MARKER).is_file();
        let empty = || std::fs::read_dir(&base).map(|mut entries| entries.next().is_none()).unwrap_or(false);
        if base.exists() && !ours && !empty() {
            bail!(
                "{} exists and was not written by flotilla render (no {MARKER} in it): refusing to replace it; \
                 choose another --out-dir or remove it",
                base.display()
            );
        }
    }
    for (cluster, items) in view.clusters() {
        let base = dir.join(segment(cluster)?);
        if base.exists() {
            std::fs::remove_dir_all(&base).with_context(|| format!("cannot clear {}", base.display()))?;
        }
        std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
        let stamp = format!(
            "written by flotilla render at revision {}; this directory is replaced by the next render\n",
            plan.revision
        );
        std::fs::write(base.join(MARKER), stamp).with_context(|| format!("cannot write {}", base.display()))?;
        let mut seen = BTreeSet::new();
        for (from, item) in items {
            let key = &from.loaded.templates[item.template].key;
            let scope = key.namespace.as_deref().unwrap_or("_cluster");
            let name = format!("{}-{}.yaml", key.kind.to_lowercase(), key.name);
            let file = base.join(segment(scope)?).join(segment(&name)?);
            if !seen.insert(file.clone()) {
                bail!("{} and another object map to the same file {}", key, file.display());
            }
            std::fs::create_dir_all(file.parent().expect("has a parent"))
                .with_context(|| format!("cannot create {}", base.display()))?;
            std::fs::write(&file, format!("{}{}", suspended(item), to_yaml(&from.manifest(item)?)?))
                .with_context(|| format!("cannot write {}", file.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_plain_names_become_path_components() {
        assert_eq!(super::segment("deployment-web.yaml").unwrap(), "deployment-web.yaml");
        for bad in ["..", ".", "", "../x", "a/b", "/etc", "a\\b"] {
            assert!(super::segment(bad).is_err(), "{bad}");
        }
    }
}
