//! A revision's Helm charts and kustomizations rendered by the real tools, then loaded
//! with its plain manifests: the one way every command and loop loads a revision. What
//! is rendered from which files is decided purely (`flotilla_core::sources`); here each
//! job runs in a scratch copy of exactly its input files (nothing else of the machine or
//! the repository is there to read), and its output is kept by a key over the tool's
//! build, the job and every input byte: an unchanged chart is not rendered again, in
//! this process or (through the cache directory) the next one.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use flotilla_core::load::{ParseCache, load_cached};
use flotilla_core::model::{Limits, Loaded, RepoFiles};
use flotilla_core::sources::{self, Chart, Expansion, Job};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use super::tool;

/// Tools' outputs by key, held in this process (a controller renders the same charts for
/// every head and preview): content-addressed, so every renderer shares them, and the
/// least recently used go first past [`HELD_BYTES`].
static HELD: Mutex<Held> = Mutex::new(Held { outputs: BTreeMap::new(), bytes: 0, tick: 0 });

/// What the process holds of tools' outputs at most.
const HELD_BYTES: usize = 64 << 20;

struct Held {
    outputs: BTreeMap<String, (Arc<str>, u64)>,
    bytes: usize,
    tick: u64,
}

impl Held {
    fn get(&mut self, key: &str) -> Option<Arc<str>> {
        self.tick += 1;
        let tick = self.tick;
        self.outputs.get_mut(key).map(|(output, used)| {
            *used = tick;
            output.clone()
        })
    }

    fn insert(&mut self, key: String, output: Arc<str>) {
        self.tick += 1;
        self.bytes += output.len();
        if let Some((old, _)) = self.outputs.insert(key, (output, self.tick)) {
            self.bytes -= old.len();
        }
        while self.bytes > HELD_BYTES && self.outputs.len() > 1 {
            let oldest = self.outputs.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            let Some((gone, _)) = oldest.and_then(|k| self.outputs.remove(&k)) else { break };
            self.bytes -= gone.len();
        }
    }
}

/// Loads `files`: rendering its charts and kustomizations first when it has any, and
/// every file's documents through `parse`. While the tools run, the loose manifests and
/// the outputs already kept are parsed, so a one-chart change costs about one tool run
/// more than an unchanged revision, not one tool run plus the whole parse.
pub fn load(files: &RepoFiles, parse: &mut ParseCache, limits: &Limits) -> anyhow::Result<Loaded> {
    let units = sources::units(files, limits)?;
    let charts = sources::declared_charts(files, &units, parse, limits)?;
    if units.is_empty() && charts.is_empty() {
        return Ok(load_cached(files, parse, limits)?);
    }
    let expansions = sources::expansions(files, &units, &charts)?;
    let keyed: Vec<(&Expansion, String)> =
        expansions.iter().map(|e| Ok((e, key(files, e)?))).collect::<anyhow::Result<_>>()?;
    let outputs = kept(&keyed);
    let missing: Vec<&(&Expansion, String)> =
        keyed.iter().filter(|(_, key)| !outputs.contains_key(key.as_str())).collect();
    let mut known = output_files(&keyed, &outputs);
    let mut leftovers = Vec::new();
    if !missing.is_empty() {
        let rendered = std::thread::scope(|scope| {
            let running = scope.spawn(|| parallel(&missing, |(expansion, key)| render_kept(files, expansion, key)));
            let loose = files.files.iter().filter(|(path, _)| sources::is_loose(&units, &charts, path));
            let ahead =
                loose.filter_map(|(path, bytes)| Some((path.as_str(), files.ids.get(path)?.as_str(), &bytes[..])));
            parse.prefill(
                ahead.chain(known.iter().map(|(p, id, text)| (p.as_str(), id.as_str(), text.as_bytes()))),
                limits,
            );
            running.join().expect("a render thread panicked")
        });
        let mut fresh = HashMap::with_capacity(missing.len());
        for ((_, key), result) in missing.iter().zip(rendered) {
            let (output, scratch) = result?;
            fresh.insert(key.as_str(), output.clone());
            leftovers.push((key.as_str(), output, scratch));
        }
        known.extend(output_files(&keyed, &fresh));
    }
    // Writing the new outputs to the cache directory and removing the tools' scratch
    // copies is I/O the load does not wait for (a few milliseconds a render here).
    let assembled = sources::assemble(files, &units, &charts, known);
    let loaded = std::thread::scope(|scope| {
        if !leftovers.is_empty() {
            scope.spawn(move || {
                for (key, output, scratch) in leftovers {
                    write_cached(key, &output);
                    drop(scratch);
                }
            });
        }
        load_cached(&assembled, parse, limits)
    })?;
    if let Some(nested) = loaded.helm_charts.iter().find(|c| sources::is_output(&c.origin.file)) {
        anyhow::bail!("{}: a HelmChart may not come out of a chart or kustomization", nested.origin);
    }
    Ok(loaded)
}

