//! The parse cache: documents of the last revision by path and blob id, so a revision
//! that changes one file parses one file, and templates keyed once per file while the
//! repo's CRD scopes stay the same.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rayon::prelude::*;

use super::split::{Chunk, split};
use super::{LoadError, Parsed, finish, parse_document, scope, templates};
use crate::model::cluster::Cluster;
use crate::model::{Limits, Loaded, Origin, RepoFiles, Template};

/// A HelmChart as loaded.
pub type HelmChart = Arc<crate::model::Named<crate::model::source::HelmChartSpec>>;

/// Documents parsed from earlier revisions, keyed by path and content id (a Git blob
/// id), so a revision that changes one file parses one file. It holds the files of the
/// last revision loaded through it and nothing older, so it never outgrows one
/// revision.
#[derive(Debug, Default)]
pub struct ParseCache {
    files: Files,
    /// The CRD scopes the files' templates were keyed under.
    scopes: Option<scope::Scopes>,
}

#[derive(Debug)]
struct CachedFile {
    size: usize,
    /// YAML nodes in its documents, counted against [`Limits::max_total_nodes`].
    nodes: usize,
    documents: Vec<(Origin, Parsed)>,
    /// The file's templates keyed under [`ParseCache::scopes`].
    keyed: Option<Vec<Arc<Template>>>,
}

/// A file of the revision being loaded: held in the next cache, or used once.
enum Slot {
    Kept((String, String)),
    Loose(CachedFile),
}

impl Slot {
    /// The file this slot stands for.
    fn file<'a>(&'a self, kept: &'a Files) -> &'a CachedFile {
        match self {
            Slot::Kept(key) => &kept[key],
            Slot::Loose(entry) => entry,
        }
    }
}

/// Adds a file's policies, clusters and autoscalers to `loaded` (templates are keyed
/// apart, under the repo's CRD scopes).
fn collect(loaded: &mut Loaded, file: &CachedFile) {
    for (_, doc) in &file.documents {
        match doc {
            Parsed::Template(_) => {}
            Parsed::Propagation(p) => loaded.propagation_policies.push(p.clone()),
            Parsed::Override(o) => loaded.override_policies.push(o.clone()),
            Parsed::Cluster(c) => loaded.clusters.push(Cluster::clone(c)),
            Parsed::FederatedHpa(h) => loaded.federated_hpas.push(h.clone()),
            Parsed::CronFederatedHpa(h) => loaded.cron_federated_hpas.push(h.clone()),
            Parsed::MultiClusterService(m) => loaded.multi_cluster_services.push(m.clone()),
            Parsed::FederatedResourceQuota(q) => loaded.federated_resource_quotas.push(q.clone()),
            Parsed::ClusterTaintPolicy(p) => loaded.cluster_taint_policies.push(p.clone()),
            Parsed::Rollout(r) => loaded.rollout_policies.push(r.clone()),
            Parsed::Customization(c) => loaded.customizations.push(c.clone()),
            Parsed::HelmChart(c) => loaded.helm_charts.push(c.clone()),
            Parsed::NotActedOn(n) => loaded.not_acted_on.push(n.clone()),
        }
    }
}

/// Every file's keyed templates, in file order, reusing each file's memo when `reuse`
/// (it was made under the same scopes) and keeping the memo made otherwise.
fn key_files(
    per_file: Vec<Slot>,
    kept: &mut Files,
    scopes: &scope::Scopes,
    reuse: bool,
) -> Result<Vec<Arc<Template>>, LoadError> {
    // Keyed on every core; assembled in file order, so the first error is the first
    // in file order.
    let fresh: Vec<Option<Result<Vec<Arc<Template>>, LoadError>>> = per_file
        .par_iter()
        .map(|slot| {
            let file = slot.file(kept);
            (!reuse || file.keyed.is_none()).then(|| key_file(file, scopes))
        })
        .collect();
    let mut all = Vec::new();
    for (mut slot, fresh) in per_file.into_iter().zip(fresh) {
        let file = match &mut slot {
            Slot::Kept(key) => kept.get_mut(key).expect("kept above"),
            Slot::Loose(entry) => entry,
        };
        let keyed = match fresh {
            Some(keyed) => keyed?,
            None => file.keyed.take().expect("a reusable memo"),
        };
        all.extend(keyed.iter().cloned());
        file.keyed = Some(keyed);
    }
    Ok(all)
}

impl CachedFile {
    fn raw_templates(&self) -> impl Iterator<Item = (&Origin, &Arc<scope::Raw>)> {
        self.documents.iter().filter_map(|(origin, doc)| match doc {
            Parsed::Template(object) => Some((origin, object)),
            _ => None,
        })
    }
}

impl ParseCache {
    /// The size of the file at `path` with content id `id`, if its documents are held:
    /// a source need not read such a file.
    pub fn size(&self, path: &str, id: &str) -> Option<usize> {
        self.files.get(&(path.to_owned(), id.to_owned())).map(|f| f.size)
    }

