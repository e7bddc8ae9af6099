//! Sources that are not plain manifests: Helm charts (declared by `flotilla.dev/v1alpha1`
//! HelmChart objects) and kustomizations (a directory holding a `kustomization.yaml`).
//! What they produce are ordinary resource templates, loaded, placed and rendered as any
//! other (docs/sources.md). This module decides, purely, what is rendered by which tool
//! from which files; running the tools is the caller's (the binary's `source::expand`).
//!
//! ```text
//!  RepoFiles ──units──▶ Units {chart roots, kustomization roots}
//!     ──expansions──▶ [Expansion {job, inputs}]     ◀── the HelmCharts declared
//!     (the caller runs each job: helm template / kustomize build)
//!     ──assemble──▶ RepoFiles: loose manifests + what the tools printed
//! ```
//!
//! A chart directory's files (`Chart.yaml`, `values.yaml`, `templates/`) and a
//! kustomization's are never read as manifests; nor is a values file a HelmChart names.

mod chart;
mod kustomize;
pub mod replicas;

use chart::remote;
pub use chart::{Chart, RemoteChart};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::load::{HelmChart, LoadError, ParseCache};
use crate::model::{Limits, Origin, RepoFiles};

/// The names a kustomization file may have, in the order kustomize looks for them.
pub const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The directories of a revision that are built as one unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Units {
    /// Outermost directories holding a `Chart.yaml` (a chart's subcharts are its own).
    pub charts: BTreeSet<String>,
    /// Directories holding a kustomization, by directory: the kustomization file and
    /// the kustomization directories it refers to (resources, bases, components).
    pub kustomizations: BTreeMap<String, Kustomization>,
}

/// One kustomization directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kustomization {
    /// Its kustomization file (repository path).
    pub file: String,
    /// The kustomization directories it refers to.
    pub references: BTreeSet<String>,
}

/// What one tool run renders.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// `HelmChart NAMESPACE/NAME` or `kustomization DIR`, for messages.
    pub name: String,
    /// Where it is declared: the HelmChart's document, or the kustomization file.
    pub origin: Origin,
    /// What to run.
    pub job: Job,
    /// Every repository file the tool may read, sorted: the job's inputs.
    pub inputs: Vec<String>,
    /// The prefix of the paths its output is loaded under.
    pub prefix: String,
}

/// A tool run.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// `helm template RELEASE CHART --namespace NAMESPACE -f …`.
    Helm {
        /// The release name.
        release: String,
        /// The release namespace.
        namespace: String,
        /// The chart: a directory of the repository, or a pinned remote archive.
        chart: Chart,
        /// Values files in order, then `values` (applied last).
        values_files: Vec<String>,
        /// `spec.values`.
        values: Option<Value>,
        /// `--include-crds`.
        include_crds: bool,
        /// `--skip-tests`.
        skip_tests: bool,
        /// `--kube-version`.
        kube_version: Option<String>,
        /// `--api-versions`.
        api_versions: Vec<String>,
    },
    /// `kustomize build DIR`.
    Kustomize {
        /// The kustomization directory.
        dir: String,
    },
}

impl Job {
    /// The tool's command name.
    pub fn tool(&self) -> &'static str {
        match self {
            Job::Helm { .. } => "helm",
            Job::Kustomize { .. } => "kustomize",
        }
    }
}

pub use crate::model::source::is_output;

/// Whether a directory holding these entry names is a unit: every file under it is
/// read (whatever its name), not only manifests.
pub fn is_unit_dir<'a>(mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|name| name == "Chart.yaml" || KUSTOMIZATION_FILES.contains(&name))
}

/// Every path of the revision, read or listed by id.
fn paths(files: &RepoFiles) -> BTreeSet<&str> {
    files.files.keys().chain(files.ids.keys()).map(String::as_str).collect()
}