/// The outputs kept for these keys, in this process or in the cache directory.
fn kept<'a>(keyed: &'a [(&Expansion, String)]) -> HashMap<&'a str, Arc<str>> {
    let mut outputs = HashMap::with_capacity(keyed.len());
    let mut held = HELD.lock().expect("held outputs lock");
    for (_, key) in keyed {
        let output = held.get(key).or_else(|| {
            let output: Arc<str> = Arc::from(read_cached(key)?);
            held.insert(key.clone(), output.clone());
            Some(output)
        });
        if let Some(output) = output {
            outputs.insert(key.as_str(), output);
        }
    }
    outputs
}

/// Renders one expansion and holds its output under `key`; with it, the scratch copy
/// the tool ran in, for the caller to remove (and the output to write to the cache
/// directory) off the critical path.
fn render_kept(files: &RepoFiles, expansion: &Expansion, key: &str) -> anyhow::Result<(Arc<str>, TempDir)> {
    let (output, scratch) = render(files, expansion)
        .with_context(|| format!("{} ({}) does not render", expansion.name, expansion.origin))?;
    let output: Arc<str> = Arc::from(output);
    HELD.lock().expect("held outputs lock").insert(key.to_owned(), output.clone());
    Ok((output, scratch))
}

/// The output files (path, id, text) of every expansion whose output is in `outputs`,
/// in expansion order; each file's id is its expansion's key.
fn output_files(keyed: &[(&Expansion, String)], outputs: &HashMap<&str, Arc<str>>) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (expansion, key) in keyed {
        let Some(output) = outputs.get(key.as_str()) else { continue };
        out.extend(sources::output_files(expansion, output).into_iter().map(|(path, text)| (path, key.clone(), text)));
    }
    out
}

/// `run` over `items` on every core, results in order.
fn parallel<T: Sync, R: Send>(items: &[T], run: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let width = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    let chunk = items.len().div_ceil(width).max(1);
    std::thread::scope(|scope| {
        let run = &run;
        let handles: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(run).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("a render thread panicked")).collect()
    })
}

/// The output's key: the tool and its build, the job, and every input's path and
/// bytes (or Git blob id).
fn key(files: &RepoFiles, expansion: &Expansion) -> anyhow::Result<String> {
    let tool = tool::renderer(expansion.job.tool())?;
    let mut hash = Sha256::new();
    hash.update(format!("flotilla-source-v1\0{}\0{}\0{:?}\0", tool.name, tool.identity, expansion.job));
    for path in &expansion.inputs {
        hash.update(path.as_bytes());
        match (files.files.get(path), files.ids.get(path)) {
            (Some(bytes), _) => {
                hash.update(b"\0bytes\0");
                hash.update((bytes.len() as u64).to_le_bytes());
                hash.update(bytes);
            }
            (None, Some(id)) => hash.update(format!("\0id\0{id}\0")),
            (None, None) => anyhow::bail!("{path}: the source did not read this file"),
        }
    }
    Ok(hex::encode(hash.finalize()))
}