    /// The HelmCharts the file at `path` with content id `id` declares, if its documents
    /// are held (a source that did not read it still learns what it renders).
    pub fn helm_charts(&self, path: &str, id: &str) -> Option<Vec<HelmChart>> {
        let file = self.files.get(&(path.to_owned(), id.to_owned()))?;
        let charts = file.documents.iter().filter_map(|(_, doc)| match doc {
            Parsed::HelmChart(chart) => Some(chart.clone()),
            _ => None,
        });
        Some(charts.collect())
    }

    /// Parses `files` (path, content id, bytes) that are not held yet and holds them for
    /// the next [`load_cached`]: work that can run while something else does (a tool
    /// rendering the rest of the revision). What that load does not use is dropped by it
    /// as usual; a file that does not parse is left for it to report, with its origin.
    pub fn prefill<'a>(&mut self, files: impl IntoIterator<Item = (&'a str, &'a str, &'a [u8])>, limits: &Limits) {
        let todo: Vec<(&str, &str, &[u8])> = files
            .into_iter()
            .filter(|(path, id, bytes)| {
                RepoFiles::is_manifest_path(path)
                    && bytes.len() <= limits.max_file_bytes
                    && !self.files.contains_key(&((*path).to_owned(), (*id).to_owned()))
            })
            .collect();
        let spent = std::sync::atomic::AtomicUsize::new(0);
        let parsed: Vec<Option<CachedFile>> =
            todo.par_iter().map(|(path, _, bytes)| parse_file(path, bytes, limits, &spent)).collect();
        for ((path, id, _), file) in todo.into_iter().zip(parsed) {
            if let Some(file) = file {
                self.files.insert((path.to_owned(), id.to_owned()), file);
            }
        }
    }

    /// Files held.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// [`load`], reusing and refreshing `cache` for files with a content id. Results are
/// identical to an uncached load: the same objects, the same first error.
pub fn load_cached(files: &RepoFiles, cache: &mut ParseCache, limits: &Limits) -> Result<Loaded, LoadError> {
    let (chunks, hits, cached_nodes) = split_files(files, cache, limits)?;
    let spent = std::sync::atomic::AtomicUsize::new(cached_nodes);
    let parsed: Vec<Result<super::Document, LoadError>> =
        chunks.par_iter().map(|(file, chunk)| parse_document(file, chunk, limits, &spent)).collect();
    // File by file in path order: the cached documents, or the results of its chunks.
    let mut fresh = parsed.into_iter().zip(chunks.iter().map(|(f, _)| f)).peekable();
    let paths: std::collections::BTreeSet<&String> = files.files.keys().chain(files.ids.keys()).collect();
    // What this revision uses moves from `held` to `kept`; on failure both stay cached.
    let mut held = std::mem::take(&mut cache.files);
    let mut kept = HashMap::with_capacity(paths.len());
    let previous_scopes = cache.scopes.take();
    let classify = || -> Result<(Loaded, scope::Scopes), LoadError> {
        let mut loaded = Loaded::default();
        let mut per_file = Vec::new();
        for path in paths.into_iter().filter(|p| RepoFiles::is_manifest_path(p)) {
            let id = files.ids.get(path);
            // Files with an id go to `kept` at once (so a failure below keeps them);
            // files without one are used once.
            let slot = match id.and_then(|id| hits.contains(path.as_str()).then(|| (path.clone(), id.clone()))) {
                Some(key) => {
                    let entry = held.remove(&key).expect("a cache hit is held");
                    kept.insert(key.clone(), entry);
                    Slot::Kept(key)
                }
                None => {
                    let entry = fresh_file(&mut fresh, path, files.files.get(path).map_or(0, Vec::len))?;
                    match id {
                        Some(id) => {
                            let key = (path.clone(), id.clone());
                            kept.insert(key.clone(), entry);
                            Slot::Kept(key)
                        }
                        None => Slot::Loose(entry),
                    }
                }
            };
            collect(&mut loaded, slot.file(&kept));
            per_file.push(slot);
        }
        let raw = per_file.iter().flat_map(|slot| slot.file(&kept).raw_templates()).map(|(_, raw)| &**raw);
        let scopes = scope::Scopes::from_crds(raw);
        // Keyed templates depend on the repo's CRD scopes; memos made under other
        // scopes are redone.
        let reuse = previous_scopes.as_ref() == Some(&scopes);
        let mut keyed = key_files(per_file, &mut kept, &scopes, reuse)?;
        keyed.extend(loaded.federated_resource_quotas.iter().map(|q| Arc::new(scope::resource_quota(q))));
        loaded.templates = templates(keyed)?;
        scope::follow_exported(&mut loaded.templates);
        finish(&mut loaded)?;
        Ok((loaded, scopes))
    };
    let result = classify();
    settle(cache, result, kept, held)
}

/// Files by path and content id.
type Files = HashMap<(String, String), CachedFile>;

