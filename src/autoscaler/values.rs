//! Write-back through a Helm chart's values: a workload the chart renders has no file of
//! its own, so its count goes to the values key its HelmChart names for it
//! (`spec.replicaValues`; where, `flotilla_core::sources::replicas` decides). The edit is
//! proved twice before it is committed: the edited documents differ from the head's in
//! that key only, and the edited revision, rendered by Helm, gives the workload exactly
//! the count (a key the chart does not turn into `spec.replicas` is refused, not
//! committed).

use flotilla_core::load::{self, ParseCache};
use flotilla_core::model::{Limits, Loaded, RepoFiles};
use flotilla_core::sources::replicas::{self, Location};
use serde_json::Value;

use super::writeback::{Edit, Target};

/// Where `edit` is written when its target is rendered by a chart: `None` for a target
/// declared in a file of its own. `read` gives a repository file's text.
pub fn location(
    loaded: &Loaded,
    edit: &Edit,
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<Option<Location>, String> {
    let Target::Template(key) = &edit.target else { return Ok(None) };
    let Some(template) = loaded.template(key) else { return Ok(None) };
    if !flotilla_core::sources::is_output(&template.origin.file) {
        return Ok(None);
    }
    let chart = replicas::chart_of(&loaded.helm_charts, &template.origin.file).ok_or_else(|| {
        format!("{key} is rendered by a kustomization: there is no values key to write its replicas to")
    })?;
    let entry = replicas::entry(chart, key).ok_or_else(|| {
        format!("{key} is rendered by HelmChart {}, whose spec.replicaValues does not name it", chart.name)
    })?;
    let keys = entry.keys()?;
    let limits = Limits::default();
    let mut files = Vec::with_capacity(chart.spec.values_files.len());
    for file in &chart.spec.values_files {
        files.push((file.as_str(), load::parse_embedded(&read(file)?, &limits).ok()));
    }
    Ok(Some(replicas::location(chart, &keys, &files)))
}

/// The documents of `text`, parsed (`Null` for one that does not parse).
fn documents(text: &str) -> Vec<(usize, Value)> {
    let limits = Limits::default();
    load::split(text)
        .into_iter()
        .map(|c| (c.document, load::parse_embedded(c.text, &limits).unwrap_or(Value::Null)))
        .collect()
}

/// Sets `path` in `value` to `to`, making mappings on the way.
fn set(value: &mut Value, path: &[String], to: i64) {
    let mut at = value;
    for key in path {
        if !at.is_object() {
            *at = Value::Object(Default::default());
        }
        at = at.as_object_mut().expect("a mapping").entry(key.clone()).or_insert(Value::Null);
    }
    *at = Value::from(to);
}

/// `file` before and after the values edits `placed` (each a location and its count):
/// every document the same but for those keys, which hold their counts. Documents in
/// `others` (edited by plain write-backs, checked on their own) are not compared.
pub fn verify(
    file: &str,
    before: &str,
    after: &str,
    placed: &[(&Location, i64)],
    others: &[usize],
) -> Result<(), String> {
    let (mut old, new) = (documents(before), documents(after));
    if old.len() != new.len() {
        return Err(format!("editing {file} changed its documents (refusing to commit)"));
    }
    for (location, to) in placed {
        let Some((_, doc)) = old.iter_mut().find(|(d, _)| *d == location.document) else {
            return Err(format!("{file} has no document {}", location.document));
        };
        set(doc, &location.path, *to);
    }
    for ((document, want), (_, got)) in old.iter().zip(&new) {
        if !others.contains(document) && want != got {
            return Err(format!(
                "editing {file} changed more than the intended values keys, or not them (refusing to commit)"
            ));
        }
    }
    Ok(())
}

/// Renders the edited revision (`files` with `edited` in place) and checks that every
/// edit through a chart gave its workload exactly its count.
pub fn rendered(
    files: &RepoFiles,
    edited: &[(String, Vec<u8>)],
    through: &[&Edit],
    cache: &mut ParseCache,
) -> Result<(), String> {
    let mut files = files.clone();
    for (file, bytes) in edited {
        files.ids.remove(file);
        files.files.insert(file.clone(), bytes.clone());
    }
    let limits = Limits::default();
    let loaded = crate::source::load(&files, cache, &limits)
        .map_err(|e| format!("the edited revision does not render: {e:#}"))?;
    for edit in through {
        let Target::Template(key) = &edit.target else { continue };
        let got = loaded.template(key).and_then(|t| t.object().pointer("/spec/replicas").and_then(Value::as_i64));
        if got != Some(edit.value) {
            return Err(format!(
                "the values key named for {key} does not set its replicas: with {} written, the chart renders {} \
                 (refusing to commit; fix spec.replicaValues)",
                edit.value,
                got.map_or("none".into(), |n| n.to_string())
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: &str, document: usize, path: &[&str]) -> Location {
        Location { file: file.into(), document, path: path.iter().map(|p| (*p).to_owned()).collect() }
    }

    #[test]
    fn only_the_named_key_may_change() {
        let before = "# prod\nweb:\n  replicas: 2 # scaled\n  image: x\n";
        let after = before.replace("replicas: 2", "replicas: 5");
        let here = at("v.yaml", 1, &["web", "replicas"]);
        assert_eq!(verify("v.yaml", before, &after, &[(&here, 5)], &[]), Ok(()));
        // The wrong count, another key changed too, or a document added: refused.
        assert!(verify("v.yaml", before, &after, &[(&here, 4)], &[]).is_err());
        let more = after.replace("image: x", "image: y");
        assert!(verify("v.yaml", before, &more, &[(&here, 5)], &[]).is_err());
        assert!(verify("v.yaml", before, &format!("{after}---\na: 1\n"), &[(&here, 5)], &[]).is_err());
    }

    #[test]
    fn a_key_added_under_spec_values_is_the_only_change_of_its_document() {
        let before = "kind: ConfigMap\n---\nkind: HelmChart\nspec:\n  chart: c\n";
        let after =
            "kind: ConfigMap\n---\nkind: HelmChart\nspec:\n  values:\n    web:\n      replicas: 3\n  chart: c\n";
        let here = at("f.yaml", 2, &["spec", "values", "web", "replicas"]);
        assert_eq!(verify("f.yaml", before, after, &[(&here, 3)], &[]), Ok(()));
        // The other document changed: refused unless a plain write-back edited it.
        let other = after.replace("kind: ConfigMap", "kind: ConfigMap\ndata: {a: b}");
        assert!(verify("f.yaml", before, &other, &[(&here, 3)], &[]).is_err());
        assert_eq!(verify("f.yaml", before, &other, &[(&here, 3)], &[1]), Ok(()));
    }
}