/// Runs the expansion's tool in a scratch copy of its inputs: its output, and the copy.
fn render(files: &RepoFiles, expansion: &Expansion) -> anyhow::Result<(String, TempDir)> {
    let tool = tool::renderer(expansion.job.tool())?;
    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
    let repo = scratch.path().join("repo");
    for path in &expansion.inputs {
        let bytes = files.files.get(path).with_context(|| format!("{path}: the source did not read this file"))?;
        let target = repo.join(path);
        std::fs::create_dir_all(target.parent().expect("a file has a parent"))?;
        std::fs::write(&target, bytes).with_context(|| format!("cannot copy {path} to a scratch directory"))?;
    }
    std::fs::create_dir_all(&repo)?;
    // A remote chart is its verified archive, beside the repository copy.
    if let Job::Helm { chart: Chart::Remote(remote), .. } = &expansion.job {
        std::fs::write(scratch.path().join("chart.tgz"), super::charts::archive(remote)?)?;
    }
    let home = scratch.path().join("home");
    std::fs::create_dir_all(home.join("plugins"))?;
    let (args, env) = arguments(&expansion.job, scratch.path(), &home)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let output = tool::run(&tool.path, &args, &repo, &home, &env)
        .map_err(|message| anyhow::anyhow!("{} {}: {message}", tool.name, args.first().copied().unwrap_or_default()))?;
    let output =
        String::from_utf8(output).map_err(|_| anyhow::anyhow!("{} printed something that is not UTF-8", tool.name))?;
    Ok((output, scratch))
}

/// Variables a tool runs with, besides HOME and TMPDIR.
type Environment = Vec<(&'static str, PathBuf)>;

/// The tool's arguments and environment for `job`; `spec.values` is written beside the
/// repository copy (never inside it, so no chart can read it as a file).
fn arguments(job: &Job, scratch: &Path, home: &Path) -> anyhow::Result<(Vec<String>, Environment)> {
    let dir = |d: &str| if d.is_empty() { ".".to_owned() } else { format!("./{d}") };
    match job {
        Job::Kustomize { dir: kustomization } => Ok((
            vec!["build".into(), dir(kustomization), "--load-restrictor".into(), "LoadRestrictionsRootOnly".into()],
            Vec::new(),
        )),
        Job::Helm {
            release,
            namespace,
            chart,
            values_files,
            values,
            include_crds,
            skip_tests,
            kube_version,
            api_versions,
        } => {
            let chart = match chart {
                Chart::Dir(d) => dir(d),
                Chart::Remote(_) => scratch.join("chart.tgz").to_string_lossy().into_owned(),
            };
            let mut args = vec!["template".into(), release.clone(), chart, "--namespace".into(), namespace.clone()];
            for file in values_files {
                args.extend(["--values".into(), file.clone()]);
            }
            if let Some(values) = values {
                let path = scratch.join("values.json");
                std::fs::write(&path, serde_json::to_vec(values)?)?;
                args.extend(["--values".into(), path.to_string_lossy().into_owned()]);
            }
            if *include_crds {
                args.push("--include-crds".into());
            }
            if *skip_tests {
                args.push("--skip-tests".into());
            }
            if let Some(version) = kube_version {
                args.extend(["--kube-version".into(), version.clone()]);
            }
            for api in api_versions {
                args.extend(["--api-versions".into(), api.clone()]);
            }
            // Helm's own directories are scratch ones: no repositories, registries,
            // credentials or plugins of the machine are seen.
            let env = vec![
                ("HELM_CACHE_HOME", home.join("cache")),
                ("HELM_CONFIG_HOME", home.join("config")),
                ("HELM_DATA_HOME", home.join("data")),
                ("HELM_PLUGINS", home.join("plugins")),
                ("KUBECONFIG", home.join("no-kubeconfig")),
            ];
            Ok((args, env))
        }
    }
}

/// Where outputs are kept between processes: `$FLOTILLA_SOURCE_CACHE`, or
/// `~/.cache/flotilla/sources`.
pub(super) fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FLOTILLA_SOURCE_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("flotilla/sources"))
}

fn read_cached(key: &str) -> Option<String> {
    std::fs::read_to_string(cache_dir()?.join(key)).ok()
}

/// Keeps `output` under `key`, written whole or not at all; a cache that cannot be
/// written (a read-only home) only costs a render.
fn write_cached(key: &str, output: &str) {
    let Some(dir) = cache_dir() else { return };
    if let Err(e) = write_whole(&dir.join(key), output.as_bytes()) {
        tracing::debug!(error = %e, "cannot keep a rendered source in the cache directory");
    }
}

/// Writes `bytes` to `path` whole or not at all (a temporary file renamed into place),
/// making its directory.
pub(super) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("a cache path has a parent");
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
