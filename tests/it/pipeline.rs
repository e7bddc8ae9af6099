//! Fixture repos (`tests/fixtures/<case>/`) rendered through `flotilla_core::plan` and
//! compared with YAML snapshots. Cases without Cluster objects get `clusters.yaml`;
//! `state.yaml` is the cluster state.

use std::path::Path;

use flotilla_core::model::{ClusterState, Limits, RepoFiles};

use crate::support::root;

fn render_case(case: &str) -> String {
    let fixtures = root().join("tests/fixtures");
    let dir = fixtures.join(case);
    let mut files = RepoFiles { revision: format!("fixture-{case}"), ..Default::default() };
    let mut state = ClusterState::default();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).unwrap();
        if name == "state.yaml" {
            state = serde_saphyr::from_slice(&bytes).unwrap();
        } else {
            files.files.insert(name, bytes);
        }
    }
    if !files.files.values().any(|b| String::from_utf8_lossy(b).contains("kind: Cluster\n")) {
        files.files.insert("clusters.yaml".into(), std::fs::read(fixtures.join("clusters.yaml")).unwrap());
    }
    let plan = flotilla_core::plan(&files, &state, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut out = flotilla_core::yaml::to_string(&plan.view(&[])).unwrap();
    let suspended: Vec<String> = plan
        .clusters
        .iter()
        .flat_map(|(c, items)| items.iter().filter(|r| r.suspended).map(move |r| (c, r)))
        .map(|(c, r)| format!("#   {} in {c}\n", plan.loaded.templates[r.template].key))
        .collect();
    if !suspended.is_empty() {
        out.push_str("# suspended:\n");
        out.extend(suspended);
    }
    if !plan.unclaimed.is_empty() {
        out.push_str("# unclaimed:\n");
        for key in &plan.unclaimed {
            out.push_str(&format!("#   {key}\n"));
        }
    }
    out
}

fn snapshot(case: &str) {
    let rendered = render_case(case);
    insta::with_settings!({snapshot_path => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(case, rendered);
    });
}

#[test]
fn placement() {
    snapshot("placement");
}

#[test]
fn divided() {
    snapshot("divided");
}

#[test]
fn overrides() {
    snapshot("overrides");
}

#[test]
fn dependencies() {
    snapshot("dependencies");
}

#[test]
fn problems() {
    snapshot("problems");
}

#[test]
fn precedence() {
    snapshot("precedence");
}

#[test]
fn rendering_is_deterministic() {
    for case in ["placement", "divided", "overrides", "dependencies", "problems", "precedence"] {
        assert_eq!(render_case(case), render_case(case), "{case}");
    }
}