/// The directory of a repository path ("" at the root).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Whether `path` is `dir` or under it.
pub fn under(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// The chart and kustomization directories of a revision. A kustomization file must
/// have been read (sources read every file of a unit); one that does not parse, names a
/// remote base or leaves the repository fails the revision.
pub fn units(files: &RepoFiles, limits: &Limits) -> Result<Units, LoadError> {
    let all = paths(files);
    let mut units = Units::default();
    let chart_dirs: BTreeSet<&str> =
        all.iter().filter(|p| p.rsplit('/').next() == Some("Chart.yaml")).map(|p| parent(p)).collect();
    for dir in &chart_dirs {
        if !chart_dirs.iter().any(|outer| outer != dir && under(dir, outer)) {
            units.charts.insert((*dir).to_owned());
        }
    }
    for path in &all {
        let name = path.rsplit('/').next().unwrap_or(path);
        let dir = parent(path);
        if !KUSTOMIZATION_FILES.contains(&name) || units.charts.iter().any(|chart| under(dir, chart)) {
            continue;
        }
        // kustomize refuses a directory with two kustomization files; so does flotilla.
        if let Some(other) = units.kustomizations.get(dir) {
            return Err(LoadError::Invalid {
                origin: first_line(path),
                message: format!("{} is in the same directory: kustomize reads only one", other.file),
            });
        }
        let bytes = files.files.get(*path).ok_or_else(|| LoadError::Invalid {
            origin: first_line(path),
            message: "the source did not read this kustomization".into(),
        })?;
        let references = kustomize::references(path, dir, bytes, limits)?;
        units.kustomizations.insert(dir.to_owned(), Kustomization { file: (*path).to_owned(), references });
    }
    // Entries naming files are the kustomization's own; only directories with a
    // kustomization of their own are references.
    let dirs: BTreeSet<String> = units.kustomizations.keys().cloned().collect();
    for kustomization in units.kustomizations.values_mut() {
        kustomization.references.retain(|r| dirs.contains(r));
    }
    Ok(units)
}

fn first_line(file: &str) -> Origin {
    Origin { file: Arc::from(file), document: 1, line: 1 }
}

impl Units {
    /// Whether nothing is rendered by a tool.
    pub fn is_empty(&self) -> bool {
        self.charts.is_empty() && self.kustomizations.is_empty()
    }

    /// Whether `path` belongs to a chart or a kustomization (and is not a manifest).
    pub fn owns(&self, path: &str) -> bool {
        self.charts.iter().chain(self.kustomizations.keys()).any(|dir| under(path, dir))
    }

    /// The kustomizations built on their own: those no other one refers to (a base is
    /// built through its overlays).
    pub fn built_kustomizations(&self) -> impl Iterator<Item = (&String, &Kustomization)> {
        let referenced: BTreeSet<&String> = self.kustomizations.values().flat_map(|k| &k.references).collect();
        self.kustomizations.iter().filter(move |(dir, _)| !referenced.contains(dir))
    }

    /// The directories a kustomization reads: its own and those it refers to, at any
    /// depth.
    fn closure<'a>(&'a self, dir: &'a str) -> BTreeSet<&'a str> {
        let mut seen = BTreeSet::from([dir]);
        let mut pending = vec![dir];
        while let Some(next) = pending.pop() {
            for reference in self.kustomizations.get(next).into_iter().flat_map(|k| &k.references) {
                if seen.insert(reference.as_str()) {
                    pending.push(reference);
                }
            }
        }
        seen
    }
}

/// The HelmCharts a revision declares outside its units: read from `files`, or from
/// `cache` for files a source listed by id without reading.
pub fn declared_charts(
    files: &RepoFiles,
    units: &Units,
    cache: &ParseCache,
    limits: &Limits,
) -> Result<Vec<HelmChart>, LoadError> {
    let mut charts = Vec::new();
    for path in paths(files).into_iter().filter(|p| RepoFiles::is_manifest_path(p) && !units.owns(p)) {
        let cached = files.ids.get(path).and_then(|id| cache.helm_charts(path, id));
        match (cached, files.files.get(path)) {
            (_, Some(bytes)) if memchr(bytes, b"HelmChart") => {
                charts.extend(crate::load::helm_charts_in(path, bytes, limits)?)
            }
            (Some(held), None) => charts.extend(held),
            _ => {}
        }
    }
    Ok(charts)
}

fn memchr(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What each HelmChart and each kustomization built on its own renders, with the files
/// it may read. A chart that is not a chart directory of the repository, a values file
/// that does not exist or a remote chart fails the revision.
pub fn expansions(files: &RepoFiles, units: &Units, charts: &[HelmChart]) -> Result<Vec<Expansion>, LoadError> {
    let all = paths(files);
    let mut out = Vec::new();
    for chart in charts {
        out.push(helm(chart, &all)?);
    }
    for (dir, kustomization) in units.built_kustomizations() {
        let dirs = units.closure(dir);
        let inputs = all.iter().filter(|p| dirs.iter().any(|d| under(p, d))).map(|p| (*p).to_owned()).collect();
        let shown = if dir.is_empty() { "." } else { dir };
        out.push(Expansion {
            name: format!("kustomization {shown}"),
            origin: first_line(&kustomization.file),
            job: Job::Kustomize { dir: dir.clone() },
            inputs,
            prefix: format!("kustomize:{}/", shown),
        });
    }
    Ok(out)
}

fn helm(chart: &HelmChart, all: &BTreeSet<&str>) -> Result<Expansion, LoadError> {
    let namespace = chart.namespace.clone().unwrap_or_else(|| "default".into());
    let name = format!("HelmChart {namespace}/{}", chart.name);
    let invalid = |message: String| LoadError::Invalid { origin: chart.origin.clone(), message };
    let spec = &chart.spec;
    let source = match (&spec.chart, &spec.repository) {
        (Some(_), Some(_)) => return Err(invalid("spec.chart and spec.repository: name one of them".into())),
        (None, None) => {
            return Err(invalid(
                "spec.chart: required (a chart directory of the repository), or spec.repository (a pinned remote chart)".into(),
            ));
        }
        (None, Some(repository)) => Chart::Remote(Box::new(remote(repository))),
        (Some(dir), None) if !all.contains(format!("{dir}/Chart.yaml").as_str()) => {
            return Err(invalid(format!(
                "spec.chart: {dir} is not a chart directory of the repository (no {dir}/Chart.yaml)"
            )));
        }
        (Some(dir), None) => Chart::Dir(dir.clone()),
    };
    for (i, file) in spec.values_files.iter().enumerate() {
        if !all.contains(file.as_str()) {
            return Err(invalid(format!("spec.valuesFiles[{i}]: {file} is not a file of the repository")));
        }
    }
    let mut inputs: BTreeSet<String> = match &source {
        Chart::Dir(dir) => all.iter().filter(|p| under(p, dir)).map(|p| (*p).to_owned()).collect(),
        Chart::Remote(_) => BTreeSet::new(),
    };
    inputs.extend(spec.values_files.iter().cloned());
    Ok(Expansion {
        name,
        origin: chart.origin.clone(),
        job: Job::Helm {
            release: spec.release(&chart.name).to_owned(),
            namespace: namespace.clone(),
            chart: source,
            values_files: spec.values_files.clone(),
            values: spec.values.clone(),
            include_crds: spec.include_crds,
            skip_tests: spec.skip_tests,
            kube_version: spec.kube_version.clone(),
            api_versions: spec.api_versions.clone(),
        },
        inputs: inputs.into_iter().collect(),
        prefix: crate::model::source::helm_output_prefix(&namespace, &chart.name),
    })
}

/// The files a tool's output is loaded as: Helm's by the template it came from (its
/// `# Source:` comments), kustomize's as one file. Paths start with the expansion's
/// prefix and end in `.yaml`, so every message names the chart or kustomization.
pub fn output_files(expansion: &Expansion, output: &str) -> BTreeMap<String, String> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    match expansion.job {
        Job::Kustomize { .. } => {
            files.insert(format!("{}kustomization.yaml", expansion.prefix), output.to_owned());
        }
        Job::Helm { .. } => {
            for document in crate::load::split(output) {
                let source = document
                    .text
                    .lines()
                    .find_map(|l| l.strip_prefix("# Source: "))
                    .map(|s| s.trim().replace(':', "_"))
                    .unwrap_or_else(|| "output".into());
                let source = if RepoFiles::is_manifest_path(&source) { source } else { format!("{source}.yaml") };
                let file = files.entry(format!("{}{source}", expansion.prefix)).or_default();
                if !file.is_empty() {
                    file.push_str("---\n");
                }
                file.push_str(document.text.strip_prefix("---\n").unwrap_or(document.text));
                if !file.ends_with('\n') {
                    file.push('\n');
                }
            }
        }
    }
    files
}

/// Whether `path` is one of the revision's loose files, loaded as it is: not a file of a
/// chart or kustomization, nor a values file a HelmChart names.
pub fn is_loose(units: &Units, charts: &[HelmChart], path: &str) -> bool {
    !units.owns(path) && !charts.iter().any(|c| c.spec.values_files.iter().any(|v| v == path))
}

/// The revision to load: its loose manifests (every unit's files and every values file
/// left out) and the tools' output files, each with its content id `id` (so a parse
/// cache keeps them across revisions).
pub fn assemble(
    files: &RepoFiles,
    units: &Units,
    charts: &[HelmChart],
    outputs: impl IntoIterator<Item = (String, String, String)>,
) -> RepoFiles {
    let loose = |path: &String| is_loose(units, charts, path);
    let mut files = RepoFiles {
        revision: files.revision.clone(),
        files: files.files.iter().filter(|(p, _)| loose(p)).map(|(p, b)| (p.clone(), b.clone())).collect(),
        ids: files.ids.iter().filter(|(p, _)| loose(p)).map(|(p, id)| (p.clone(), id.clone())).collect(),
    };
    for (path, id, text) in outputs {
        files.ids.insert(path.clone(), id);
        files.files.insert(path, text.into_bytes());
    }
    files
}

#[cfg(test)]
mod tests;