/// Hands the cache back what a load leaves: on success the files this revision used,
/// with the scopes their memos were made under; on failure every parse, used or not,
/// without memos (they may be keyed under this attempt's scopes).
fn settle(
    cache: &mut ParseCache,
    result: Result<(Loaded, scope::Scopes), LoadError>,
    mut kept: Files,
    held: Files,
) -> Result<Loaded, LoadError> {
    match result {
        Ok((loaded, scopes)) => {
            cache.files = kept;
            cache.scopes = Some(scopes);
            Ok(loaded)
        }
        Err(e) => {
            kept.extend(held);
            for file in kept.values_mut() {
                file.keyed = None;
            }
            cache.files = kept;
            Err(e)
        }
    }
}

/// A file parsed in this load: the results of its chunks, which come next in `fresh`.
fn fresh_file<'a, I>(fresh: &mut std::iter::Peekable<I>, path: &str, size: usize) -> Result<CachedFile, LoadError>
where
    I: Iterator<Item = (Result<super::Document, LoadError>, &'a Arc<str>)>,
{
    let (mut documents, mut nodes) = (Vec::new(), 0);
    while let Some((result, _)) = fresh.next_if(|(_, f)| &***f == path) {
        let (objects, counted) = result?;
        documents.extend(objects);
        nodes += counted;
    }
    Ok(CachedFile { size, nodes, documents, keyed: None })
}

/// Every document of one file, or nothing if any of them fails (the load that reads it
/// again reports why).
fn parse_file(path: &str, bytes: &[u8], limits: &Limits, spent: &std::sync::atomic::AtomicUsize) -> Option<CachedFile> {
    let chunks = split(std::str::from_utf8(bytes).ok()?);
    if chunks.len() > limits.max_documents_per_file {
        return None;
    }
    let shared: Arc<str> = Arc::from(path);
    let (mut documents, mut nodes) = (Vec::new(), 0);
    for chunk in &chunks {
        let (objects, counted) = parse_document(&shared, chunk, limits, spent).ok()?;
        documents.extend(objects);
        nodes += counted;
    }
    Some(CachedFile { size: bytes.len(), nodes, documents, keyed: None })
}

/// The keyed templates of one file, each followed by what it derives.
fn key_file(file: &CachedFile, scopes: &scope::Scopes) -> Result<Vec<Arc<Template>>, LoadError> {
    let mut out = Vec::new();
    for (origin, raw) in file.raw_templates() {
        let template = scope::keyed(raw, origin.clone(), scopes)?;
        let derived = scope::derived_service(&template);
        out.extend(std::iter::once(template).chain(derived).map(Arc::new));
    }
    Ok(out)
}

/// Chunks of the files to parse, the paths of files `cache` holds, and their nodes.
type Split<'a> = (Vec<(Arc<str>, Chunk<'a>)>, HashSet<&'a str>, usize);

pub(super) fn split_files<'a>(
    files: &'a RepoFiles,
    cache: &ParseCache,
    limits: &Limits,
) -> Result<Split<'a>, LoadError> {
    let (mut total, mut nodes) = (0usize, 0usize);
    let mut out = Vec::new();
    let mut hits = HashSet::new();
    for (path, id) in files.ids.iter().filter(|(p, _)| RepoFiles::is_manifest_path(p)) {
        match cache.files.get(&(path.clone(), id.clone())) {
            Some(held) => {
                total += held.size;
                nodes += held.nodes;
                hits.insert(path.as_str());
            }
            None if !files.files.contains_key(path) => {
                return Err(LoadError::Invalid {
                    origin: Origin { file: Arc::from(path.as_str()), document: 0, line: 0 },
                    message: "the source did not read this file and no cached copy exists".into(),
                });
            }
            None => {}
        }
    }
    if total > limits.max_total_bytes {
        return Err(LoadError::RepoTooLarge { limit: limits.max_total_bytes });
    }
    if nodes > limits.max_total_nodes {
        return Err(LoadError::TooManyNodes { limit: limits.max_total_nodes });
    }
    for (path, bytes) in
        files.files.iter().filter(|(p, _)| RepoFiles::is_manifest_path(p) && !hits.contains(p.as_str()))
    {
        if bytes.len() > limits.max_file_bytes {
            return Err(LoadError::FileTooLarge {
                file: path.clone(),
                size: bytes.len(),
                limit: limits.max_file_bytes,
            });
        }
        total += bytes.len();
        if total > limits.max_total_bytes {
            return Err(LoadError::RepoTooLarge { limit: limits.max_total_bytes });
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| LoadError::NotUtf8 { file: path.clone(), offset: e.valid_up_to() })?;
        let chunks = split(text);
        if chunks.len() > limits.max_documents_per_file {
            return Err(LoadError::TooManyDocuments { file: path.clone(), limit: limits.max_documents_per_file });
        }
        let shared: Arc<str> = Arc::from(path.as_str());
        out.extend(chunks.into_iter().map(|c| (shared.clone(), c)));
    }
    Ok((out, hits, nodes))
}
